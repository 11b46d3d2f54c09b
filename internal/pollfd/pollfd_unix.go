//go:build unix

package pollfd

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// pollable returns f's descriptor duplicated and non-blocking as a file
// of the poller's, or nil where it does not apply.
func pollable(f *os.File) (*os.File, func()) {
	st, err := f.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return nil, nil
	}
	rc, err := f.SyscallConn() // not Fd: it would set the descriptor blocking
	if err != nil {
		return nil, nil
	}
	dup := -1
	rc.Control(func(fd uintptr) {
		if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK != 0 {
			return // Go polls it already, or cannot tell
		}
		dup, _ = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	})
	if dup < 0 {
		return nil, nil
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, nil
	}
	p := os.NewFile(uintptr(dup), f.Name()) // non-blocking: the poller's
	var once sync.Once
	return p, func() {
		once.Do(func() {
			p.Close() // a read or write under way returns
			rc.Control(func(fd uintptr) { unix.SetNonblock(int(fd), false) })
		})
	}
}
