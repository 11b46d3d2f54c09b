package proc

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/offstage/offstage/proc/internal/contain"
)

var (
	// ErrNoStdin: the process was started without Config.Stdin, so it has
	// no input to write to.
	ErrNoStdin = errors.New("process was not started with stdin open")

	// ErrExited: the process has exited (or closed its input); nothing can
	// be written to it any more.
	ErrExited = errors.New("process has exited; its stdin is closed")

	// ErrInputClosed: CloseInput was called before this write.
	ErrInputClosed = errors.New("stdin was closed")

	// ErrStopped is the stop cause recorded by Stop.
	ErrStopped = errors.New("stopped")
)

// ExitError describes a process that did not exit with status 0: it exited
// with a non-zero code, or died of a signal, or we stopped it. It embeds
// the Exit it came from, as exec.ExitError embeds *os.ProcessState, so
// Code, Signal, Stopped and Cause are the Exit's.
type ExitError struct {
	Exit
}

func (e *ExitError) Error() string {
	var what string
	switch {
	case e.Signal == syscall.SIGKILL && e.Contained.MemoryKills > 0 && !e.Stopped:
		return "killed: it reached its memory limit of " + contain.FormatSize(e.Contained.MemoryLimit)
	case e.Signal != 0:
		what = "killed by " + contain.SignalName(e.Signal)
	default:
		what = fmt.Sprintf("exit status %d", e.Code)
	}
	if e.Stopped {
		what = "stopped (" + what + ")"
	}
	if e.Contained.MemoryKills > 0 {
		what += fmt.Sprintf("; the kernel killed %d of its processes: they reached the memory limit of %s", e.Contained.MemoryKills, contain.FormatSize(e.Contained.MemoryLimit))
	}
	return what
}

// EndedBy names what ended the process, for the task that ran it (it
// is a task.Ender, without this package importing task): one that failed
// after the kernel killed it, or some of its processes, at its memory
// limit ended by a limit ("limit"). Otherwise it has no opinion (""): a
// process that exited ended by itself, and one we stopped by whoever
// stopped it, which the cause it wraps names.
func (e *ExitError) EndedBy() (by, reason string) {
	switch {
	case e.Stopped || e.Contained.MemoryKills == 0:
		return "", ""
	case e.Signal == syscall.SIGKILL:
		return "limit", "memory: the kernel killed it at its limit of " + contain.FormatSize(e.Contained.MemoryLimit)
	}
	return "limit", fmt.Sprintf("memory: it failed (%s) after the kernel killed %d of its processes at its limit of %s",
		(&ExitError{Exit: Exit{Code: e.Code, Signal: e.Signal}}).Error(), e.Contained.MemoryKills, contain.FormatSize(e.Contained.MemoryLimit))
}

// Unwrap returns the stop cause, so errors.Is(err, context.DeadlineExceeded)
// and the like see why a stopped process ended.
func (e *ExitError) Unwrap() error { return e.Cause }
