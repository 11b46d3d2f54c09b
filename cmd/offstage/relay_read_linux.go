package main

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// clientQueue tells how much of what the relay wrote to its client's
// stdout, a pipe, the client has read: what it wrote less what the pipe
// still holds (FIONREAD, which counts on after the client closed its
// end). A write the pipe took is not yet an answer the client has: a
// client that dies with the answer unread in the pipe never got it (an
// outsider's finding: counted delivered, 6 of 6, and never offered
// again).
//
// A socket (Node's clients get socket pairs) is not read so: its queue
// (SIOCOUTQ) counts the memory its unread writes take, not bytes, and
// drops to nothing when the client closes its end; the error the kernel
// leaves then to say something was unread (ECONNRESET) is taken by the
// next write or read on the socket, the relay's own. An outsider built
// it from those, and found answers never read counted (a write blocked
// on the full socket took the error: 8 of 10; stdin and stdout one
// socket: 6 of 10) and answers read taken back (a client that exits
// right after reading one leaves the next notification unread: 14 of
// 90). What a socket took counts, as before.
type clientQueue struct {
	rc   syscall.RawConn
	read int64 // the most the client is known to have read
}

// newClientQueue returns the queue of out, the relay's end of its
// client's stdout, or nil where it cannot be read (a socket, a terminal,
// a file, /dev/null, something that is no file): then what the output
// took counts as read.
func newClientQueue(out io.Writer) *clientQueue {
	rc, ok := rawConn(out)
	if !ok {
		return nil
	}
	usable := false
	rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return
		}
		_, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
		usable = err == nil
	})
	if !usable {
		return nil
	}
	return &clientQueue{rc: rc}
}

// readOf returns how many of the first n bytes written the client has
// read, at least: n less what the pipe holds. n is read before it is
// called (a write that ends in between only lowers the figure).
func (q *clientQueue) readOf(n int64) int64 {
	q.rc.Control(func(fd uintptr) {
		if unread, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
			q.read = max(n-int64(unread), q.read)
		}
	})
	return q.read
}
