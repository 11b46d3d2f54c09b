package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// peer returns the uid and pid of the process at the other end of a Unix
// socket connection (SO_PEERCRED: the kernel's word, not the peer's).
func peer(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil {
		return 0, 0, cerr
	}
	if err != nil {
		return 0, 0, err
	}
	return int(cred.Uid), int(cred.Pid), nil
}

// noNewPrivs says whether this process runs under no_new_privs, as every
// sandboxed command does (and its descendants: it is never lifted).
func noNewPrivs() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return err == nil && v == 1
}

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5; asm-generic), which x/sys does
// not name.
const soPeerPidfd = 77

// peerNoNewPrivs says whether pid, the peer of c, runs under
// no_new_privs, from /proc/PID/status. Where the kernel gives the peer's
// pidfd, it then checks the peer still lives, so that the status read was
// its own and not a later process's with its pid; an error says what
// could not be told, and the caller refuses.
func peerNoNewPrivs(c *net.UnixConn, pid int) (bool, error) {
	if pid <= 0 {
		return false, errors.New("the kernel gave no pid for the peer")
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return false, err
	}
	pidfd := -1
	raw.Control(func(fd uintptr) {
		if v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPidfd); err == nil {
			pidfd = v
		}
	})
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, err
	}
	_, rest, ok := strings.Cut(string(b), "\nNoNewPrivs:")
	if !ok {
		return false, errors.New("its /proc status has no NoNewPrivs line")
	}
	line, _, _ := strings.Cut(rest, "\n")
	if pidfd >= 0 && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return false, fmt.Errorf("it exited before its status could be told its own: %w", os.ErrNotExist)
	}
	return strings.TrimSpace(line) != "0", nil
}
