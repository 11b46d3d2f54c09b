package contain

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits on Linux (see "Resource limits" in the package doc): each controller
// (memory, pids, cpu) is taken from the cgroup v2 hierarchy where it has
// it, enabled in the host's directory's cgroup.subtree_control, and
// otherwise from its cgroup v1 hierarchy (hybrid hosts), where each
// command gets a cgroup of its own under the host's cgroup there, named
// as in v2. A command with a v1 limit is started traced, as in ModeMarks:
// the kernel stops it at its exec, the host writes its pid into its v1
// cgroups and lets it go, so no instruction of the command runs outside
// them.

// The controllers, in the order of Limits' fields.
var limitNames = [...]string{"memory", "pids", "cpu"}

const (
	ctlMemory = iota
	ctlPids
	ctlCPU
)

// limitCtl says where one controller's limits are written, decided once
// per host (cgroupHost.controllers).
type limitCtl struct {
	v2  bool   // in the command's own cgroup v2
	v1  string // else in a cgroup under this directory of the v1 hierarchy
	err error  // else why it cannot be enforced
}

// cpuPeriod is the period, in microseconds, over which a CPU limit is
// measured: the kernel's default.
const cpuPeriod = 100000

// CheckLimits says whether this host can enforce l, deciding the
// containment if no Start has yet (as Containment does); nil for the zero
// Limits. A program calls it at start-up, so that a limit that would not
// hold is an error then rather than at its first command. Start fails
// with the same error. Safe for concurrent use.
func CheckLimits(l Limits) error {
	if l.IsZero() {
		return nil
	}
	if err := l.Validate(); err != nil {
		return err
	}
	ensureKeeper()
	info, h := containment()
	if info.Err != nil {
		return info.Err
	}
	if h == nil {
		return fmt.Errorf("proc: limits (%s) need a cgroup per command, and this host contains its commands by %s (%s): run without limits, or where a cgroup v2 is writable", l, info.Mode, info.Reason)
	}
	return h.check(l)
}

func (h *cgroupHost) check(l Limits) error {
	ctl := h.controllers()
	for i, set := range l.set() {
		if set && ctl[i].err != nil {
			return fmt.Errorf("proc: the %s limit cannot be enforced: %w", limitNames[i], ctl[i].err)
		}
	}
	return nil
}

// set says which limits are set, in the order of limitNames.
func (l Limits) set() [3]bool { return [3]bool{l.Memory > 0, l.Pids > 0, l.CPUs > 0} }

// controllers finds, once, where each controller's limits go. It
// enables the v2 ones in the host's directory, and makes the host's
// directories under the v1 ones it needs.
func (h *cgroupHost) controllers() *[3]limitCtl {
	h.limitOnce.Do(func() {
		avail := strings.Fields(string(readSmall(h.dir + "/cgroup.controllers")))
		self, _ := os.ReadFile("/proc/self/cgroup")
		mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
		name := h.dir[strings.LastIndexByte(h.dir, '/')+1:]
		var traceErr error
		traceChecked := false
		for i, ctl := range limitNames {
			c := &h.ctl[i]
			var v2err error
			if !slices.Contains(avail, ctl) {
				if v2err = h.enable(ctl); v2err == nil {
					avail = strings.Fields(string(readSmall(h.dir + "/cgroup.controllers")))
				}
			}
			if slices.Contains(avail, ctl) {
				if ctl == "memory" {
					h.memoryOn.Store(true) // before any cgroup can have its files
				}
				if err := os.WriteFile(h.dir+"/cgroup.subtree_control", []byte("+"+ctl), 0); err != nil {
					c.err = fmt.Errorf("cgroup v2 has the %s controller, but it cannot be enabled in %s: %w", ctl, h.dir, err)
					continue
				}
				c.v2 = true
				continue
			}
			base, err := findV1Dir(ctl, self, mountinfo)
			if err != nil {
				if v2err == nil {
					v2err = fmt.Errorf("the cgroup v2 at %s did not pass the %s controller on to %s", h.base, ctl, h.dir)
				}
				c.err = fmt.Errorf("%w; and %w", v2err, err)
				continue
			}
			if !traceChecked {
				traceErr, traceChecked = detectTrace(), true
			}
			if traceErr != nil {
				c.err = fmt.Errorf("the %s controller is on cgroup v1 at %s, and moving a command there before it runs needs ptrace: %w", ctl, base, traceErr)
				continue
			}
			dir := base + "/" + name
			if err := syscall.Mkdir(dir, 0o755); err != nil && !errors.Is(err, syscall.EEXIST) {
				c.err = fmt.Errorf("the %s controller is on cgroup v1 at %s, which is not writable: %w", ctl, base, err)
				continue
			}
			c.v1 = dir
		}
	})
	return &h.ctl
}

// findV1Dir returns the directory of this process's cgroup in the v1
// hierarchy that has controller ctl: its line "N:CTLS:PATH" in
// /proc/self/cgroup and a mount of type cgroup with ctl in its options.
func findV1Dir(ctl string, self, mountinfo []byte) (string, error) {
	path, found := "", false
	for line := range strings.SplitSeq(string(self), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), ctl) {
			path, found = f[2], true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("no cgroup v1 hierarchy has it")
	}
	for line := range strings.SplitSeq(string(mountinfo), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(pf) < 5 || len(qf) < 3 || qf[0] != "cgroup" || !slices.Contains(strings.Split(qf[2], ","), ctl) {
			continue
		}
		root, point := unescapeMount(pf[3]), unescapeMount(pf[4])
		rel, ok := strings.CutPrefix(path, root)
		if root == "/" {
			rel, ok = path, true
		}
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			continue
		}
		dir := strings.TrimSuffix(point, "/") + strings.TrimSuffix(rel, "/")
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no mount of its cgroup v1 hierarchy shows this process's cgroup %s", path)
}

// limit applies l to the command's cgroup c, named seq under the host's
// directories; the v1 cgroups it makes are listed in c.v1.
func (c *cgroup) limit(h *cgroupHost, l Limits, seq string) error {
	if l.IsZero() {
		return nil
	}
	if err := h.check(l); err != nil {
		return err
	}
	c.limited = true
	ctl := h.controllers()
	period := strconv.Itoa(cpuPeriod)
	quota := strconv.FormatInt(max(1000, int64(math.Round(l.CPUs*cpuPeriod))), 10)
	for i, set := range l.set() {
		if !set {
			continue
		}
		dir := c.dir
		if !ctl[i].v2 {
			dir = ctl[i].v1 + "/" + seq
			if !slices.Contains(c.v1, dir) {
				if err := syscall.Mkdir(dir, 0o755); err != nil && !errors.Is(err, syscall.EEXIST) {
					return fmt.Errorf("proc: make %s cgroup: %w", limitNames[i], err)
				}
				c.v1 = append(c.v1, dir)
			}
		}
		if err := writeLimit(i, dir, ctl[i].v2, l, period, quota); err != nil {
			return err
		}
		switch i {
		case ctlMemory:
			c.memLimit = l.Memory
			if !ctl[i].v2 {
				c.memV1 = dir
			}
		case ctlPids:
			c.pidsMax = l.Pids
			if !ctl[i].v2 {
				c.pidsV1 = dir
			}
		}
	}
	return nil
}

// writeLimit writes limit i of l into the cgroup dir, in v2's files or
// v1's.
func writeLimit(i int, dir string, v2 bool, l Limits, period, quota string) error {
	var files [][2]string // name, value
	switch {
	case i == ctlMemory && v2:
		files = [][2]string{{"memory.max", strconv.FormatInt(l.Memory, 10)}}
	case i == ctlMemory:
		files = [][2]string{{"memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)}}
	case i == ctlPids:
		files = [][2]string{{"pids.max", strconv.Itoa(l.Pids)}}
	case i == ctlCPU && v2:
		files = [][2]string{{"cpu.max", quota + " " + period}}
	default:
		files = [][2]string{{"cpu.cfs_period_us", period}, {"cpu.cfs_quota_us", quota}}
	}
	for _, f := range files {
		if err := os.WriteFile(dir+"/"+f[0], []byte(f[1]), 0); err != nil {
			return fmt.Errorf("proc: set %s in %s: %w", f[0], dir, err)
		}
	}
	return nil
}

// traceStart prepares sys for a start stopped at the exec when the
// command has v1 cgroups to join, and says whether it did: then the
// caller's goroutine is locked to its thread until joinStarted or
// untrace (ptrace requests must come from the thread that forked).
func (c *cgroup) traceStart(sys *syscall.SysProcAttr) bool {
	if len(c.v1) == 0 {
		return false
	}
	runtime.LockOSThread()
	sys.Ptrace = true
	return true
}

// joinStarted moves the started leader, stopped at its exec, into its v1
// cgroups and lets it go.
func (c *cgroup) joinStarted(pid int) error {
	defer runtime.UnlockOSThread()
	join, err := c.joiner(-1)
	if err != nil {
		detach(pid)
		return err
	}
	return join(pid)
}

// joiner opens the cgroup.procs files of the command's v1 cgroups now,
// and of its v2 cgroup where v2 is that cgroup's directory open (else
// -1), for a thread that cannot open them later (the root fence's, whose
// cgroup mounts are read-only), and returns what joins pid to them and
// lets it go, on the thread that traces it.
func (c *cgroup) joiner(v2 int) (func(pid int) error, error) {
	var files []*os.File
	fail := func(dir string, err error) (func(int) error, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("proc: move the command into %s: %w", dir, err)
	}
	if v2 >= 0 {
		fd, err := unix.Openat(v2, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(c.dir, err)
		}
		files = append(files, os.NewFile(uintptr(fd), c.dir+"/cgroup.procs"))
	}
	for _, dir := range c.v1 {
		f, err := os.OpenFile(dir+"/cgroup.procs", os.O_WRONLY, 0)
		if err != nil {
			return fail(dir, err)
		}
		files = append(files, f)
	}
	return func(pid int) error {
		var err error
		for _, f := range files {
			if _, werr := f.Write([]byte(strconv.Itoa(pid))); werr != nil && err == nil {
				err = fmt.Errorf("proc: move the command into %s: %w", f.Name(), werr)
			}
			f.Close()
		}
		if derr := detach(pid); err == nil {
			err = derr
		}
		return err
	}, nil
}

// memoryKills returns how many of the command's processes the kernel
// killed for reaching its memory limit: oom_kill in memory.events (v2) or
// in memory.oom_control (v1). 0 without a memory limit.
// forksRefused counts the forks the kernel refused the command because
// it had as many processes as its pids limit allows (pids.events' max).
func (c *cgroup) forksRefused() int {
	if c.pidsMax == 0 {
		return 0
	}
	dir := c.dir
	if c.pidsV1 != "" {
		dir = c.pidsV1
	}
	n, _ := eventValue(readSmall(dir+"/pids.events"), "max")
	return int(n)
}

func (c *cgroup) memoryKills() int {
	if c.memLimit == 0 {
		return 0
	}
	file := c.dir + "/memory.events"
	if c.memV1 != "" {
		file = c.memV1 + "/memory.oom_control"
	}
	n, _ := eventValue(readSmall(file), "oom_kill")
	return int(n)
}

// removeV1 removes the command's v1 cgroups; it fails (EBUSY) while a
// process is still in one.
func (c *cgroup) removeV1() error {
	var first error
	for _, dir := range c.v1 {
		if err := removeTree(dir); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// V1Bases returns this process's cgroups in the v1 hierarchies of the
// limit controllers (one per hierarchy), where hosts make their v1
// directories: the keeper (which runs in its host's cgroups) removes its
// host's there, and a host sweeps those of hosts that are gone.
func V1Bases() []string {
	self, _ := os.ReadFile("/proc/self/cgroup")
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	var dirs []string
	for _, ctl := range limitNames {
		if dir, err := findV1Dir(ctl, self, mountinfo); err == nil && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// LimitControllers says, for each kind of limit, where this host enforces
// it or why it cannot. Like CheckLimits it decides the containment, and
// readies the controllers (as the first command with a limit would).
func LimitControllers() []LimitController {
	ensureKeeper()
	info, h := containment()
	out := make([]LimitController, len(limitNames))
	for i, name := range limitNames {
		out[i].Name = name
		switch {
		case info.Err != nil:
			out[i].Err = info.Err
		case h == nil:
			out[i].Err = fmt.Errorf("limits need a cgroup per command, and this host contains its commands by %s (%s)", info.Mode, info.Reason)
		default:
			ctl := h.controllers()[i]
			switch {
			case ctl.err != nil:
				out[i].Err = ctl.err
			case ctl.v2:
				out[i].Where = "cgroup v2"
			default:
				out[i].Where = "cgroup v1 at " + ctl.v1
			}
		}
	}
	return out
}
