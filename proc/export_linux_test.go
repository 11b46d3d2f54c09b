package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/offstage/offstage/proc/internal/contain"
	"github.com/offstage/offstage/proc/internal/sandbox"
)

// ThroughStep says whether p, sandboxed, was started through the step
// rather than forked from a fenced thread.
func (p *Process) ThroughStep() bool { return p.sandbox.ThroughStep() }

// Forked says whether p, sandboxed, was started by the forker of a host
// that is not root.
func (p *Process) Forked() bool { return p.sandbox.Forked() }

// SandboxForker turns the forker of a host that is not root on (the
// default) or off: off, its sandboxed commands start through the step.
func SandboxForker(on bool) { sandbox.UseForker(on) }

// ForkerPID is the pid of this host's forker, 0 if none runs.
func ForkerPID() int { return sandbox.ForkerPID() }

// ForkerCPU is the CPU time this host's forker has used (0 if none
// runs), in ns, to the kernel's clock tick: it is no reaped child, so
// RUSAGE_CHILDREN leaves it out.
func ForkerCPU() int64 {
	pid := sandbox.ForkerPID()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return (utime + stime) * int64(time.Second) / 100 // USER_HZ
}

// OwnFork turns the root fence's own fork on (the default) or off, and
// says how many starts it has forked so far.
func OwnFork(on bool) int64 { return contain.OwnFork(on) }

// FenceRemakes says how many times the root fence's namespace was made
// again for a change of the host's mounts.
func FenceRemakes() int64 { return contain.FenceRemakes() }

// RootFence turns the root fence on (as it is) or off, for the starts
// that follow.
func RootFence(on bool) { contain.RootFence(on) }

// SandboxABI makes sandboxes plan and fence for Landlock ABI n where the
// kernel's is higher (0: the kernel's), as on an older kernel.
func SandboxABI(n int) { sandbox.PretendABI(n) }

// SandboxMounts turns the sandbox's read-only mounts on (where the host
// can make them) or off, so that Landlock alone refuses writes.
func SandboxMounts(on bool) { sandbox.Mounts(on) }

// InlineReaper turns the inline reaper (serve_linux.go) on (the default)
// or off, or on without a pidfd, and returns how to put it back; it also
// says how many processes it has served.
func InlineReaper(on, pidfd bool) (restore func(), served int64) {
	wasOff, wasNoPidfd := noInline.Load(), noPidfd.Load()
	noInline.Store(!on)
	noPidfd.Store(!pidfd)
	return func() { noInline.Store(wasOff); noPidfd.Store(wasNoPidfd) }, inlineServed()
}

func inlineServed() int64 { return served.Load() }

// ServedBy says how many processes served inline were first served by a
// Wait on its own goroutine, by a goroutine of their own after another
// look, and by the sweeper, nobody having looked.
func ServedBy() (wait, look, sweeper int64) {
	return servedBy[byWait].Load(), servedBy[byLook].Load(), servedBy[bySweeper].Load()
}
