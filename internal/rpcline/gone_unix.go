//go:build unix

package rpcline

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// readerGone returns what tells whether out's reader is gone for good: a
// pipe whose read end is closed, a socket its peer closed (not only shut
// for writing: a client that ended its input still reads the answers),
// a terminal hung up. Nil where out is neither file nor socket.
func readerGone(out io.Writer) func() bool {
	sc, ok := out.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		gone := false
		rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
				gone = fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
			}
		})
		return gone
	}
}
