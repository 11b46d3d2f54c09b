package task

import (
	"fmt"
	"time"
)

// Notice is something a running task tells its owner before its result: a
// shell that seems to wait for input, lines a watch was set to look for.
// Notices are not results: they never consume, replace or delay the
// task's result, which still comes exactly once when the task finishes.
type Notice struct {
	TaskID string
	Label  string
	// Kind names the notice's family, for framing and filtering
	// ("waiting_for_input", "watch", or NoticesDropped).
	Kind string
	// Text is the message, cut to Options.MaxNoticeBytes.
	Text string
	Time time.Time
}

// NoticesDropped is the Kind of the notice that says how many notices an
// owner's full queue refused (see Options.MaxNotices). Its TaskID is
// empty.
const NoticesDropped = "notices_dropped"

// Notify posts a notice to the task's owner, delivered exactly once by the
// owner's next Notices or Wait. It puts a token in the owner's Ready
// channel, wakes a Wait on this task, and emits EventNotice. It reports
// whether the notice was queued: it is not after the task finished (its
// result says what happened), when the owner has finished (nobody would
// read it), or when the owner already has Options.MaxNotices notices
// waiting (then the refusal is counted and reported by a NoticesDropped
// notice). Text is cut to Options.MaxNoticeBytes.
func (h *Handle) Notify(kind, text string) bool {
	tb, t := h.tb, h.t
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if t.state.Finished() || t.owner.dead {
		return false
	}
	o := t.owner
	now := time.Now()
	if len(o.notices) >= tb.opts.MaxNotices {
		o.noticesDropped++
		return false
	}
	n := Notice{TaskID: t.id, Label: t.label, Kind: kind, Text: cutBytes(text, tb.opts.MaxNoticeBytes), Time: now}
	o.notices = append(o.notices, n)
	t.lastActive = now
	tb.eventLocked(t, EventNotice, cutBytes(kind+": "+text, maxTraceLineBytes), now)
	o.wakeLocked()
	o.changedLocked()
	return true
}

// Notices returns the owner's waiting notices, oldest first, and removes
// them: no later Notices or Wait returns them again. If the queue refused
// notices since the last call, a NoticesDropped notice saying how many
// comes last. It does not block; nil when there are none.
func (v *View) Notices() []Notice {
	tb := v.tb
	tb.mu.Lock()
	defer tb.mu.Unlock()
	o := tb.owners[v.owner]
	if o == nil || len(o.notices) == 0 && o.noticesDropped == 0 {
		return nil
	}
	out := o.notices
	o.notices = nil
	if o.noticesDropped > 0 {
		out = append(out, tb.droppedNoticeLocked(o))
	}
	return out
}

func (tb *Table) droppedNoticeLocked(o *ownerState) Notice {
	n := Notice{Kind: NoticesDropped, Time: time.Now(),
		Text: fmt.Sprintf("%d notices were dropped: at most %d wait to be read at a time.", o.noticesDropped, tb.opts.MaxNotices)}
	o.noticesDropped = 0
	return n
}

// takeNoticesLocked removes and returns the owner's waiting notices of
// the given tasks, keeping the others in order.
func takeNoticesLocked(o *ownerState, tasks []*task) []Notice {
	var took []Notice
	kept := o.notices[:0]
	for _, n := range o.notices {
		if noticeOf(n, tasks) {
			took = append(took, n)
		} else {
			kept = append(kept, n)
		}
	}
	clear(o.notices[len(kept):])
	o.notices = kept
	if len(o.notices) == 0 {
		o.notices = nil
	}
	return took
}

// hasNoticeLocked reports whether one of tasks has a notice waiting.
func hasNoticeLocked(o *ownerState, tasks []*task) bool {
	for _, n := range o.notices {
		if noticeOf(n, tasks) {
			return true
		}
	}
	return false
}

func noticeOf(n Notice, tasks []*task) bool {
	for _, t := range tasks {
		if t.id == n.TaskID {
			return true
		}
	}
	return false
}
