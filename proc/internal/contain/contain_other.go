//go:build unix && !linux

package contain

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Containment beyond the process group needs /proc and prlimit, which
// this system does not offer as Linux does: these are its stand-ins (see
// "Containment" in the package doc for what holds here).

func traceStart(sys *syscall.SysProcAttr) bool                                 { return false }
func untrace()                                                                 {}
func markStarted(pid int, m mark, traced bool) error                           { return nil }
func signalMarks(m mark, sig syscall.Signal) int                               { return 0 }
func killMarks(m mark, leader int, deep bool, deadline time.Time) (int, error) { return 0, nil }
func countMarks(m mark) int                                                    { return 0 }
func forkedSince(pid int) (bool, int)                                          { return false, 0 }
func ensureKeeper()                                                            {}

// Helper does nothing: there is no scan for leftovers here.
func Helper(pid int) (remove func()) { return func() {} }

func containment() (Info, *cgroupHost) {
	return Info{Mode: ModeGroup, Reason: "no cgroups or prlimit on this system"}, nil
}

// cgroupHost and cgroup exist on Linux only; these are never made here.
type cgroupHost struct{}
type cgroup struct{}

func newTaskCgroup(l Limits) (*cgroup, error) {
	if !l.IsZero() {
		return nil, CheckLimits(l)
	}
	return nil, nil
}

// CheckLimits says whether this host can enforce l: never, here, but for
// the zero Limits (limits need Linux's cgroups).
func CheckLimits(l Limits) error {
	if l.IsZero() {
		return nil
	}
	if err := l.Validate(); err != nil {
		return err
	}
	return fmt.Errorf("proc: limits (%s) need Linux's cgroups; this system contains commands by their process group", l)
}

func (c *cgroup) traceStart(sys *syscall.SysProcAttr) bool { return false }
func (c *cgroup) joinStarted(pid int) error                { return nil }
func (c *cgroup) memoryKills() int                         { return 0 }
func (c *cgroup) forksRefused() int                        { return 0 }
func (c *cgroup) attach(sys *syscall.SysProcAttr)          {}
func (c *cgroup) closeDir()                                {}
func (c *cgroup) count(skip int) int                       { return 0 }
func (c *cgroup) populated() bool                          { return false }
func (c *cgroup) usage() (time.Duration, int64, int64)     { return 0, 0, 0 }
func (c *cgroup) signal(sig syscall.Signal) int            { return 0 }
func (c *cgroup) kill()                                    {}
func (c *cgroup) waitEmpty(deadline time.Time) bool        { return true }
func (c *cgroup) remove() error                            { return nil }
func (c *cgroup) release(alone bool) error                 { return nil }
func (c *cgroup) finalUsage() (time.Duration, int64)       { return 0, 0 }

func DrainSpares() int { return 0 }

// KeeperInfo describes this host's keeper: a diagnostic for tests, not
// API (the keeper is an implementation of containment).
type KeeperInfo struct {
	PID          int   // 0 when none runs
	RSS, Private int64 // its resident and its own memory in bytes
	Err          error // why none runs
}

// KeeperStatus reports on this host's keeper: there is none on this system.
func KeeperStatus() KeeperInfo {
	return KeeperInfo{Err: errors.New("proc: no keeper on this system; only the process group and the lifeline contain a task")}
}

// V1Bases: no cgroup v1 here.
func V1Bases() []string { return nil }

// LimitControllers says that no limit can be enforced here.
func LimitControllers() []LimitController {
	var out []LimitController
	for _, name := range []string{"memory", "pids", "cpu"} {
		out = append(out, LimitController{Name: name, Err: errors.New("limits need Linux's cgroups")})
	}
	return out
}

// fencedStart starts cmd: no root fence here (see rootFenceNote).
func (t *Task) fencedStart(cmd *exec.Cmd) (joined bool, joinErr, err error) {
	return false, nil, cmd.Start()
}

func rootNote(Info) string { return "" }
