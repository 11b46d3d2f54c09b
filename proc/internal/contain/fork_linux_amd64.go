package contain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc/internal/sandbox/step"
)

// Forking fenced. A root command without a sandbox is fenced between its
// clone and its exec, in the child, from the caller's own thread: no
// trip to the fenced thread and back through the scheduler (about 75 µs
// of CPU a start, a tenth of what the start costs os/exec). os/exec
// cannot run anything there, so this is a fork of our own, as small as
// the starts it serves: a vfork (clone with CLONE_VM|CLONE_VFORK, clone3
// into the command's cgroup) whose child, on the parent's stack while
// the parent sleeps,
//
//   - makes its session or process group (setsid, setpgid) and takes the
//     signal mask and handlers a new program needs (the runtime's
//     AfterForkInChild, as os/exec's child does; cloned into its cgroup,
//     the handlers come from the kernel, see forkChild);
//   - joins the root fence's mount namespace, changes into its
//     directory, drops step.ContainDrops from its bounding and
//     inheritable sets, enters
//     the fence's Landlock domain and installs its seccomp filter (no
//     clone3): what step.Contain does to the fenced thread;
//   - moves its files into place, takes its controlling terminal, gives
//     back the open-file limit Go raised for itself (as os/exec does), and
//     execs.
//
// A failure in the child is written to the spec (the memory is shared,
// and the parent runs again only once the child has exec'd or exited),
// and the child exits 253 to be reaped. Only what the root fence's starts
// use is done: a command with other attributes (ptrace, credentials,
// clone flags) goes to the fenced thread, as every start does on an
// architecture without the vfork of fork_linux_amd64.s.
//
// The runtime's fork hooks are reached by linkname, as gVisor does: the
// runtime keeps them for such callers (go.dev/issue/67401).

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

//go:linkname runtimeAfterForkInChild syscall.runtime_AfterForkInChild
func runtimeAfterForkInChild()

// vfork is in fork_linux_amd64.s.
func vfork(trap, a1, a2, a3 uintptr) (pid uintptr, errno syscall.Errno)

// noOwnFork sends every fenced start to the fenced thread (tests: both
// ways must fence).
var noOwnFork atomic.Bool

// ownForks counts the starts forked fenced, for tests.
var ownForks atomic.Int64

// OwnFork turns the fenced starts' own fork on (the default) or off, and
// says how many starts it has forked: a test knob, so that both ways are
// tried, and seen to be taken.
func OwnFork(on bool) int64 {
	noOwnFork.Store(!on)
	return ownForks.Load()
}

// cloneArgs is the kernel's struct clone_args, to its cgroup field.
type cloneArgs struct {
	flags, pidfd, childTID, parentTID, exitSignal, stack, stackSize, tls, setTID, setTIDSize, cgroup uint64
}

// forkSpec is everything the child does, made before the fork: the
// child may not allocate.
type forkSpec struct {
	path       *byte
	argv, envv []*byte // nil-terminated
	dir        *byte
	fds        []int // fds[i] becomes the child's i; rewritten by the child
	setsid     bool
	setpgid    bool
	setctty    bool
	ctty       uintptr
	mntns      uintptr
	ruleset    int // -1: no Landlock
	nofile     *syscall.Rlimit
	filter     *unix.SockFprog // the fence's seccomp filter; nil: none
	caps       *step.Caps      // capset without ContainDrops inheritable; nil: none held
	null       *byte           // "/dev/null", for the fds that are devNullIn or devNullOut; nil: none
	clone3     *cloneArgs      // nil: clone
	sigmask    uint64          // with clone3: the signal mask the child restores
	// Written by a child that failed.
	step  forkStep
	errno syscall.Errno
}

// devNullIn and devNullOut in forkSpec.fds are streams the command gets
// /dev/null for, read-only for stdin and write-only for the others, as
// os/exec opens it; the child opens it, so that each command has one of
// its own (flags set on a shared one would reach the others).
const (
	devNullIn  = -2
	devNullOut = -3
)

var devNullPath = &[]byte("/dev/null\x00")[0]

// forkStep names the child's steps, for its errors.
type forkStep uint8

const (
	stepExec forkStep = iota
	stepSession
	stepNamespace
	stepDir
	stepBounding
	stepInheritable
	stepLandlock
	stepFilter
	stepFiles
	stepTerminal
)

// forkFenced starts cmd, prepared as fencedStart's, fenced in the child
// of a fork of our own, and sets cmd.Process. ok is false, and nothing
// done, where cmd needs what this fork does not do: the fenced thread
// starts it instead.
func forkFenced(cmd *exec.Cmd, mntns *os.File, ruleset int) (ok bool, err error) {
	sys := cmd.SysProcAttr
	if noOwnFork.Load() || cmd.Err != nil || cmd.Process != nil || sys == nil || !plainAttrs(sys) {
		return false, nil
	}
	nofile, known := childNofile()
	if !known {
		return false, nil
	}
	for _, kv := range cmd.Env {
		if strings.IndexByte(kv, 0) >= 0 {
			return false, nil // os/exec says so (cmd.Environ drops it)
		}
	}
	streams := []any{cmd.Stdin, cmd.Stdout, cmd.Stderr}
	files := make([]*os.File, 0, len(streams)+len(cmd.ExtraFiles))
	for _, s := range streams {
		f, isFile := s.(*os.File)
		if s != nil && !isFile {
			return false, nil // os/exec's copying goroutines
		}
		files = append(files, f)
	}
	files = append(files, cmd.ExtraFiles...)

	s := &forkSpec{mntns: mntns.Fd(), ruleset: ruleset, nofile: nofile, filter: step.ContainFilter(),
		setsid: sys.Setsid, setpgid: sys.Setpgid, setctty: sys.Setctty, ctty: uintptr(sys.Ctty)}
	if s.path, err = syscall.BytePtrFromString(cmd.Path); err != nil {
		return true, &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: err}
	}
	if s.argv, err = syscall.SlicePtrFromStrings(cmd.Args); err != nil {
		return true, &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: err}
	}
	env := cmd.Environ()
	if s.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return true, &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: err}
	}
	if s.dir, err = syscall.BytePtrFromString(cmd.Dir); err != nil { // absolute: fencedStart
		return true, &fs.PathError{Op: "chdir", Path: cmd.Dir, Err: err}
	}
	s.fds = make([]int, len(files))
	for i, f := range files {
		s.fds[i] = -1
		switch {
		case f != nil:
			s.fds[i] = int(f.Fd())
		case i == 0:
			s.fds[i] = devNullIn // the child opens it: one of its own, as os/exec's
			s.null = devNullPath
		case i < 3:
			s.fds[i] = devNullOut
			s.null = devNullPath
		}
	}
	if caps, drop := step.ContainInheritable(); drop {
		s.caps = &caps
	}
	if sys.UseCgroupFD {
		s.clone3 = &cloneArgs{flags: syscall.CLONE_VM | syscall.CLONE_VFORK | unix.CLONE_INTO_CGROUP | unix.CLONE_CLEAR_SIGHAND,
			exitSignal: uint64(syscall.SIGCHLD), cgroup: uint64(sys.CgroupFD)}
	}

	// No descriptor opened without close-on-exec elsewhere may reach the
	// child (os/exec's lock).
	syscall.ForkLock.Lock()
	pid, errno := forkChild(s)
	runtimeAfterFork()
	syscall.ForkLock.Unlock()
	runtime.KeepAlive(files)
	runtime.KeepAlive(mntns)
	if errno != 0 {
		return true, &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: errno}
	}
	if s.errno != 0 {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(int(pid), &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
		return true, s.err(cmd)
	}
	p, err := os.FindProcess(int(pid))
	if err != nil { // not on Linux
		return true, err
	}
	cmd.Process = p
	ownForks.Add(1)
	return true, nil
}

// plainAttrs says whether the fork of our own does all that sys asks.
func plainAttrs(sys *syscall.SysProcAttr) bool {
	return sys.Chroot == "" && sys.Credential == nil && !sys.Ptrace && !sys.Noctty &&
		!sys.Foreground && sys.Pgid == 0 && sys.Pdeathsig == 0 && sys.Cloneflags == 0 &&
		sys.Unshareflags == 0 && sys.UidMappings == nil && sys.GidMappings == nil &&
		len(sys.AmbientCaps) == 0 && sys.PidFD == nil && !(sys.Setctty && !sys.Setsid)
}

// err is the error of a child that failed at s.step.
func (s *forkSpec) err(cmd *exec.Cmd) error {
	fence := func(what string) error {
		return fmt.Errorf("proc: the root fence: %s: %w", what, s.errno)
	}
	switch s.step {
	case stepSession:
		return &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: s.errno}
	case stepNamespace:
		return fence("join the containment's mount namespace")
	case stepDir:
		return &fs.PathError{Op: "chdir", Path: cmd.Dir, Err: s.errno}
	case stepBounding:
		return fence("drop capabilities from the bounding set")
	case stepInheritable:
		return fence("drop capabilities from the inheritable set")
	case stepLandlock:
		return fence("landlock: restrict")
	case stepFilter:
		return fence("seccomp")
	case stepFiles, stepTerminal:
		return &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: s.errno}
	}
	return &fs.PathError{Op: "fork/exec", Path: cmd.Path, Err: s.errno}
}

// atFDCWD is AT_FDCWD (-100), as the system call takes it.
const atFDCWD = ^uintptr(99)

// forkChild forks, and in the child does what s says and execs: it
// returns in the parent only. The child runs on this stack while the
// parent sleeps; so nothing here may grow the stack, allocate, or be
// seen by the race detector, and the parent must leave this frame at
// once.
//
// Cloned with clone3 (into its cgroup), the child gets its signal
// handlers reset by the kernel (CLONE_CLEAR_SIGHAND, Linux 5.5; cgroups
// need 5.7): every signal this process handles goes back to its default,
// and an ignored one stays ignored, as the runtime's AfterForkInChild
// does with a system call per signal, some 65 of them (about 8 µs of the
// child's CPU a start, a per cent of what the start costs). The child
// then only restores the signal mask the runtime blocked for the fork:
// this thread's, read before.
//
//go:norace
//go:nosplit
//go:noinline
func forkChild(s *forkSpec) (pid uintptr, errno syscall.Errno) {
	var (
		err1 syscall.Errno
		i    int
		c    uintptr
		lim  syscall.Rlimit
	)
	if s.clone3 != nil {
		syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, 0, 0, uintptr(unsafe.Pointer(&s.sigmask)), 8, 0, 0)
	}
	runtimeBeforeFork()
	if s.clone3 != nil {
		pid, errno = vfork(unix.SYS_CLONE3, uintptr(unsafe.Pointer(s.clone3)), unsafe.Sizeof(*s.clone3), 0)
	} else {
		pid, errno = vfork(syscall.SYS_CLONE, syscall.CLONE_VM|syscall.CLONE_VFORK|uintptr(syscall.SIGCHLD), 0, 0)
	}
	if errno != 0 || pid != 0 {
		return // the parent, after the child exec'd or exited
	}

	// The child.
	s.step = stepSession
	if s.setsid {
		if _, _, err1 = syscall.RawSyscall(syscall.SYS_SETSID, 0, 0, 0); err1 != 0 {
			goto fail
		}
	}
	if s.setpgid {
		if _, _, err1 = syscall.RawSyscall(syscall.SYS_SETPGID, 0, 0, 0); err1 != 0 {
			goto fail
		}
	}
	if s.clone3 != nil { // the handlers were reset by clone3
		syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, uintptr(unsafe.Pointer(&s.sigmask)), 0, 8, 0, 0)
	} else {
		runtimeAfterForkInChild()
	}

	s.step = stepNamespace
	if _, _, err1 = syscall.RawSyscall(unix.SYS_SETNS, s.mntns, syscall.CLONE_NEWNS, 0); err1 != 0 {
		goto fail
	}
	s.step = stepDir // setns left it at the namespace's /
	if _, _, err1 = syscall.RawSyscall(syscall.SYS_CHDIR, uintptr(unsafe.Pointer(s.dir)), 0, 0); err1 != 0 {
		goto fail
	}
	s.step = stepBounding
	for c = 0; c < 64; c++ {
		if step.ContainDrops&(1<<c) == 0 {
			continue
		}
		// EINVAL: a capability this kernel does not know.
		if _, _, err1 = syscall.RawSyscall6(syscall.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0, 0, 0, 0); err1 != 0 && err1 != syscall.EINVAL {
			goto fail
		}
	}
	s.step = stepInheritable
	if s.caps != nil {
		if _, _, err1 = syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&s.caps.Header)), uintptr(unsafe.Pointer(&s.caps.Data[0])), 0); err1 != 0 {
			goto fail
		}
	}
	s.step = stepLandlock
	if s.ruleset >= 0 {
		if _, _, err1 = syscall.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(s.ruleset), 0, 0); err1 != 0 {
			goto fail
		}
	}

	s.step = stepFilter
	if s.filter != nil { // see step.ContainFilter for the flag
		_, _, err1 = syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW, uintptr(unsafe.Pointer(s.filter)))
		if err1 == syscall.EINVAL { // before Linux 4.17
			_, _, err1 = syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(s.filter)))
		}
		if err1 != 0 {
			goto fail
		}
	}

	// Files: /dev/null where asked (opened here, after the fence: the
	// namespace's), then first move each fds[i] below i out of the way
	// of those moved down after it, then each onto i.
	s.step = stepFiles
	for i = 0; s.null != nil && i < len(s.fds); i++ {
		if s.fds[i] != devNullIn && s.fds[i] != devNullOut {
			continue
		}
		c = syscall.O_WRONLY | syscall.O_CLOEXEC
		if s.fds[i] == devNullIn {
			c = syscall.O_RDONLY | syscall.O_CLOEXEC
		}
		if c, _, err1 = syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(s.null)), c, 0, 0, 0); err1 != 0 {
			goto fail
		}
		s.fds[i] = int(c)
	}
	for i = 0; i < len(s.fds); i++ {
		if s.fds[i] >= 0 && s.fds[i] < i {
			// Out of the way: to the lowest free descriptor past every
			// target, which fits under the open-file limit wherever one
			// is free (one above every descriptor, as os/exec's child
			// takes, was refused with EBADF near the limit, an outsider
			// found).
			if c, _, err1 = syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(s.fds[i]), syscall.F_DUPFD_CLOEXEC, uintptr(len(s.fds))); err1 != 0 {
				goto fail
			}
			s.fds[i] = int(c)
		}
	}
	for i = 0; i < len(s.fds); i++ {
		switch {
		case s.fds[i] < 0:
			syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(i), 0, 0)
		case s.fds[i] == i: // dup3 onto itself would not clear close-on-exec
			if _, _, err1 = syscall.RawSyscall(syscall.SYS_FCNTL, uintptr(i), syscall.F_SETFD, 0); err1 != 0 {
				goto fail
			}
		default:
			if _, _, err1 = syscall.RawSyscall(syscall.SYS_DUP3, uintptr(s.fds[i]), uintptr(i), 0); err1 != 0 {
				goto fail
			}
		}
	}
	s.step = stepTerminal
	if s.setctty {
		if _, _, err1 = syscall.RawSyscall(syscall.SYS_IOCTL, s.ctty, syscall.TIOCSCTTY, 1); err1 != 0 {
			goto fail
		}
	}
	// The open-file limit os/exec gives: Go's own was raised to one below
	// the hard limit at its start; unless someone changed it since, the
	// child gets the one this process started with.
	if s.nofile != nil {
		_, _, err1 = syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, syscall.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&lim)), 0, 0)
		if err1 != 0 || (lim.Cur == s.nofile.Max-1 && lim.Max == s.nofile.Max) {
			syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, syscall.RLIMIT_NOFILE, uintptr(unsafe.Pointer(s.nofile)), 0, 0, 0)
		}
	}
	s.step = stepExec
	_, _, err1 = syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)),
		uintptr(unsafe.Pointer(&s.argv[0])), uintptr(unsafe.Pointer(&s.envv[0])))

fail:
	s.errno = err1
	for {
		syscall.RawSyscall(syscall.SYS_EXIT, 253, 0, 0)
	}
}

// childNofile is the open-file limit os/exec gives a child, where it
// differs from this process's: Go raises its own soft limit to one below
// the hard limit at its start, and gives a child the one it started
// with, which it does not tell. A child of os/exec's (this program
// again), stopped at its exec before it runs an instruction, says. known
// is false where that could not be found out (ptrace refused: the fenced
// thread then starts every command, as os/exec would).
func childNofile() (lim *syscall.Rlimit, known bool) {
	nofile.once.Do(func() { nofile.lim, nofile.err = probeNofile("/proc/self/exe") })
	return nofile.lim, nofile.err == nil
}

var nofile struct {
	once sync.Once
	lim  *syscall.Rlimit
	err  error
}

func probeNofile(path string) (*syscall.Rlimit, error) {
	var own syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &own); err != nil {
		return nil, err
	}
	if own.Max == 0 || own.Cur != own.Max-1 {
		return nil, nil // not raised (or set since): the child inherits it
	}
	// Traced, the child stops at its exec: on this thread, its tracer.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var lim unix.Rlimit
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		return nil, err
	}
	if lim.Cur == own.Cur && lim.Max == own.Max {
		return nil, nil
	}
	if lim.Max != own.Max {
		return nil, errors.New("the child's hard open-file limit is not this process's")
	}
	return &syscall.Rlimit{Cur: lim.Cur, Max: lim.Max}, nil
}
