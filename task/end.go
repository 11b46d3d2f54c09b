package task

import (
	"context"
	"errors"
	"strconv"
)

// Who ended a task: a finished task's Info.EndedBy is one of these, and
// Info.EndReason says the rest in words. The set is closed and small, so a
// metric may carry it as a label.
const (
	BySelf       = "self"       // its function returned (a shell exited, an agent answered or failed)
	ByModel      = "model"      // the model that owns it cancelled it (task_cancel)
	ByUser       = "user"       // a person in the session: Ctrl-C, /cancel, ACP session/cancel, the dashboard
	ByOperator   = "operator"   // someone outside the session: offstage tasks cancel
	ByParent     = "parent"     // the agent task that owns it ended; EndReason names it
	ByTimeout    = "timeout"    // it ran past its timeout
	ByLimit      = "limit"      // a limit ended it (memory, iterations, a budget); EndReason says which
	BySession    = "session"    // its session closed, or its client went away mid-call; EndReason says which face and why
	BySupervisor = "supervisor" // the process that hosts the session was stopped
	ByHost       = "host"       // its host died and the task was marked orphaned
)

// Enders lists every value of Info.EndedBy, for a bounded metric label.
var Enders = []string{BySelf, ByModel, ByUser, ByOperator, ByParent, ByTimeout, ByLimit, BySession, BySupervisor, ByHost}

// Ender is implemented by errors that say who ended a task: a
// cancellation cause passed to CancelCause or Close, or an error a task
// function returns (a budget spent, a memory limit reached). EndedBy
// returns one of the By constants and the reason in words; an empty by
// means "no opinion" and the errors it wraps are asked next.
type Ender interface {
	EndedBy() (by, reason string)
}

// EndError is a cancellation cause that names who ended a task. It is
// what Err wraps (ErrCanceled when Err is nil), so errors.Is keeps
// seeing a cancellation (or ErrClosed, for a session's end).
type EndError struct {
	By     string // one of the By constants
	Reason string // in words: "task_cancel", "the MCP client went away"
	Err    error  // what it is; nil means ErrCanceled
}

// Ended returns an *EndError with ErrCanceled: the cause to pass to
// CancelCause for a cancel by by, for reason.
func Ended(by, reason string) error { return &EndError{By: by, Reason: reason} }

// Closed returns the cause for Table.CloseCause: an *EndError by the
// session, for reason ("the MCP client went away", "/quit"), wrapping
// ErrClosed.
func Closed(reason string) error { return &EndError{By: BySession, Reason: reason, Err: ErrClosed} }

// EndedBy implements Ender.
func (e *EndError) EndedBy() (string, string) { return e.By, e.Reason }

func (e *EndError) Error() string {
	s := e.Unwrap().Error()
	if e.Reason != "" {
		s += " (" + e.By + ": " + e.Reason + ")"
	} else if e.By != "" {
		s += " (by the " + e.By + ")"
	}
	return s
}

// Unwrap returns Err, or ErrCanceled when it is nil.
func (e *EndError) Unwrap() error {
	if e.Err == nil {
		return ErrCanceled
	}
	return e.Err
}

// EndCause returns the cause to cancel a task with because of cause:
// cause itself when it names who ended it (an Ender with an opinion in
// its chain: the session closing), else an *EndError of by and reason.
// It is for a task tied to something that ended, such as a foreground
// command whose turn was cancelled (cause is then the turn's
// context.Cause).
func EndCause(cause error, by, reason string) error {
	if b, _ := enderOf(cause); b != "" {
		return cause
	}
	return &EndError{By: by, Reason: reason}
}

// EndOf says who ended a task that finished in state with err (its
// Result.Err: the function's error, or the cancellation cause), and why.
// It is the one mapping from causes to names: an Ender anywhere in err's
// chain decides; otherwise completed and failed tasks ended by
// themselves, a timed-out one by its timeout, and a cancellation cause is
// read from its sentinel: ErrOwnerDone is the parent, ErrClosed and a
// plain context cancellation the session, ErrCanceled a user. The table
// adds what only it knows: which parent, and that a cascade from the
// session is the session's.
func EndOf(state State, err error) (by, reason string) {
	if by, reason := enderOf(err); by != "" {
		return by, reason
	}
	switch state {
	case Completed:
		return BySelf, "it finished"
	case Failed:
		if err == nil {
			return BySelf, "it failed"
		}
		return BySelf, "it failed: " + cutBytes(err.Error(), maxTraceLineBytes)
	case TimedOut:
		return ByTimeout, "it ran past its timeout"
	}
	switch {
	case err == nil:
		return BySelf, ""
	case errors.Is(err, ErrTimedOut), errors.Is(err, context.DeadlineExceeded):
		return ByTimeout, "it ran past its timeout"
	case errors.Is(err, ErrOwnerDone):
		return ByParent, "its owner finished"
	case errors.Is(err, ErrClosed):
		return BySession, "the session closed"
	case err == context.Canceled:
		return BySession, "the session's context was cancelled"
	case errors.Is(err, context.Canceled): // a cause that says more: a signal's
		return BySession, "the session's context was cancelled: " + cutBytes(err.Error(), maxTraceLineBytes)
	case errors.Is(err, ErrCanceled):
		return ByUser, "cancelled"
	}
	return BySession, "the session ended: " + cutBytes(err.Error(), maxTraceLineBytes)
}

// enderOf returns what the first Ender with an opinion in err's chain
// says, depth first as errors.As walks it.
func enderOf(err error) (by, reason string) {
	for depth := 0; err != nil && depth < 100; depth++ {
		if e, ok := err.(Ender); ok {
			if by, reason := e.EndedBy(); by != "" {
				return by, reason
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if by, reason := enderOf(e); by != "" {
					return by, reason
				}
			}
			return "", ""
		default:
			return "", ""
		}
	}
	return "", ""
}

// endLocked names who ended t, which finishes now in state with err.
func (tb *Table) endLocked(t *task, state State, err error) (by, reason string) {
	switch {
	case state == TimedOut:
		if by, reason := enderOf(err); by != "" && by != ByTimeout {
			return by, reason
		}
		return ByTimeout, "it ran past its timeout of " + t.timeout.String()
	case state != Canceled:
		by, reason = EndOf(state, err)
		if by == BySelf && state == Completed && t.hasExit {
			reason = "it exited with status " + strconv.Itoa(t.exitCode)
		}
		return by, reason
	case t.cause != nil:
		return EndOf(state, t.cause)
	}
	by, reason, t.endCascaded = tb.cascadeLocked(t, 0)
	return by, reason
}

// cascadeLocked names the end of a task cancelled through its owner's
// context rather than its own: the owner's end, as a parent's, unless the
// cascade started at the table (the session closed), which is then named
// for every task it reaches. fromTable reports that.
func (tb *Table) cascadeLocked(t *task, depth int) (by, reason string, fromTable bool) {
	o := t.owner
	if o.task == nil || depth > 64 {
		cause := context.Cause(tb.ctx)
		if cause == nil {
			cause = tb.closeCause
		}
		if cause == nil {
			cause = ErrClosed
		}
		by, reason = EndOf(Canceled, cause)
		return by, reason, true
	}
	ot := o.task
	switch {
	case ot.state.Finished():
		if ot.endCascaded {
			return ot.endedBy, ot.endReason, true
		}
		by, reason = ot.endedBy, ot.endReason
	case ot.cause != nil:
		by, reason = EndOf(Canceled, ot.cause)
	case ot.runCtx != nil && ot.runCtx.Err() == context.DeadlineExceeded && ot.ctx.Err() == nil:
		by, reason = ByTimeout, "it ran past its timeout of "+ot.timeout.String()
	default:
		if by, reason, fromTable = tb.cascadeLocked(ot, depth+1); fromTable {
			return by, reason, true
		}
	}
	r := "its owner " + ot.id + " ended"
	if by != "" {
		r += " (" + by
		if reason != "" {
			r += ": " + reason
		}
		r += ")"
	}
	return ByParent, r, false
}
