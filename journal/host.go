package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NewID returns a fresh id: the time, sortable, and random hex.
func NewID() string {
	var b [3]byte
	rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// ThisHost describes the calling process, with a fresh id.
func ThisHost(version string) Host {
	name, _ := os.Hostname()
	start, _ := ProcessStart(os.Getpid())
	return Host{ID: NewID(), Hostname: name, PID: os.Getpid(), Start: start, Started: time.Now(), Version: version}
}

// ProcessStart returns when process pid started, in clock ticks since
// boot (field 22 of /proc/PID/stat): with the pid, it names a process
// even after the pid is reused.
func ProcessStart(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("journal: unreadable stat of pid " + strconv.Itoa(pid))
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, errors.New("journal: short stat of pid " + strconv.Itoa(pid))
	}
	return strconv.ParseInt(f[19], 10, 64) // field 22 is the 20th after the name
}

// Same reports whether pid is still the process that started at start.
func Same(pid int, start int64) bool {
	if pid <= 0 || start == 0 {
		return false
	}
	s, err := ProcessStart(pid)
	return err == nil && s == start
}

// Alive reports whether h still runs. A host of another machine counts as
// alive: this machine cannot tell (a shared journal decides that with
// leases).
func Alive(h Host) bool {
	if name, _ := os.Hostname(); h.Hostname != name {
		return true
	}
	if h.Start == 0 { // no /proc where it ran: a live pid counts
		err := syscall.Kill(h.PID, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	return Same(h.PID, h.Start)
}

// Recovered is what Recover found: tasks of dead hosts, now orphaned, and
// how many of their processes it stopped.
type Recovered struct {
	Tasks  []Task
	Killed int
}

// Recover looks for hosts of this machine that died with sessions open or
// tasks unfinished: their unfinished tasks become orphaned, their
// sessions end, and the process groups of their shells that still run
// (the leader's pid and start time both match what was recorded; never a
// bare pid) are killed. Hosts still alive, and self, are left alone.
func Recover(ctx context.Context, store Store, self Host) (Recovered, error) {
	var r Recovered
	hosts, err := store.Hosts(ctx, self.ID)
	if err != nil {
		return r, fmt.Errorf("journal: %w", err)
	}
	for _, h := range hosts {
		if Alive(h) {
			continue
		}
		tasks, err := store.Orphan(ctx, h.ID, time.Now())
		if err != nil {
			return r, fmt.Errorf("journal: %w", err)
		}
		for _, t := range tasks {
			if Same(t.PID, t.PIDStart) && syscall.Kill(-t.PID, syscall.SIGKILL) == nil {
				r.Killed++
			}
		}
		r.Tasks = append(r.Tasks, tasks...)
	}
	return r, nil
}
