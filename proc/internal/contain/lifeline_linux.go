package contain

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// WaitExited blocks until the process pid has exited, without reaping it:
// while the zombie stays, its pid, and so the group id, cannot be reused,
// so killing the group afterwards can only hit the group we started.
func WaitExited(pid int) error {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch {
		case errno == 0:
			return nil
		case errno == syscall.EINTR:
			continue
		default:
			return errno
		}
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
