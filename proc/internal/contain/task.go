package contain

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Task is one command's containment: its mark and, in ModeCgroup, its
// cgroup. Package proc makes one per Start (New), prepares the command
// with it (Prepare, Start, Started), signals and counts through it while
// the command runs, and ends what the leader left (EndLeftovers, Release)
// once the leader has exited. Prepare, Untrace, Start, Started and Abort
// belong to the goroutine that starts the command (a traced start locks
// it to its thread); the others are safe for concurrent use.
type Task struct {
	mark   mark
	limits Limits
	cg     *cgroup // nil but in ModeCgroup
	pid    int     // the leader, once started
	traced bool    // the start is traced: its goroutine is locked to its thread

	// joined and joinErr: a traced start in its v1 cgroups already, joined
	// on the root fence's thread (see Start).
	joined  bool
	joinErr error

	usageMu  sync.Mutex    // guards the highest usage seen, below
	peakSeen int64         // the highest memory Usage saw
	cpuSeen  time.Duration // the highest CPU time Usage saw
}

// New makes the containment of one command, limited by l: a mark, and a
// cgroup in ModeCgroup (where limits are refused, it fails as CheckLimits
// says). It starts this host's keeper first if none runs.
func New(l Limits) (*Task, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	ensureKeeper()
	t := &Task{mark: newMark(), limits: l}
	cg, err := newTaskCgroup(l)
	if err != nil {
		return nil, err
	}
	t.cg = cg
	return t, nil
}

// Env returns the environment variable that carries the task's mark
// ("OFFSTAGE_MARK=N"), for the command's environment.
func (t *Task) Env() string { return t.mark.env() }

// Prepare makes sys start the command contained: cloned into its cgroup,
// or traced so that its mark is set before its first instruction (or,
// with limits on cgroup v1, it joins those cgroups at its exec). It says
// whether the start is traced: then the calling goroutine is locked to
// its thread until Started, or Untrace after a failure.
func (t *Task) Prepare(sys *syscall.SysProcAttr) (traced bool) {
	if t.cg != nil {
		t.cg.attach(sys)
		t.traced = t.cg.traceStart(sys)
	} else {
		t.traced = traceStart(sys)
	}
	return t.traced
}

// Untrace ends a traced start that failed before Started.
func (t *Task) Untrace() {
	if t.traced {
		untrace()
		t.traced = false
	}
}

// Start starts cmd prepared: by start when given (a sandbox's), else
// from the root fence's thread where that applies (a command run by root
// in a cgroup), else by cmd.Start.
func (t *Task) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	var err error
	switch {
	case start != nil:
		err = start(cmd)
	case t.cg == nil:
		err = cmd.Start()
	default:
		t.joined, t.joinErr, err = t.fencedStart(cmd)
	}
	if t.traced && (err != nil || t.joined) {
		t.Untrace() // joined: on the thread that forked, not this one
	}
	return err
}

// Started finishes a start that succeeded: the cgroup's directory is
// closed, and a traced leader joins its v1 cgroups or gets its mark, and
// is let go. A leader that cannot join must be killed and reaped by the
// caller.
func (t *Task) Started(cmd *exec.Cmd) error {
	t.pid = cmd.Process.Pid
	if t.cg == nil {
		// Traced, the shell is stopped at its exec: everything it forks
		// inherits the mark. Untraced, it has seldom had the time to fork;
		// one that forks faster is found by the environment.
		markStarted(t.pid, t.mark, t.traced)
		t.traced = false
		return nil
	}
	t.cg.closeDir()
	if t.joined { // by the fenced thread, which traced it (traced or not)
		t.traced = false
		return t.joinErr
	}
	if !t.traced {
		return nil
	}
	t.traced = false
	return t.cg.joinStarted(t.pid)
}

// Abort removes what New made, for a start that failed.
func (t *Task) Abort() {
	if t.cg != nil {
		t.cg.closeDir()
		t.cg.remove()
	}
}

// InCgroup says whether the task has a cgroup (ModeCgroup).
func (t *Task) InCgroup() bool { return t.cg != nil }

// Signal sends sig to every process of the task that left the leader's
// group: those found in the cgroup or by their mark, each checked
// through a pidfd.
func (t *Task) Signal(sig syscall.Signal) {
	if t.cg != nil {
		t.cg.signal(sig)
	} else {
		signalMarks(t.mark, sig)
	}
}

// Kill kills every process of the task: cgroup.kill, or SIGKILL to each
// marked one.
func (t *Task) Kill() {
	if t.cg != nil {
		t.cg.kill()
	} else {
		signalMarks(t.mark, syscall.SIGKILL)
	}
}

// Processes returns how many processes of the task are alive, the
// leader counted while it runs (see proc's Process.Processes).
func (t *Task) Processes() int {
	if t.cg != nil {
		return max(t.cg.count(0), 1)
	}
	if forked, _ := forkedSince(t.pid); !forked {
		return 1
	}
	return max(countMarks(t.mark), 1)
}

// MayHaveLeftovers says whether the exited leader may have left
// processes: the cgroup's list, or whether any process was created since
// the leader.
func (t *Task) MayHaveLeftovers() bool {
	if t.cg != nil {
		return t.cg.populated()
	}
	forked, _ := forkedSince(t.pid)
	return forked
}

// leftoverWait bounds how long the leftovers are killed before those that
// will not die are reported as survivors.
const leftoverWait = 5 * time.Second

// Ended is what the containment saw of a command that ended, beyond its
// exit status: what the leader left behind and what the kernel killed.
type Ended struct {
	// Leftovers counts the processes of the task (descendants of the
	// leader, in its group or not) still alive when the leader exited,
	// all killed before Wait returned.
	Leftovers int
	// Survivors counts processes of the task still alive when Wait
	// returned: they outlived every SIGKILL for as long as Wait waited
	// (stuck in the kernel) or could not be signalled (they changed their
	// user). Zero unless something is badly wrong; SurvivorsErr says what.
	Survivors    int
	SurvivorsErr error
	// MemoryKills counts the processes of the task the kernel killed
	// because the task reached its memory limit (Limits.Memory), which
	// MemoryLimit repeats.
	MemoryKills int
	MemoryLimit int64
	// ForksRefused counts the forks (and threads) the kernel refused the
	// task because it had as many processes as its pids limit
	// (Limits.Pids, which PidsLimit repeats) allows: the command saw
	// "Resource temporarily unavailable", which does not say why.
	ForksRefused int
	PidsLimit    int
}

// EndLeftovers ends the processes of the task that outlived the leader
// (which has exited, not yet reaped), in its group or out of it. After a
// natural exit they are killed at once, as the group always was. During
// a stop (stopping) they get until by to end on the SIGTERM they were
// sent, then SIGKILL. It fills in Leftovers and Survivors.
func (t *Task) EndLeftovers(e *Ended, stopping bool, by time.Time) {
	if t.cg != nil {
		t.endCgroup(e, stopping, by)
		return
	}
	if stopping {
		for delay := time.Millisecond; time.Now().Before(by) && countMarks(t.mark) > 0; delay = min(2*delay, 50*time.Millisecond) {
			time.Sleep(min(delay, time.Until(by)))
		}
	}
	// A stop looks for the mark in every environment, for processes that
	// reset their limit; after a natural exit the limit (or the host mark
	// and the environment) is enough.
	e.Leftovers, e.SurvivorsErr = killMarks(t.mark, t.pid, stopping, time.Now().Add(leftoverWait))
	if e.SurvivorsErr != nil {
		e.Survivors = countMarks(t.mark)
	}
}

// endCgroup is EndLeftovers in ModeCgroup: the grace of a stop ends as
// soon as the cgroup is empty, then cgroup.kill, and the wait until it is
// empty, both woken by the kernel's notice.
func (t *Task) endCgroup(e *Ended, stopping bool, by time.Time) {
	if stopping {
		t.cg.waitEmpty(by)
	}
	e.Leftovers = t.cg.count(t.pid)
	if e.Leftovers == 0 {
		return
	}
	t.cg.kill()
	if !t.cg.waitEmpty(time.Now().Add(leftoverWait)) {
		e.Survivors = t.cg.count(t.pid)
		e.SurvivorsErr = errSurvivors{e.Survivors}
	}
}

// Release is the end of a reaped command's containment: it returns its
// CPU time and memory peak (ps is the leader's state as reaped) and
// fills in e.MemoryKills, then removes its cgroup, or keeps it for the
// next command when alone (nothing of the command outlived the leader).
// Processes the leader's exit did not end (it could not be waited for
// without reaping it) are killed first.
func (t *Task) Release(e *Ended, alone bool, ps *os.ProcessState) (cpu time.Duration, peak int64) {
	if t.cg != nil {
		cpu, peak = t.cg.finalUsage() // before the cgroup goes
		if e.MemoryKills = t.cg.memoryKills(); e.MemoryKills > 0 {
			e.MemoryLimit = t.limits.Memory
		}
		if e.ForksRefused = t.cg.forksRefused(); e.ForksRefused > 0 {
			e.PidsLimit = t.limits.Pids
		}
		if t.cg.release(alone) != nil && t.cg.populated() {
			t.cg.kill()
			t.cg.waitEmpty(time.Now().Add(leftoverWait))
			t.cg.remove() // fails only with survivors; the keeper removes them then
		}
	}
	if ps != nil {
		cpu = max(cpu, ps.UserTime()+ps.SystemTime())
		peak = max(peak, maxRSS(ps))
	}
	t.usageMu.Lock()
	defer t.usageMu.Unlock()
	return max(cpu, t.cpuSeen), max(peak, t.peakSeen)
}
