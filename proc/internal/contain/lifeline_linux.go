package contain

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// WaitExited blocks until the process pid, a child of this process, has
// exited, without reaping it: while the zombie stays, its pid, and so the
// group id, cannot be reused, so killing the group afterwards can only
// hit the group we started.
//
// The first few waits block in waitid, each holding an OS thread;
// past blockingWaits at once, the rest wait in Go's poller, on a pidfd
// (Linux 5.10), so that a thousand running commands do not hold a
// thousand threads (Go's limit is ten thousand). The poller costs a
// start a few system calls more (about 10 µs), which a thread saves.
func WaitExited(pid int) error {
	if blockedWaits.Add(1) <= blockingWaits {
		defer blockedWaits.Add(-1)
		return waitid(unix.P_PID, pid, 0)
	}
	blockedWaits.Add(-1)
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return waitid(unix.P_PID, pid, 0)
	}
	f := os.NewFile(uintptr(fd), "pidfd") // non-blocking: the poller's
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return waitid(unix.P_PID, pid, 0)
	}
	var werr error
	if err := rc.Read(func(fd uintptr) bool {
		// First before any wait: Read forgets what the poller saw
		// before it began, and the process may have exited by then.
		werr = waitid(unix.P_PIDFD, int(fd), syscall.WNOHANG)
		return werr != errNotYet
	}); err != nil {
		return err
	}
	return werr
}

// blockingWaits is how many WaitExited may block in waitid at once.
const blockingWaits = 32

// blockedWaits counts the WaitExited blocked in waitid.
var blockedWaits atomic.Int32

// errNotYet: waitid with WNOHANG found the process still running.
var errNotYet = errors.New("not exited yet")

// waitid waits (or, with WNOHANG in flags, looks: errNotYet) for the
// child id (by idtype) to exit, and leaves it unreaped.
func waitid(idtype, id, flags int) error {
	var info [128]byte // siginfo_t; si_signo first, 0 where nothing exited
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, uintptr(idtype), uintptr(id),
			uintptr(unsafe.Pointer(&info[0])), uintptr(syscall.WEXITED|syscall.WNOWAIT|flags), 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno != 0:
			return errno
		case *(*int32)(unsafe.Pointer(&info[0])) == 0:
			return errNotYet
		}
		return nil
	}
}

// Pipe returns a close-on-exec pipe. Only the ends we read or write
// ourselves and must be able to interrupt (by Close or a deadline) are put
// in non-blocking mode and registered with Go's poller; the ends a child
// inherits stay plain, which saves a third of the cost of os.Pipe.
func Pipe(pollRead, pollWrite bool) (r, w *os.File, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("proc: pipe: %w", err)
	}
	file := func(fd int, poll bool, name string) *os.File {
		if poll {
			syscall.SetNonblock(fd, true) // os.NewFile then registers it with the poller
		}
		return os.NewFile(uintptr(fd), name)
	}
	return file(fds[0], pollRead, "|0"), file(fds[1], pollWrite, "|1"), nil
}

// Pollable returns f as a file of the runtime's poller, closing f. The pty
// package hands its master out in blocking mode (it calls Fd), so a write
// to a terminal nobody reads would block a thread in the kernel where
// neither a write deadline nor Close reaches it: Input could not give up,
// and the writer could outlive the process. A nonblocking copy honours
// both.
func Pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	syscall.ForkLock.RLock() // no exec between the dup and its close-on-exec flag
	fd, err := syscall.Dup(int(f.Fd()))
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// TakeWaitSlot reserves one of WaitExited's blocking waits for a caller
// that blocks in a system call of its own, holding a thread, until a
// process exits (proc's inline reaper, which polls the command's pipes
// and a pidfd of its leader); false when all are taken.
// ReleaseWaitSlot gives it back.
func TakeWaitSlot() bool {
	if blockedWaits.Add(1) <= blockingWaits {
		return true
	}
	blockedWaits.Add(-1)
	return false
}

// ReleaseWaitSlot gives back a slot TakeWaitSlot reserved.
func ReleaseWaitSlot() { blockedWaits.Add(-1) }

// HasExited says whether the child pid has exited, without waiting and
// without reaping it (as WaitExited leaves it).
func HasExited(pid int) bool { return waitid(unix.P_PID, pid, syscall.WNOHANG) == nil }
