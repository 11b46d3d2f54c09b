package main

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// clientQueue tells how much of what the relay wrote to its client's end
// the client has read: the bytes a pipe still holds, or whether a socket
// still holds any (see readOf). A write the output took is not yet an
// answer the client has: a client that dies with the answer unread in
// the pipe never got it (an outsider's finding: counted delivered, 6 of
// 6, and never offered again).
type clientQueue struct {
	rc   syscall.RawConn
	pipe bool // else a stream socket of the unix domain

	// drained is the most the client is known to have read: for a
	// socket, whose queue counts memory, not bytes, the count written
	// when its queue was last seen empty. reset says a socket's client
	// closed its end with some unread.
	drained int64
	reset   bool
}

// newClientQueue returns the queue of out, the relay's end of its
// client's stdout, or nil where it cannot be read: a terminal, a file,
// /dev/null, something that is no file. A nil queue counts what the
// output took as read.
func newClientQueue(out io.Writer) *clientQueue {
	sc, ok := out.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	q := &clientQueue{rc: rc}
	usable := false
	rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil {
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFIFO:
			q.pipe = true
			_, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ)
			usable = err == nil
		case unix.S_IFSOCK:
			domain, err1 := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
			typ, err2 := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
			_, err3 := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
			usable = err1 == nil && err2 == nil && err3 == nil && domain == unix.AF_UNIX && typ == unix.SOCK_STREAM
		}
	})
	if !usable {
		return nil
	}
	return q
}

// readOf returns how many of the first n bytes written the client has
// read, at least; n is read before it is called (a write that ends in
// between only lowers the figure). For a pipe it is exact: n less what
// the pipe holds (FIONREAD, which counts on after the client closed its
// end). A socket's queue (SIOCOUTQ) counts the memory its unread writes
// take, so it says only whether the client read everything: then n, and
// otherwise the count the last time it had. When the client closes its
// end the kernel empties the queue, having first set ECONNRESET on
// ours if anything was unread (read after the queue, so that a close in
// between is seen): from then on it is the last such count.
func (q *clientQueue) readOf(n int64) int64 {
	var read int64
	q.rc.Control(func(fd uintptr) {
		if q.pipe {
			if unread, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); err == nil {
				q.drained = max(n-int64(unread), q.drained)
			}
			read = q.drained
			return
		}
		queued, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		if e, _ := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR); e == int(unix.ECONNRESET) {
			q.reset = true
		}
		if err == nil && queued == 0 && !q.reset {
			q.drained = n
		}
		read = q.drained
	})
	return read
}
