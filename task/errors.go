package task

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with [errors.Is]; the table wraps
// them with the id concerned ("task shell:4: not found").
var (
	// ErrNotFound: no task with that id exists in the table (never did, or
	// retention evicted it).
	ErrNotFound = errors.New("not found")

	// ErrNotOwner: the task exists but belongs to another owner. A View
	// returns it instead of acting; in particular it never cancels the task.
	ErrNotOwner = errors.New("belongs to another owner")

	// ErrClosed: the table was closed (or its context ended) and accepts no
	// new tasks. It is also the cancellation cause of tasks ended by Close.
	ErrClosed = errors.New("task table closed")

	// ErrFull: the table already holds Options.MaxTasks tasks that it may
	// not evict (queued, running, or finished with an undelivered result).
	ErrFull = errors.New("task table full")

	// ErrOwnerDone: a task tried to start a child after it had finished.
	// It is also the cancellation cause of children cancelled because their
	// owner ended.
	ErrOwnerDone = errors.New("owner task has finished")

	// ErrCanceled is the cancellation cause recorded when Cancel or
	// CancelAll stopped a task.
	ErrCanceled = errors.New("canceled")

	// ErrTimedOut is the cancellation cause of a task that ran past its
	// Spec.Timeout.
	ErrTimedOut = errors.New("timed out")

	// ErrEventsDropped: a reader asked for events the bounded log no longer
	// holds. The reader must resynchronise (for example with Table.List).
	ErrEventsDropped = errors.New("events dropped")
)

// PanicError is the error of a task whose function panicked. The panic is
// recovered at the task boundary only; the task ends failed.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the goroutine's stack at the panic
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("task panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error, so errors.Is and
// errors.As see through a panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// idError attaches the task id to a sentinel: "task shell:4: not found".
func idError(id string, err error) error {
	return fmt.Errorf("task %s: %w", id, err)
}
