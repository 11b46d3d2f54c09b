package contain

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits caps what a command and everything it starts may use, enforced
// by the kernel in the command's cgroup (see "Resource limits" in the package doc).
// The zero value sets none; each zero field sets none of its kind.
type Limits struct {
	// Memory is the most memory, in bytes, the command's processes may
	// use together; past it the kernel reclaims, then kills one of them
	// (the task then ends saying so: Ended.MemoryKills).
	Memory int64
	// Pids is the most processes (threads included) the command may have
	// at once; a fork past it fails (EAGAIN).
	Pids int
	// CPUs is how many CPUs' worth of time the command may use (1.5: one
	// and a half), measured over 100 ms periods.
	CPUs float64
}

// IsZero says whether l sets no limit.
func (l Limits) IsZero() bool { return l == Limits{} }

// Validate says what is wrong with l, if anything: no value may be
// negative, and a set one must be large enough to run a shell.
func (l Limits) Validate() error {
	switch {
	case l.Memory < 0 || l.Pids < 0 || l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return errors.New("proc: a limit must not be negative")
	case l.Memory != 0 && l.Memory < minMemoryLimit:
		return fmt.Errorf("proc: a memory limit of %s is too small to run a shell; give at least %s", FormatSize(l.Memory), FormatSize(minMemoryLimit))
	case l.Pids == 1:
		return errors.New("proc: a process limit of 1 leaves a shell no room for a command; give at least 2")
	case l.CPUs != 0 && l.CPUs < minCPUs:
		return fmt.Errorf("proc: a CPU limit of %g is below the kernel's least, %g", l.CPUs, minCPUs)
	}
	return nil
}

// The smallest limits Validate accepts: a shell needs a few MiB, and the
// kernel's least CPU quota is 1 ms per 100 ms period.
const (
	minMemoryLimit = 4 << 20
	minCPUs        = 0.01
)

// Narrow returns the tighter of l and m, limit by limit (a limit either
// sets beats none): what a narrower policy, such as a sub-agent's, makes
// of a wider one. It never lifts a limit of l.
func (l Limits) Narrow(m Limits) Limits {
	tighter := func(a, b int64) int64 {
		if a == 0 || b != 0 && b < a {
			return b
		}
		return a
	}
	l.Memory = tighter(l.Memory, m.Memory)
	l.Pids = int(tighter(int64(l.Pids), int64(m.Pids)))
	if l.CPUs == 0 || m.CPUs != 0 && m.CPUs < l.CPUs {
		l.CPUs = m.CPUs
	}
	return l
}

// String lists the limits set: "memory 2 GiB, 64 processes, 1.5 CPUs";
// "none" when none is.
func (l Limits) String() string {
	var parts []string
	if l.Memory > 0 {
		parts = append(parts, "memory "+FormatSize(l.Memory))
	}
	if l.Pids > 0 {
		parts = append(parts, strconv.Itoa(l.Pids)+" processes")
	}
	if l.CPUs > 0 {
		parts = append(parts, strconv.FormatFloat(l.CPUs, 'g', -1, 64)+" CPUs")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// ParseSize reads a size in bytes: a number with an optional suffix K, M,
// G or T (powers of 1024; "KiB", "MB" and lower case mean the same), such
// as 512M or 2G or 1.5G.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	shift := 0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			shift, t = 10*(i+1), t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || t == "" || strings.ContainsAny(t, "eExXpP_") {
		return 0, fmt.Errorf("%q is not a size: give a number of bytes with K, M, G or T, such as 512M or 2G", s)
	}
	v *= float64(int64(1) << shift)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is more bytes than a limit can hold", s)
	}
	return int64(v), nil
}

// FormatSize writes n bytes for a reader: "2 GiB", "64 MiB", "1.5 GiB",
// "900 B".
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + units[i]
}

// LimitController says where one kind of limit is enforced on this host.
type LimitController struct {
	Name string // "memory", "pids" or "cpu": the Limits field it takes
	// Where is "cgroup v2", or "cgroup v1 at DIR" on hybrid hosts; empty
	// when Err says why the limit cannot be enforced here.
	Where string
	Err   error
}

// String is the line a program shows, e.g. "memory limit: cgroup v2".
func (c LimitController) String() string {
	if c.Err != nil {
		return c.Name + " limit: cannot be enforced: " + c.Err.Error()
	}
	return c.Name + " limit: " + c.Where
}
