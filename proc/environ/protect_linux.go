package environ

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc/internal/contain"
)

// ProtectHost makes this process's environment and memory unreadable by
// the commands it starts, and by every other process of its user: it
// clears the process's dumpable flag (prctl PR_SET_DUMPABLE 0), as
// ssh-agent does. Its /proc/PID files then belong to root, so
// /proc/PID/environ and /proc/PID/mem cannot be opened and ptrace cannot
// attach, except by root (or a holder of CAP_SYS_PTRACE); no core dump is
// written. Commands are not affected: exec makes them dumpable again.
//
// Unsetting the variables instead (os.Unsetenv) does not help:
// /proc/PID/environ shows the block the process was started with, and
// the memory holds the values anyway. What stays reachable: a child
// running as root (or with CAP_SYS_PTRACE) reads any process's memory,
// so a host run as root cannot hide anything from its commands;
// /proc/PID/cmdline is readable by everyone, so secrets never belong in
// arguments; and files the user can read (a ~/.netrc, a shell's rc file
// exporting the key) stay readable. A host that is itself a command of
// another offstage host is left dumpable: the outer host finds a command
// that left its group by the mark in its environment, and such a host
// holds nothing the outer host's commands could not reach anyway, since
// they started it.
//
// Call it once, early in main, before any secret is read, from a program
// that holds keys its commands must not see (the offstage CLI does). It
// is safe to call more than once and from any goroutine (the flag
// belongs to the process). In a process that is itself a command of an
// offstage host (OFFSTAGE_MARK is in its environment) it does nothing
// and returns nil. On
// systems other than Linux it returns an error wrapping
// errors.ErrUnsupported.
func ProtectHost() error {
	if _, nested := os.LookupEnv(contain.MarkEnv); nested {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("proc: protect host: %w", err)
	}
	return nil
}
