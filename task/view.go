package task

import (
	"context"
	"errors"
	"time"
)

// View is the table as one owner sees it: the top level ("") or an agent
// task. It lists, peeks, waits on, cancels and drains only that owner's
// tasks; an id of another owner's task gives an error wrapping ErrNotOwner
// and never affects that task. A View is cheap, holds no state of its own,
// and is safe for concurrent use.
type View struct {
	tb    *Table
	owner string
}

// Owner returns the id of the owner the view is bound to ("" for the top
// level).
func (v *View) Owner() string { return v.owner }

// Table returns the table the view is on: with Owner, what names a
// caller's place among every table's (package tools keys what each caller
// last read by it, so that one tool set can serve many tables).
func (v *View) Table() *Table { return v.tb }

// Spawn starts fn as a new task owned by the view's owner and returns its
// id at once. The task runs now if fewer than Options.MaxRunning tasks are
// running, otherwise it waits queued. Its context is a child of its owner's
// (the table's for the top level). Spawn fails with ErrClosed after Close,
// ErrFull at Options.MaxTasks, an ErrOwnerDone error if the owner task has
// finished, and an ErrNotFound error if the owner does not exist.
func (v *View) Spawn(spec Spec, fn Func) (string, error) {
	return v.tb.spawn(v.owner, spec, fn)
}

// List returns snapshots of the owner's tasks in id order.
func (v *View) List() []Info { return v.tb.list(v.owner, true) }

// AppendBriefs appends to dst a Brief of each of the owner's tasks that q
// selects, in id order; see Table.AppendBriefs.
func (v *View) AppendBriefs(dst []Brief, q Query) ([]Brief, int) {
	return v.tb.appendBriefs(dst, v.owner, true, q)
}

// Info returns a snapshot of one of the owner's tasks.
func (v *View) Info(id string) (Info, error) { return v.tb.info(v.owner, true, id) }

// Peek returns a snapshot of one of the owner's tasks with the last n
// blocks of its history (text cut to Options.PeekTextLimit) or the last n
// lines of its output; n <= 0 means Options.PeekBlocks. It consumes
// nothing. It calls the task's History or Output without table locks.
func (v *View) Peek(id string, n int) (Peek, error) {
	return v.tb.peek(v.owner, true, id, n, v.tb.opts.PeekTextLimit)
}

// Output returns what one of the owner's tasks attached with
// Handle.AttachOutput, or nil if it attached nothing (yet: a queued shell
// has no output). Callers type-assert it to the richer type they expect,
// such as *proc.Process; the view keeps the lookup scoped to the owner.
func (v *View) Output(id string) (Output, error) { return v.tb.outputOf(v.owner, true, id) }

// Cancel cancels one of the owner's tasks and returns at once: a queued
// task ends canceled now, a running one when its function returns. It is
// the owner's model cancelling (task_cancel): the cause is an *EndError
// wrapping ErrCanceled, and the task ends with EndedBy ByModel;
// CancelCause names another. It is idempotent. alreadyFinished reports
// whether the task had finished before this call (then nothing changes).
func (v *View) Cancel(id string) (alreadyFinished bool, err error) {
	return v.tb.cancelID(v.owner, true, id, errModelCancel)
}

// CancelCause is Cancel with cause instead (see Table.CancelCause): for
// code acting for the owner on someone else's behalf, such as a turn the
// user cancelled taking its foreground command with it. A nil cause is
// ErrCanceled.
func (v *View) CancelCause(id string, cause error) (alreadyFinished bool, err error) {
	if cause == nil {
		cause = ErrCanceled
	}
	return v.tb.cancelID(v.owner, true, id, cause)
}

// CancelAll cancels every unfinished task of the owner, as Cancel does,
// returns how many, and does not wait.
func (v *View) CancelAll() int { return v.tb.cancelAll(v.owner, true, errModelCancel) }

// Done returns a channel closed once the task has finished and its result
// is written. Receiving from it consumes nothing.
func (v *View) Done(id string) (<-chan struct{}, error) { return v.tb.doneOf(v.owner, true, id) }

// Ready returns the owner's wake-up channel. It has permit semantics: each
// time a task of the owner finishes or posts a notice, a token is put in
// the channel unless one is already there, so a wake-up while nobody
// listens is not lost; several together leave one token. A token means
// "call Drain and Notices": they may already have been taken by Wait, in
// which case both return nothing. The channel is never closed. Ready
// returns nil (a channel that never fires) if the owner is not in the
// table.
func (v *View) Ready() <-chan struct{} {
	v.tb.mu.Lock()
	defer v.tb.mu.Unlock()
	o, err := v.tb.ownerLocked(v.owner)
	if err != nil {
		return nil
	}
	return o.ready
}

// Drain returns the owner's finished, undelivered results in the order they
// finished, and marks them delivered: no later Drain or Wait returns them
// again. It does not block and costs O(results returned); nil when there
// are none.
func (v *View) Drain() []Result {
	tb := v.tb
	tb.mu.Lock()
	defer tb.mu.Unlock()
	o := tb.owners[v.owner]
	if o == nil || o.pending.n == 0 {
		return nil
	}
	now := time.Now()
	out := make([]Result, 0, o.pending.n)
	for t := o.pending.head; t != nil; t = o.pending.head {
		out = append(out, tb.deliverLocked(t, now, nil))
	}
	tb.evictLocked(now)
	return out
}

// WaitMode says when Wait is satisfied.
type WaitMode uint8

const (
	Any WaitMode = iota // at least one of the tasks has finished
	All                 // every one of the tasks has finished
)

// WaitResult is what Wait saw.
type WaitResult struct {
	// Done are the results this Wait delivered, in the order of the ids
	// asked for. They are consumed: Drain will not return them.
	Done []Result
	// Earlier are tasks that had finished and whose results were delivered
	// before this Wait (by Drain or another Wait).
	Earlier []Info
	// Running are the tasks not finished yet (queued or running).
	Running []Info
	// Unconsumed are tasks that finished but whose results this Wait did
	// not deliver because ctx ended first; Drain will return them.
	Unconsumed []Info
	// Notices are the notices of the awaited tasks this Wait delivered,
	// oldest first. They are consumed: Notices will not return them.
	Notices []Notice
}

// Wait blocks until one (Any) or all (All) of the owner's tasks ids have
// finished, or ctx ends; the caller sets a timeout with
// context.WithTimeout. Ids must be the owner's: an unknown or foreign id
// fails the whole call before anything is consumed. Repeated ids count once.
//
// A notice posted by one of the tasks (Handle.Notify: a shell waiting for
// input, say) also ends the wait, at once if one is already waiting to be
// read: the caller learns of it now rather than after a timeout that
// nothing will end. Wait then returns a nil error whether or not the
// condition holds.
//
// When the condition holds or a notice came, Wait delivers every finished,
// undelivered result among ids (Done) and the tasks' notices (Notices), and
// snapshots the rest. When ctx ends first, it consumes nothing (finished
// results stay for Drain and notices for Notices, so a caller that gives
// up cannot lose them), sorts snapshots of the tasks into Running,
// Unconsumed and Earlier, and returns context.Cause(ctx).
func (v *View) Wait(ctx context.Context, ids []string, mode WaitMode) (WaitResult, error) {
	if len(ids) == 0 {
		return WaitResult{}, errors.New("task: Wait needs at least one task id")
	}
	tb := v.tb
	tb.mu.Lock()
	tasks, err := v.resolveLocked(ids)
	if err != nil {
		tb.mu.Unlock()
		return WaitResult{}, err
	}
	if receiptOf(ctx) != nil {
		// Under way, it counts for WaitReceipts as the holds it makes
		// will: a session closing as it delivers waits for it.
		tb.receipted++
		defer func() {
			tb.mu.Lock()
			tb.unreceiptLocked()
			tb.mu.Unlock()
		}()
	}
	o := tasks[0].owner
	for {
		if met(tasks, mode) || hasNoticeLocked(o, tasks) {
			defer tb.mu.Unlock()
			return tb.collectLocked(tasks, true, receiptOf(ctx)), nil
		}
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		changed := o.changed
		tb.mu.Unlock()
		select {
		case <-changed:
			tb.mu.Lock()
		case <-ctx.Done():
			tb.mu.Lock()
			if met(tasks, mode) || hasNoticeLocked(o, tasks) { // came while we were giving up
				defer tb.mu.Unlock()
				return tb.collectLocked(tasks, true, receiptOf(ctx)), nil
			}
			defer tb.mu.Unlock()
			return tb.collectLocked(tasks, false, nil), context.Cause(ctx)
		}
	}
}

// resolveLocked maps ids to the owner's tasks, dropping repeats.
func (v *View) resolveLocked(ids []string) ([]*task, error) {
	v.tb.evictLocked(time.Now())
	tasks := make([]*task, 0, len(ids))
	for _, id := range ids {
		t, err := v.tb.lookupLocked(v.owner, true, id)
		if err != nil {
			return nil, err
		}
		dup := false
		for _, u := range tasks {
			dup = dup || u == t
		}
		if !dup {
			tasks = append(tasks, t)
		}
	}
	return tasks, nil
}

func met(tasks []*task, mode WaitMode) bool {
	n := 0
	for _, t := range tasks {
		if t.state.Finished() {
			n++
		}
	}
	if mode == All {
		return n == len(tasks)
	}
	return n > 0
}

// collectLocked sorts tasks into a WaitResult, delivering the finished,
// undelivered ones if deliver is set, held by rc if it is not nil.
func (tb *Table) collectLocked(tasks []*task, deliver bool, rc *Receipt) WaitResult {
	var r WaitResult
	now := time.Now()
	if deliver && len(tasks) > 0 {
		r.Notices = takeNoticesLocked(tasks[0].owner, tasks)
	}
	for _, t := range tasks {
		switch {
		case !t.state.Finished():
			r.Running = append(r.Running, t.infoLocked())
		case t.delivered || t.in != &t.owner.pending:
			// Delivered before, or retired undelivered because its owner
			// ended: either way not ours to deliver now.
			r.Earlier = append(r.Earlier, t.infoLocked())
		case !deliver:
			r.Unconsumed = append(r.Unconsumed, t.infoLocked())
		default:
			r.Done = append(r.Done, tb.deliverLocked(t, now, rc))
		}
	}
	tb.evictLocked(now)
	return r
}
