package contain

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc/internal/sandbox/step"
)

// The root fence. Run by root, a command may write any file: its own
// pids.max, or its pid into the root cgroup's cgroup.procs, and so lift
// its limits and leave its task. In ModeCgroup, a command run by root
// without a sandbox is forked from a thread fenced by
// step.Contain: in a mount namespace (one per host, made at the
// first such start and kept) where cgroup file systems, /sys and
// /proc/sys are read-only, without the capabilities that would undo
// that, and, from Linux 5.13, in a Landlock domain that refuses it any
// mount. A sandboxed command has all of that and more from its sandbox.
//
// A thread per start, which ends after the fork: its bounding set and
// Landlock domain must reach the command alone. Its namespace is made
// once (a copy of the host's mount table: the per-start cost would grow
// with the host's mounts), joined with setns, and made again when the
// host's mounts change (an outsider's findings): a copy does not see
// what the host mounts later where its mounts are private (a container;
// a workspace mounted after the first root command was not there, and
// its command ran in what lay underneath), and where they are shared it
// does, as it is (a cgroup file system or a proc mounted later arrived
// writable). The host's mountinfo, polled at each start (one system
// call), says when: the start that sees it makes the namespace again,
// and the old one goes once no start uses it.
var rootFence struct {
	once     sync.Once
	ruleset  int   // the Landlock ruleset; -1 without Landlock
	err      error // why there is no fence
	noLayers error // why there is no Landlock layer (with a fence)
	mounts   int   // the host's mountinfo, polled for changes; -1: never made again

	remake sync.Mutex // held while the namespace is made again
	mu     sync.Mutex
	ns     *fenceNS // guarded by mu: the namespace of the starts to come
}

// fenceNS is a made namespace and how many hold it: the current one holds
// itself, and each start using it.
type fenceNS struct {
	file *os.File
	refs int // guarded by rootFence.mu
}

// release lets the namespace go; the last holder closes it.
func (ns *fenceNS) release() {
	rootFence.mu.Lock()
	ns.refs--
	last := ns.refs == 0
	rootFence.mu.Unlock()
	if last {
		ns.file.Close()
	}
}

// noRootFence turns the fence off (tests: to see that what it stops
// happens without it).
var noRootFence atomic.Bool

// fenceRoot makes the root fence, once (its namespace again where the
// host's mounts changed), and returns its namespace, held: the caller
// releases it after its start. Nil where this host starts its commands
// as a user that is not root, or where the fence cannot be made.
func fenceRoot() (ns *fenceNS, ruleset int) {
	if os.Geteuid() != 0 || noRootFence.Load() {
		return nil, -1
	}
	f := &rootFence
	f.once.Do(func() {
		f.ruleset = -1
		// Opened before the namespace is made, so that a change after it
		// is seen; raw, not an os.File: Go's poller would take the
		// change (the kernel tells each open file once).
		var err error
		if f.mounts, err = syscall.Open("/proc/self/mountinfo", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
			f.mounts = -1
		}
		f.ns, f.err = makeFenceNS()
		if f.err != nil {
			return
		}
		f.ruleset, f.noLayers = step.ContainRuleset()
	})
	if f.err != nil {
		return nil, -1
	}
	if mountsChanged(f.mounts) {
		remakeFenceNS()
	}
	f.mu.Lock()
	ns = f.ns
	ns.refs++
	f.mu.Unlock()
	return ns, f.ruleset
}

// makeFenceNS makes the fence's mount namespace.
func makeFenceNS() (*fenceNS, error) {
	var file *os.File
	err := OnFencedThread(func() error {
		if err := step.ContainNamespace(); err != nil {
			return err
		}
		ns, err := os.Open("/proc/thread-self/ns/mnt")
		file = ns
		return err
	})
	if err != nil {
		return nil, err
	}
	return &fenceNS{file: file, refs: 1}, nil
}

// remakeFenceNS makes the namespace again, for the starts to come. One
// that cannot be made leaves the old one in place: better a fence that
// misses the newest mounts than none.
func remakeFenceNS() {
	f := &rootFence
	f.remake.Lock()
	defer f.remake.Unlock()
	ns, err := makeFenceNS()
	if err != nil {
		return
	}
	f.mu.Lock()
	old := f.ns
	f.ns = ns
	f.mu.Unlock()
	old.release()
	remakes.Add(1)
}

// remakes counts the namespaces made again, for tests.
var remakes atomic.Int64

// FenceRemakes says how many times the root fence's namespace was made
// again for a change of the host's mounts: a test knob.
func FenceRemakes() int64 { return remakes.Load() }

// mountsChanged says whether the mount table mountinfo shows changed
// since it last said so (the kernel tells each open file once per
// change, as POLLPRI).
func mountsChanged(mountinfo int) bool {
	if mountinfo < 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(mountinfo), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// rootFenceNote says, for a host running as root in ModeCgroup, what a
// command run by root without a sandbox can do to its containment.
func rootFenceNote() string {
	if os.Geteuid() != 0 {
		return ""
	}
	if noRootFence.Load() {
		return "root commands can lift their limits and leave their cgroup (no fence: turned off)"
	}
	if ns, _ := fenceRoot(); ns != nil { // made, or found impossible, once
		ns.release()
	}
	f := &rootFence
	if f.err != nil {
		return "root commands can lift their limits and leave their cgroup (no fence: " + f.err.Error() + ")"
	}
	s := "root commands: cgroup file systems, sysfs and /proc/sys read-only in a mount namespace, without " + step.ContainDropped
	if f.noLayers != nil {
		s += "; no Landlock (" + f.noLayers.Error() + "): in a user namespace of its own a root command can mount a cgroup file system and lift its limits"
	} else {
		s += ", no mounts (Landlock)"
	}
	if step.ContainFilter() != nil {
		s += ", no clone3 (seccomp)"
	} else {
		s += "; no seccomp filter for this architecture: clone3 can start a process in another cgroup"
	}
	return s + "; a root command can still signal any process of the machine (kill -9 -1 included; the sandbox fences that where Landlock scopes signals, ABI 6) and have a daemon (systemd, cron, sshd, docker) start a process outside"
}

// fencedStart starts cmd, a root command without a sandbox, traced,
// from the fenced thread, and runs after (joining its cgroups) on that
// thread, which traces it.
func fencedStart(cmd *exec.Cmd, mntns *os.File, ruleset int, after func(pid int) error) (afterErr error, err error) {
	run := func() error {
		if err := cmd.Start(); err != nil {
			return err
		}
		if after != nil {
			afterErr = after(cmd.Process.Pid)
		}
		return nil
	}
	if err := fenceThread.do(run, mntns, ruleset); err != errFenceBusy {
		return afterErr, err
	}
	// Every slot taken: a thread of its own, which ends after.
	err = OnFencedThread(func() error {
		if err := step.Contain(int(mntns.Fd()), ruleset); err != nil {
			return fmt.Errorf("proc: the root fence: %w", err)
		}
		return run()
	})
	return afterErr, err
}

// The fenced thread. Making an OS thread and ending it costs more than
// the start it serves (a clone, the runtime's setup, and the exit:
// 100-250 µs on a busy machine), so one thread, fenced once, forks the
// root commands one after another, and ends after fenceIdle without
// one. It is safe to share: its commands cannot reach it (it keeps the
// capabilities they lack, so ptrace and its /proc files need
// CAP_SYS_PTRACE, which they lack too), and they share with each other
// no more than root's processes outside the fence do (their uid).
//
// What it costs: the fence's own system calls nothing measurable; the
// trip to the thread and back, through the Go scheduler, about 75 µs of
// CPU a start on our two-core machine (a tenth of what sh -c true costs
// os/exec): the caller's thread hands its processor to the fenced one
// and sleeps, and the reply wakes a thread to spin and another to run
// the caller. Rejected: a futex between the two instead of channels
// (each side then sleeps in a system call holding its processor, which
// the runtime's monitor must take back: more CPU, not less). So on amd64
// most starts skip the trip: the fork of our own (fork_linux_amd64.go)
// fences the child between its clone and its exec, which os/exec cannot
// do. The fenced thread serves the rest: traced starts (v1 limits),
// streams that are not files, and other architectures.
var fenceThread fenceServer

// fenceIdle is how long the fenced thread waits for the next start
// before it ends; short, so that a program (or a test) that has stopped
// starting commands is soon left with no goroutine of it.
const fenceIdle = 50 * time.Millisecond

var errFenceBusy = errors.New("the fenced thread is busy")

type fenceServer struct {
	mu   sync.Mutex
	reqs chan fenceReq // guarded by mu: nil while no thread runs; sent to under mu
	ns   *os.File      // guarded by mu: the namespace the running thread joined
}

// fenceReq is one start for the fenced thread, and where its result goes.
type fenceReq struct {
	start func() error
	reply chan error
}

// do runs start on the fenced thread, starting it if none runs, and
// returns what start returned, or errFenceBusy where another start is
// already waiting for it.
func (s *fenceServer) do(start func() error, mntns *os.File, ruleset int) error {
	r := fenceReq{start, make(chan error, 1)}
	s.mu.Lock()
	if s.reqs == nil {
		s.reqs, s.ns = make(chan fenceReq, 1), mntns
		go s.serve(s.reqs, mntns, ruleset)
	}
	if s.ns != mntns { // made again since: the thread's is the old one
		s.mu.Unlock()
		return errFenceBusy
	}
	select {
	case s.reqs <- r:
	default:
		s.mu.Unlock()
		return errFenceBusy
	}
	s.mu.Unlock()
	return <-r.reply
}

// serve is the fenced thread: it fences itself, then runs each start
// sent (or fails it, if the fence failed), until fenceIdle passes
// without one.
func (s *fenceServer) serve(reqs chan fenceReq, mntns *os.File, ruleset int) {
	runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
	if syscall.Gettid() == syscall.Getpid() {
		// The main thread is never ended: serve from another, and keep
		// this one locked until then, so no other goroutine lands on it.
		defer runtime.UnlockOSThread()
		done := make(chan struct{})
		go func() { s.serve(reqs, mntns, ruleset); close(done) }()
		<-done
		return
	}
	err := step.Contain(int(mntns.Fd()), ruleset)
	if err != nil {
		err = fmt.Errorf("proc: the root fence: %w", err)
	}
	idle := time.NewTimer(fenceIdle)
	for {
		select {
		case r := <-reqs:
			if err != nil {
				r.reply <- err
			} else {
				r.reply <- r.start()
			}
			idle.Reset(fenceIdle)
		case <-idle.C:
			s.mu.Lock()
			if len(reqs) > 0 { // sent under mu: serve it first
				s.mu.Unlock()
				idle.Reset(fenceIdle)
				continue
			}
			s.reqs, s.ns = nil, nil
			s.mu.Unlock()
			return
		}
	}
}

// fencedStart starts cmd, a command in a cgroup, with the root fence
// where it applies (run by root; a sandboxed command has its sandbox
// instead). A traced start (v1 limits) is then joined to its v1 cgroups
// on the fenced thread, which traces it: joined says so, and joinErr is
// how that went.
func (t *Task) fencedStart(cmd *exec.Cmd) (joined bool, joinErr, err error) {
	ns, ruleset := fenceRoot()
	if ns == nil {
		return false, nil, cmd.Start()
	}
	defer ns.release()
	mntns := ns.file
	if !filepath.IsAbs(cmd.Dir) { // the fence's working directory is its namespace's /
		// The kernel's name for it: one system call, where os.Getwd
		// makes two to check $PWD against it (a start's cost). Both
		// name the same directory in the fence, whose mounts are the
		// host's.
		wd, err := syscall.Getwd()
		if err != nil {
			if wd, err = os.Getwd(); err != nil { // longer than PATH_MAX
				return false, nil, fmt.Errorf("proc: %w", err)
			}
		}
		cmd.Dir = filepath.Join(wd, cmd.Dir)
	}
	if !t.traced {
		if ok, err := forkFenced(cmd, mntns, ruleset); ok {
			return false, nil, err
		}
	}
	// From the fenced thread, which cannot clone3 (the fence's filter):
	// the command is cloned, traced to a stop at its exec, and moved
	// there into its cgroups by the thread, which traces it.
	sys := cmd.SysProcAttr
	v2 := -1
	if sys.UseCgroupFD {
		v2, sys.UseCgroupFD = sys.CgroupFD, false
	}
	sys.Ptrace = true
	after, err := t.cg.joiner(v2)
	if err != nil {
		return false, nil, err
	}
	joinErr, err = fencedStart(cmd, mntns, ruleset, after)
	return err == nil, joinErr, err
}

// rootNote is ContainmentInfo.Root.
func rootNote(info Info) string {
	switch {
	case os.Geteuid() != 0 || info.Err != nil:
		return ""
	case info.Mode == ModeCgroup:
		return rootFenceNote()
	}
	return "root commands keep every capability, and can leave the marks as any command can (the root fence needs a cgroup per command)"
}

// OnFencedThread runs f on an OS thread of its own, which dies after it:
// whatever f changes of the thread (its namespaces, credentials, Landlock
// domain) never reaches another goroutine.
//
// Not on the main thread, which the Go runtime parks for good instead of
// ending it: parked, it would still carry the fence, and signals sent to
// the process would be judged against it (a fenced command could signal
// the host). A goroutine that finds itself there keeps the main thread
// locked, so that no other goroutine can land on it, while another
// thread does the work.
func OnFencedThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if syscall.Gettid() == syscall.Getpid() {
			defer runtime.UnlockOSThread() // the main thread, untouched
			errc <- OnFencedThread(f)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// RootFence turns the root fence on (as it is) or off, for the starts
// that follow: a test knob, to see what it stops happen without it.
func RootFence(on bool) { noRootFence.Store(!on) }
