package proc

import (
	"syscall"
	"unsafe"
)

// waitExited blocks until the process pid has exited, without reaping it:
// while the zombie stays, its pid, and so the group id, cannot be reused,
// so killing the group afterwards can only hit the group we started.
func waitExited(pid int) error {
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
