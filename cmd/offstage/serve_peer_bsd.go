//go:build darwin || freebsd

package main

import (
	"net"

	"golang.org/x/sys/unix"
)

// peer returns the uid of the process at the other end of a Unix socket
// connection (LOCAL_PEERCRED: the kernel's word, not the peer's); the pid
// is not given (0).
func peer(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Xucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	})
	if cerr != nil {
		return 0, 0, cerr
	}
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Uid), 0, nil
}

// noNewPrivs is Linux's; the sandbox is Linux's too.
func noNewPrivs() bool { return false }

// peerNoNewPrivs is Linux's: false here.
func peerNoNewPrivs(*net.UnixConn, int) (bool, error) { return false, nil }
