package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/offstage/offstage/proc/internal/contain"
	"github.com/offstage/offstage/proc/internal/sandbox/step"
	"golang.org/x/sys/unix"
)

// The forker (see package step): the step started once per host, in a
// user namespace of its own, which forks each sandboxed command of a
// host that is not root from a thread it fences as a root host fences
// its own. It saves each command a start of this binary and a user
// namespace.
var forkers forkerConn

// forkerConn is this host's forker, started at its first use. One
// request at a time: the forker serves them in turn, and the lock is the
// conversation's (a request and its reply), held across that I/O by
// design.
type forkerConn struct {
	mu   sync.Mutex
	cmd  *exec.Cmd // nil until started, or after it failed
	sock int       // our end of its socket (close-on-exec)
	// unhelp ends its threads' counting as none of a command's (see
	// contain.Helper).
	unhelp func()

	// endedMu guards ended; taken inside mu (a start takes the news),
	// alone by Release, never the other way round.
	endedMu sync.Mutex
	ended   []step.Ended // news for the forker, sent with the next request
}

// maxEnded bounds the news kept for the forker: past it the oldest go
// (the forker bounds the namespaces it keeps for news that never come).
const maxEnded = 64

// end tells the forker, with its next request, that its command pid has
// ended; reuse: nothing of it was left, its network namespace may serve
// another.
func (f *forkerConn) end(pid int, reuse bool) {
	f.endedMu.Lock()
	defer f.endedMu.Unlock()
	if len(f.ended) >= maxEnded {
		f.ended = f.ended[1:]
	}
	f.ended = append(f.ended, step.Ended{PID: pid, Reuse: reuse})
}

// takeEnded returns the news kept, and forgets them.
func (f *forkerConn) takeEnded() []step.Ended {
	f.endedMu.Lock()
	defer f.endedMu.Unlock()
	e := f.ended
	f.ended = nil
	return e
}

// forkerTimeout bounds a start through the forker: it fences a thread
// and forks, and should answer within milliseconds.
const forkerTimeout = 10 * time.Second

// start starts req through the forker, with files as the descriptors it
// names, and returns the command's pid. A forker that is gone (killed:
// without Landlock's signal scope, ABI 6, a command of the same user can
// signal it) is replaced once.
func (f *forkerConn) start(req step.Request, files []int) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	req.Ended = f.takeEnded()
	b, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	for try := 0; ; try++ {
		if f.cmd == nil {
			if err := f.launchLocked(); err != nil {
				return 0, err
			}
		}
		rep, sent, err := f.askLocked(b, files)
		if err == nil {
			if rep.Err != "" {
				if rep.PID > 0 { // forked, behind its gate: ours to end
					syscall.Kill(rep.PID, syscall.SIGKILL)
					var ws syscall.WaitStatus
					for {
						if _, err := syscall.Wait4(rep.PID, &ws, 0, nil); err != syscall.EINTR {
							break
						}
					}
				}
				return 0, errors.New(rep.Err)
			}
			return rep.PID, nil
		}
		f.endLocked()
		// Asked again only if the forker was gone before the request:
		// one that died or hung after it may have forked the command,
		// which then ends at its gate, closed without a line.
		if try > 0 || sent {
			return 0, fmt.Errorf("forker: %w", err)
		}
	}
}

// askLocked sends one request and reads its reply; sent says whether the
// request went out whole.
func (f *forkerConn) askLocked(b []byte, files []int) (rep step.Reply, sent bool, err error) {
	tv := syscall.NsecToTimeval(forkerTimeout.Nanoseconds())
	syscall.SetsockoptTimeval(f.sock, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	syscall.SetsockoptTimeval(f.sock, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	if err := step.WriteMsg(f.sock, b, files); err != nil {
		return rep, false, err
	}
	out, fds, err := step.ReadMsg(f.sock)
	for _, fd := range fds {
		syscall.Close(fd)
	}
	if err == syscall.ECONNRESET {
		// It died with the request unread (killed as it was written):
		// it forked nothing.
		return rep, false, err
	}
	if err != nil {
		return rep, true, err
	}
	return rep, true, json.Unmarshal(out, &rep)
}

// launchLocked starts the forker: this binary re-executed as the step,
// in a user namespace of its own (with the capabilities to make the
// namespaces and mounts of its commands' fences), in a session of its own
// (no group signal for a command reaches it), its output discarded.
func (f *forkerConn) launchLocked() error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("forker: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "forker")
	defer theirs.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"offstage-sandbox-forker"}
	// One P: it serves one request at a time, and with fewer threads it
	// makes fewer of them after a command's fork (see contain.Helper).
	cmd.Env = []string{sandboxEnv + "=" + step.Forker, "GOMAXPROCS=1"}
	cmd.ExtraFiles = []*os.File{theirs} // step.ForkerFD
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	namespaceAttr(cmd, false, true)
	// Not in a network namespace of its own (a command with the network
	// on has the host's), but able to bring up loopback in those it makes.
	const capNetAdmin = 12
	cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, capNetAdmin)
	if err := cmd.Start(); err != nil {
		syscall.Close(fds[0])
		return fmt.Errorf("forker: %w", err)
	}
	f.cmd, f.sock = cmd, fds[0]
	f.unhelp = contain.Helper(cmd.Process.Pid)
	return nil
}

// endLocked gives the forker up: at the end of its socket it exits, and
// is reaped here.
func (f *forkerConn) endLocked() {
	if f.cmd == nil {
		return
	}
	syscall.Close(f.sock)
	f.cmd.Process.Kill() // one that hangs
	f.cmd.Wait()
	f.unhelp()
	f.cmd = nil
}

// startForked starts cmd, prepared by Apply, through the forker, and
// sets cmd.Process: the command is this process's child (CLONE_PARENT),
// waited for as any. It waits behind the gate until Open.
func (sb *Setup) startForked(cmd *exec.Cmd) error {
	if cmd.Dir == "" { // this process's, not the forker's
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("proc: sandbox: %w", err)
		}
		cmd.Dir = wd
	}
	req := step.Request{Spec: sb.spec, Path: cmd.Path, Args: cmd.Args, Env: cmd.Environ(), Dir: cmd.Dir}
	if sys := cmd.SysProcAttr; sys != nil {
		req.Setsid, req.Setpgid, req.Setctty = sys.Setsid, sys.Setpgid, sys.Setctty
		if sys.Ctty != 0 || sys.Foreground || sys.Credential != nil || sys.Ptrace {
			return errors.New("proc: sandbox: forker: unsupported process attributes")
		}
	}
	var files []int
	add := func(fd int) int {
		files = append(files, fd)
		return len(files) - 1
	}
	var null *os.File
	defer func() {
		if null != nil {
			null.Close()
		}
	}()
	for i, s := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		f, ok := s.(*os.File)
		if s == nil {
			if null == nil {
				var err error
				if null, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
					return fmt.Errorf("proc: sandbox: %w", err)
				}
			}
			f, ok = null, true
		}
		if !ok {
			return fmt.Errorf("proc: sandbox: forker: stream %d is not a file", i)
		}
		req.Files = append(req.Files, add(int(f.Fd())))
	}
	for _, f := range cmd.ExtraFiles {
		if f == nil {
			req.Files = append(req.Files, -1)
			continue
		}
		req.Files = append(req.Files, add(int(f.Fd())))
	}
	req.Spec.WriteFDs = nil
	for _, d := range sb.dirs {
		req.Spec.WriteFDs = append(req.Spec.WriteFDs, add(int(d.Fd())))
	}
	pid, err := forkers.start(req, files)
	sb.gateR.Close() // the command's copy is its own
	sb.gateR = nil
	if err != nil {
		return fmt.Errorf("proc: sandbox: %w", err)
	}
	p, err := os.FindProcess(pid)
	if err != nil { // not on Linux
		return fmt.Errorf("proc: sandbox: %w", err)
	}
	cmd.Process = p
	sb.pid = pid
	// Into its cgroup here, behind the gate, not cloned into it: clone3
	// refuses CLONE_PARENT with an exit signal, which Go's always sets
	// (SIGCHLD). Until now it has run nothing but the shell's start.
	if sys := cmd.SysProcAttr; sys != nil && sys.UseCgroupFD {
		if err := joinCgroup(sys.CgroupFD, pid); err != nil {
			return fmt.Errorf("proc: sandbox: %w", err)
		}
	}
	return nil
}

// joinCgroup moves process pid into the cgroup v2 whose directory is open
// as dir.
func joinCgroup(dir, pid int) error {
	fd, err := unix.Openat(dir, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("its cgroup: %w", err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(strconv.Itoa(pid))); err != nil {
		return fmt.Errorf("into its cgroup: %w", err)
	}
	return nil
}

// ForkerPID is the pid of this host's forker, 0 if none runs. For tests.
func ForkerPID() int {
	forkers.mu.Lock()
	defer forkers.mu.Unlock()
	if forkers.cmd == nil {
		return 0
	}
	return forkers.cmd.Process.Pid
}
