//go:build unix && !linux

package contain

import (
	"errors"
	"fmt"
	"os"
)

var errNoWaitid = errors.New("waitid with WNOWAIT is not used on this platform")

// WaitExited is not available here: the leader is reaped first and what is
// left of its group killed right after, which leaves a window of
// microseconds in which a reused group id could be hit. Linux avoids it.
func WaitExited(pid int) error { return errNoWaitid }

// Pipe returns a close-on-exec pipe whose ends Go's poller manages.
func Pipe(pollRead, pollWrite bool) (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("proc: pipe: %w", err)
	}
	return r, w, nil
}

// Pollable returns f. On Linux it makes a terminal's master a file of the
// runtime's poller, so a write to a terminal nobody reads can be given up;
// elsewhere that is not verified (kqueue and terminals), and the master
// stays as the pty package gives it: a caller of Input behind such a write
// still gives up when its context ends, but the write itself waits until
// the terminal is read or closed.
func Pollable(f *os.File) (*os.File, error) { return f, nil }

// TakeWaitSlot is false here: there is no WaitExited to share with.
func TakeWaitSlot() bool { return false }

// ReleaseWaitSlot does nothing here.
func ReleaseWaitSlot() {}
