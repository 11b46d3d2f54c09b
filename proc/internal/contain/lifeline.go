package contain

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// LifelineFD is the descriptor number at which a child inherits the read
// end of its lifeline. Shell scripts can only name descriptors 0–9 in
// redirections ("exec 9>lock"), so 10 cannot be clobbered by accident.
const LifelineFD = 10

// The lifeline makes the kernel kill a process group when its host dies.
//
// Each process gets a pipe. The host keeps the only write end (close-on-
// exec, so no other child inherits it); the group inherits the read end at
// lifelineFD. The read end's owner is set to the group (F_SETOWN with the
// negative group id) and it is put in asynchronous mode (O_ASYNC). When the
// last write end closes, which happens when the host exits for any reason
// including SIGKILL, the kernel sends SIGIO to every process of the group,
// and SIGIO's default action is to terminate.
//
// Why this and not the alternatives:
//   - A parent-death signal (Linux PR_SET_PDEATHSIG) reaches only the
//     direct child, not its children, and fires when the thread that
//     started the child exits, which in Go need not be when the host dies.
//   - A supervisor process per shell (the host binary re-executed, or a
//     watcher subshell) costs a process start per command: measured here,
//     a watcher subshell made "sh -c true" 1.3x slower.
//   - One supervisor for all shells must remember group ids after the
//     groups are gone, and could then kill a group whose id was reused.
//     F_SETOWN holds a reference to the group's struct pid instead of its
//     number, so the lifeline can never signal a reused id.
//
// Limits: a process that ignores or handles SIGIO, or leaves the group
// (setsid, setpgid), survives the host's death; so does the group if every
// process in it closes the inherited descriptor. The lifeline is armed
// right after the child starts, so a host killed within those microseconds
// is not covered. It is verified on Linux; on other Unix systems the same
// calls are made and not verified here.
//
// The host also closes the write end itself once the process is reaped;
// by then the group is gone, so that signals nobody.

// LifelineFiles returns the ExtraFiles that put r at lifelineFD in the
// child: descriptors 3 to lifelineFD-1 are left closed.
func LifelineFiles(r *os.File) []*os.File {
	files := make([]*os.File, LifelineFD-3+1)
	files[len(files)-1] = r
	return files
}

// ArmLifeline makes the kernel signal group pgid when the write end of r's
// pipe closes.
func ArmLifeline(r *os.File, pgid int) error {
	raw, err := r.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = raw.Control(func(fd uintptr) {
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETOWN, uintptr(-pgid)); e != 0 {
			ferr = fmt.Errorf("F_SETOWN: %w", e)
			return
		}
		// The read end is a plain blocking descriptor (see pipe): O_ASYNC is
		// its only status flag, so there is nothing to read back first.
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, syscall.O_ASYNC); e != 0 {
			ferr = fmt.Errorf("F_SETFL O_ASYNC: %w", e)
		}
	})
	if err != nil {
		return err
	}
	return ferr
}

// KillGroup signals every process of group pgid. A group that is already
// gone is not an error.
func KillGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// SignalName returns "SIGKILL" style names for the common signals.
func SignalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGABRT: "SIGABRT", syscall.SIGFPE: "SIGFPE",
		syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE",
		syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1",
		syscall.SIGUSR2: "SIGUSR2", syscall.SIGBUS: "SIGBUS", syscall.SIGIO: "SIGIO",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
