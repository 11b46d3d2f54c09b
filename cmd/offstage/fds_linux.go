package main

import "golang.org/x/sys/unix"

// keepInheritedToSelf marks every descriptor offstage was started with,
// past stdin, stdout and stderr, close-on-exec: a launcher's open file or
// socket (exec 200>>file, a CI runner's pipe) must not reach the commands
// offstage runs, which could write through it (a sandbox checks opens,
// not writes to what is open) or hold a pipe its reader waits on.
func keepInheritedToSelf() {
	const closeRangeCloexec = 1 << 2
	unix.CloseRange(3, ^uint(0)>>1, closeRangeCloexec) // before Linux 5.11 the sandbox's step still does it
}
