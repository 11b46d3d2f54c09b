//go:build unix

package main

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// closeWhenReaderGone closes c as soon as out's reader is gone for good
// (its client died: the read end of the pipe closed, the terminal hung
// up), until stop is called. A relay that waited to find it out by a
// failed write would by then have taken an answer off the supervisor's
// connection and lost it, while the supervisor, its write to the relay
// done, counts the results it carries as delivered; closed at once, the
// connection fails the supervisor's write instead, and those results are
// taken back (mcpserver.Service.RunStdio). It blocks in poll, waking for
// nothing else. Where out is not a file or socket it does nothing.
func closeWhenReaderGone(out io.Writer, c io.Closer) (stop func()) {
	rc, ok := rawConn(out)
	if !ok {
		return func() {}
	}
	dup := -1
	rc.Control(func(fd uintptr) { dup, _ = unix.Dup(int(fd)) })
	if dup < 0 {
		return func() {}
	}
	quitR, quitW, err := os.Pipe()
	if err != nil {
		unix.Close(dup)
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(dup)
		defer quitR.Close()
		fds := []unix.PollFd{{Fd: int32(dup)}, {Fd: int32(quitR.Fd()), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil, fds[1].Revents != 0:
				return
			case fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0:
				c.Close()
				return
			}
		}
	}()
	return func() {
		quitW.Close()
		<-done
	}
}

// rawConn returns the descriptor behind w, where w is a file or a
// socket.
func rawConn(w io.Writer) (syscall.RawConn, bool) {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}
