package task

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Table is the registry of one session's background tasks. Create it with
// New; it is safe for concurrent use. See the package documentation for the
// lifecycle and the concurrency properties.
type Table struct {
	opts    Options
	ctx     context.Context // the table's context: parent of every top-level task's
	cancel  context.CancelCauseFunc
	events  *EventLog
	drained chan struct{} // closed once the table is closed and no task function is live

	mu            sync.Mutex             // guards the fields below and the mutable fields of every task and ownerState
	nextN         uint64                 // last number handed out in an id
	tasks         map[uint64]*task       // every task not yet evicted, by the N of its id
	all           []*task                // the same tasks in id order, with evicted ones not yet compacted away
	evictedInAll  int                    // how many of all are evicted
	owners        map[string]*ownerState // "" and every task that has acted as an owner, until evicted
	runq          queue                  // queued tasks, FIFO
	retired       queue                  // finished tasks that retention may evict, oldest first
	running       int                    // tasks in state Running
	live          int                    // tasks whose function has not finished (queued or running)
	held          int                    // tasks retention may not evict: live, finished and undelivered with a live owner, or held by a Receipt
	receipted     int                    // tasks held by a Receipt, and Waits under one under way (WaitReceipts)
	unreceipted   chan struct{}          // closed when receipted comes to 0; nil until WaitReceipts waits
	finishes      uint64                 // tasks finished so far: each one's finishN
	closed        bool                   // Close was called
	closeCause    error                  // the cause Close was given
	drainedClosed bool                   // drained is closed
	change        Change                 // handed to Options.Recorder, reused
}

// ownerState is what the table keeps for one owner: the top level ("") or
// an agent task that has started tasks of its own.
type ownerState struct {
	id   string
	ctx  context.Context // parent of the contexts of the owner's tasks
	task *task           // the owner task; nil for the top level

	// guarded by Table.mu
	pending queue         // the owner's finished, undelivered tasks, in finish order
	ready   chan struct{} // capacity 1: a permit that some task of the owner finished
	changed chan struct{} // closed and cleared when a task of the owner finishes; nil until a Wait needs it
	dead    bool          // the owner task has finished: nothing will deliver to it any more

	notices        []Notice // posted by the owner's running tasks, not yet read; at most Options.MaxNotices
	noticesDropped int      // notices refused because the queue was full, since the last read
}

// wakeLocked leaves a token in the owner's Ready channel, unless one is
// there.
func (o *ownerState) wakeLocked() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// changedLocked wakes the owner's Waits.
func (o *ownerState) changedLocked() {
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
}

// task is one entry of the table.
type task struct {
	// set at spawn, then immutable
	n       uint64 // the N of the id
	id      string
	kind    string
	label   string
	owner   *ownerState
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timeout time.Duration
	fn      Func
	runCtx  context.Context    // ctx, or ctx with the timeout; set when the task starts
	stopRun context.CancelFunc // releases runCtx's timer; nil without a timeout
	done    chan struct{}      // closed once, after the result is written
	handle  Handle

	// guarded by Table.mu
	self         *ownerState // this task as an owner, once it has started tasks
	state        State
	created      time.Time
	started      time.Time
	finished     time.Time
	finishN      uint64 // its place in the order tasks finished (Table.finishes)
	retiredAt    time.Time
	lastActive   time.Time
	iteration    int
	activity     string
	exitCode     int
	hasExit      bool
	history      History
	output       Output
	trace        []string
	traceDropped int
	usage        Usage // its own model calls' and its descendants' (Handle.AddUsage)
	text         string
	err          error
	cause        error  // why the task itself was cancelled (cancelLocked), if it was before its context ended
	endedBy      string // who ended it (a By constant), once finished
	endReason    string // why, in words
	endCascaded  bool   // it ended because the table's context ended, reaching it through its owners
	delivered    bool
	heldBy       *Receipt // the receipt holding its delivery until the answer carrying it is known to have gone out
	evicted      bool
	stopQueued   func() bool // stops the AfterFunc that ends a queued task whose context ends
	in           *queue      // the queue the task is in, if any
	prev, next   *task
}

// New returns an empty table whose tasks all descend from ctx: when ctx
// ends, every task is cancelled and Spawn fails with ErrClosed. Call Close
// to cancel everything and wait for the task functions to return.
func New(ctx context.Context, opts Options) *Table {
	tctx, cancel := context.WithCancelCause(ctx)
	opts = opts.withDefaults()
	tb := &Table{
		opts:    opts,
		ctx:     tctx,
		cancel:  cancel,
		drained: make(chan struct{}),
		tasks:   make(map[uint64]*task),
		owners:  make(map[string]*ownerState),
	}
	tb.events = newEventLog(&tb.mu, opts.EventLogSize)
	tb.nextN = opts.FirstID
	tb.owners[""] = &ownerState{ctx: tctx, ready: make(chan struct{}, 1)}
	return tb
}

// Events returns the table's event log.
func (tb *Table) Events() *EventLog { return tb.events }

// View returns a view of the table bound to owner: "" for the top level, or
// the id of an agent task. Views are cheap; make them as needed.
//
// View does not check owner (a task can make views of itself with
// Handle.View, which is always right). A view of an owner that is not in
// the table, a mistyped id or one never spawned here, is empty and stays
// so: it lists nothing, refuses every id with ErrNotOwner, its Spawn fails
// with an ErrNotFound error, and its Ready is nil, a channel that never
// fires, so a loop that waits on it waits forever. Spawn is the call that
// tells: to check an owner id, look it up with Table.Info first.
func (tb *Table) View(owner string) *View { return &View{tb: tb, owner: owner} }

// List returns a snapshot of every task in the table, in id order. It is
// meant for UIs; the model sees only its own tasks, through a View.
func (tb *Table) List() []Info { return tb.list("", false) }

// Info returns a snapshot of one task.
func (tb *Table) Info(id string) (Info, error) { return tb.info("", false, id) }

// Peek returns a snapshot of one task with the last n blocks of its history
// or the last n lines of its output (Options.PeekBlocks when n <= 0).
func (tb *Table) Peek(id string, n int) (Peek, error) {
	return tb.peek("", false, id, n, tb.opts.PeekTextLimit)
}

// PeekText is Peek with the blocks' free text cut to textLimit characters
// instead of Options.PeekTextLimit: for a person looking at what an agent
// did (the CLI's /inspect), where the model's bird's-eye default (no text)
// shows nothing.
func (tb *Table) PeekText(id string, n, textLimit int) (Peek, error) {
	return tb.peek("", false, id, n, textLimit)
}

// Cancel cancels one task, whoever owns it, and returns at once; see
// View.Cancel. It is a user's cancel (the Table's methods are for UIs):
// the task ends with EndedBy ByUser; CancelCause names another.
func (tb *Table) Cancel(id string) (alreadyFinished bool, err error) {
	return tb.cancelID("", false, id, errUserCancel)
}

// errUserCancel and errModelCancel are the causes of Table.Cancel and
// View.Cancel.
var (
	errUserCancel  = &EndError{By: ByUser, Reason: "cancelled from the session"}
	errModelCancel = &EndError{By: ByModel, Reason: "task_cancel"}
)

// CancelCause is Cancel with cause recorded instead: the task's
// Result.Err (and so what its owner is told) is cause, and who ended it
// (Info.EndedBy) is what EndOf makes of cause; an *EndError (see Ended)
// names anyone. It is for a canceller the owner should hear of by name,
// such as an operator stopping the task from outside the session; cause
// should wrap ErrCanceled (errors.Is) so code that branches on it still
// sees a cancellation. A nil cause is ErrCanceled. Like Cancel it returns
// at once, and does nothing to a finished task.
func (tb *Table) CancelCause(id string, cause error) (alreadyFinished bool, err error) {
	if cause == nil {
		cause = ErrCanceled
	}
	return tb.cancelID("", false, id, cause)
}

// Done returns a channel closed once the task has finished, whoever owns
// it; see View.Done.
func (tb *Table) Done(id string) (<-chan struct{}, error) { return tb.doneOf("", false, id) }

// Output returns what the task attached with Handle.AttachOutput, whoever
// owns it; see View.Output.
func (tb *Table) Output(id string) (Output, error) { return tb.outputOf("", false, id) }

// Result returns a finished task's result, whoever owns it, without
// delivering it: its owner still gets it exactly once, by Drain or Wait.
// It is meant for UIs that show what a task ended with; ok is false while
// the task has not finished (r then holds only its Info).
func (tb *Table) Result(id string) (r Result, ok bool, err error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	t, err := tb.lookupLocked("", false, id)
	if err != nil {
		return Result{}, false, err
	}
	if !t.state.Finished() {
		return Result{Info: t.infoLocked()}, false, nil
	}
	return Result{Info: t.infoLocked(), Text: t.text, Err: t.err, Trace: t.traceLocked()}, true, nil
}

// CancelAll cancels every unfinished task and returns how many it
// cancelled, as a user's cancel. It does not wait; the table stays open
// for new tasks.
func (tb *Table) CancelAll() int { return tb.cancelAll("", false, errUserCancel) }

// Close cancels every task with cause ErrClosed, refuses new ones, and
// waits until every task function has returned or ctx ends (then it returns
// context.Cause(ctx) and the tasks go on winding down). It is idempotent
// and safe to call concurrently; a second call waits like the first.
// Undelivered results stay readable with Drain after Close.
func (tb *Table) Close(ctx context.Context) error { return tb.CloseCause(ctx, nil) }

// CloseCause is Close with cause as the cancellation cause instead of
// ErrClosed: an *EndError naming why the session closed ("the MCP client
// went away"), which every task it ends records (EndedBy, EndReason). It
// should wrap ErrClosed, as Ended's do not: use &EndError{By: BySession,
// Reason: …, Err: ErrClosed}. Only the first call's cause counts.
func (tb *Table) CloseCause(ctx context.Context, cause error) error {
	if cause == nil {
		cause = ErrClosed
	}
	tb.mu.Lock()
	if !tb.closed {
		tb.closed = true
		tb.closeCause = cause
		now := time.Now()
		// Cancelling under the lock is safe: it runs no code of ours
		// synchronously (AfterFuncs run on their own goroutines). It comes
		// first so that the queued tasks ended below see why.
		tb.cancel(cause)
		for t := tb.runq.pop(); t != nil; t = tb.runq.pop() {
			tb.finishLocked(t, Canceled, "", context.Cause(t.ctx), now)
		}
		tb.settleLocked(now)
		tb.signalDrainedLocked()
	}
	tb.mu.Unlock()
	select {
	case <-tb.drained:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func validKind(kind string) error {
	if kind == "" {
		return errors.New("task: empty kind")
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; c <= ' ' || c == ':' || c >= 0x7f {
			return fmt.Errorf("task: invalid kind %q: use printable ASCII without ':' or spaces", kind)
		}
	}
	return nil
}

// formatID returns "kind:n" with a single allocation.
func formatID(kind string, n uint64) string {
	var buf [64]byte
	b := append(buf[:0], kind...)
	b = append(b, ':')
	return string(strconv.AppendUint(b, n, 10))
}

// ValidID reports whether id has the form of a task id, KIND:N: a kind
// of printable ASCII without ':' or spaces, a colon, and a decimal
// number from 1. It says nothing of whether such a task exists; a
// caller tells a mistyped id from one not in the table with it.
func ValidID(id string) bool {
	i := strings.LastIndexByte(id, ':')
	n := parseID(id)
	return n > 0 && validKind(id[:i]) == nil && strconv.FormatUint(n, 10) == id[i+1:]
}

// parseID returns the N of "KIND:N", or 0 if id is not of that form.
func parseID(id string) uint64 {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 {
		return 0
	}
	n, err := strconv.ParseUint(id[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func (tb *Table) spawn(owner string, spec Spec, fn Func) (string, error) {
	if err := validKind(spec.Kind); err != nil {
		return "", err
	}
	if fn == nil {
		return "", errors.New("task: nil Func")
	}
	if p, ok := tb.opts.Recorder.(Pacer); ok {
		p.Pace() // outside the lock: it may wait for the recorder
	}
	tb.mu.Lock()
	if tb.closed || tb.ctx.Err() != nil {
		tb.mu.Unlock()
		return "", ErrClosed
	}
	o, err := tb.ownerLocked(owner)
	if err == nil && o.dead {
		err = idError(owner, ErrOwnerDone)
	}
	if err == nil && tb.held >= tb.opts.MaxTasks {
		err = fmt.Errorf("%w: %d tasks are queued, running or waiting for delivery", ErrFull, tb.held)
	}
	if err != nil {
		tb.mu.Unlock()
		return "", err
	}
	tb.nextN++
	now := time.Now()
	t := &task{
		n:       tb.nextN,
		id:      formatID(spec.Kind, tb.nextN),
		kind:    spec.Kind,
		label:   spec.Label,
		owner:   o,
		timeout: spec.Timeout,
		fn:      fn,
		created: now,
	}
	t.handle = Handle{tb: tb, t: t}
	t.ctx, t.cancel = context.WithCancelCause(o.ctx)
	tb.tasks[t.n] = t
	tb.all = append(tb.all, t)
	tb.held++
	tb.live++
	tb.eventLocked(t, EventSpawned, "", now)
	if tb.runq.n == 0 && tb.running < tb.opts.MaxRunning {
		tb.startLocked(t, now)
	} else {
		tb.queueLocked(t)
	}
	tb.evictLocked(now)
	tb.mu.Unlock()
	return t.id, nil
}

// ownerLocked returns the state of owner, creating it for a task that acts
// as an owner for the first time.
func (tb *Table) ownerLocked(owner string) (*ownerState, error) {
	if o := tb.owners[owner]; o != nil {
		return o, nil
	}
	t := tb.lookupID(owner)
	if t == nil {
		return nil, fmt.Errorf("owner %w", idError(owner, ErrNotFound))
	}
	ctx := t.ctx
	if t.runCtx != nil {
		ctx = t.runCtx // so the owner's timeout reaches its children at once
	}
	o := &ownerState{id: owner, ctx: ctx, task: t, ready: make(chan struct{}, 1), dead: t.state.Finished()}
	t.self = o
	tb.owners[owner] = o
	return o, nil
}

// queueLocked makes t wait for a running slot. If its context ends while
// it waits (its owner is cancelled, the table's context ends), it ends
// canceled without running.
func (tb *Table) queueLocked(t *task) {
	tb.runq.push(t)
	t.stopQueued = context.AfterFunc(t.ctx, func() { tb.endQueued(t) })
}

// startLocked moves t to Running and starts its goroutine. The go
// statement never blocks, so it is safe under the lock; the goroutine takes
// the lock only when the function returns.
func (tb *Table) startLocked(t *task, now time.Time) {
	t.state = Running
	t.started, t.lastActive = now, now
	t.runCtx = t.ctx
	if t.timeout > 0 {
		t.runCtx, t.stopRun = context.WithTimeoutCause(t.ctx, t.timeout, ErrTimedOut)
	}
	if t.self != nil {
		t.self.ctx = t.runCtx
	}
	tb.running++
	tb.eventLocked(t, EventStarted, "", now)
	go tb.run(t)
}

// settleLocked restores the table's invariants after a change: queued
// tasks start while there are free slots, and retention evicts what it
// must.
func (tb *Table) settleLocked(now time.Time) {
	for !tb.closed && tb.running < tb.opts.MaxRunning {
		t := tb.runq.pop()
		if t == nil {
			break
		}
		if t.ctx.Err() != nil {
			tb.finishLocked(t, Canceled, "", context.Cause(t.ctx), now)
			continue
		}
		t.stopQueued()
		tb.startLocked(t, now)
	}
	tb.evictLocked(now)
}

// endQueued ends a queued task whose context ended (its owner was
// cancelled, or the table's context ended). It runs as a context.AfterFunc.
func (tb *Table) endQueued(t *task) {
	tb.mu.Lock()
	if t.state == Queued {
		now := time.Now()
		tb.runq.remove(t)
		tb.finishLocked(t, Canceled, "", context.Cause(t.ctx), now)
		tb.settleLocked(now)
	}
	tb.mu.Unlock()
}

// run is a running task's goroutine. It reads t.runCtx without the lock:
// startLocked wrote it before the go statement. The normal path is kept
// shallow on purpose: a new goroutine starts with a small stack, and
// growing it (context cancellation ranges over a map) would double the
// cost of a short task.
func (tb *Table) run(t *task) {
	ctx := t.runCtx
	returned := false
	defer func() {
		if returned {
			return
		}
		// A panic, or runtime.Goexit (which recover does not stop).
		v := recover()
		if v == nil {
			v = errors.New("task function called runtime.Goexit")
		}
		tb.finishRun(t, ctx, "", &PanicError{Value: v, Stack: debug.Stack()}, true)
	}()
	text, err := t.fn(ctx, &t.handle)
	returned = true
	tb.finishRun(t, ctx, text, err, false)
}

// finishRun records the end of a running task's function. This is the
// moment the task finishes: a Cancel that took the lock before it makes the
// task canceled, one after it finds the task finished. Then it cancels the
// task's context, which cancels its children and frees its timer, and
// counts the function as returned, so Close returns only once every task
// goroutine is done with the table.
func (tb *Table) finishRun(t *task, ctx context.Context, text string, err error, panicked bool) {
	tb.mu.Lock()
	state := Completed
	switch cause := context.Cause(ctx); {
	case panicked:
		state = Failed
	case ctx.Err() == context.DeadlineExceeded && t.ctx.Err() == nil:
		state, err = TimedOut, cause
	case cause != nil:
		state, err = Canceled, cause
	case err != nil:
		state = Failed
	}
	now := time.Now()
	tb.finishLocked(t, state, text, err, now)
	tb.settleLocked(now)
	t.cancel(ErrOwnerDone)
	if t.stopRun != nil {
		t.stopRun()
	}
	tb.live--
	tb.signalDrainedLocked()
	tb.mu.Unlock()
}

// signalDrainedLocked closes drained once the table is closed and no task
// function is live.
func (tb *Table) signalDrainedLocked() {
	if tb.closed && tb.live == 0 && !tb.drainedClosed {
		tb.drainedClosed = true
		close(tb.drained)
	}
}

// finishLocked writes a task's result and hands it to its owner. Finishing
// a task twice is a bug in this package and panics.
func (tb *Table) finishLocked(t *task, state State, text string, err error, now time.Time) {
	if t.state.Finished() {
		panic("task: " + t.id + " finished twice")
	}
	queued := t.state == Queued
	if queued {
		t.stopQueued()
	} else {
		tb.running--
	}
	t.state, t.finished = state, now
	tb.finishes++
	t.finishN = tb.finishes
	t.text, t.err = cutBytes(text, tb.opts.MaxResultBytes), err
	t.endedBy, t.endReason = tb.endLocked(t, state, err)
	t.endReason = cutBytes(t.endReason, maxTraceLineBytes)
	if queued {
		// Cancel its context now: finishRun will not. (For a running
		// task, finishRun cancels it right after this.)
		t.cancel(ErrOwnerDone)
	}
	if o := t.self; o != nil {
		o.dead = true
		o.notices, o.noticesDropped = nil, 0 // nobody will read them
		for c := o.pending.pop(); c != nil; c = o.pending.pop() {
			tb.retireLocked(c, now)
		}
	}
	o := t.owner
	if o.dead {
		tb.retireLocked(t, now) // nothing will deliver to a finished owner
	} else {
		o.pending.push(t)
		o.wakeLocked()
	}
	o.changedLocked()
	if t.done != nil {
		close(t.done)
	}
	msg := ""
	if err != nil {
		msg = cutBytes(err.Error(), maxTraceLineBytes)
	}
	tb.eventLocked(t, EventFinished, msg, now)
	if tb.running == 0 && tb.runq.n == 0 {
		tb.events.appendLocked(Event{Time: now, Type: EventIdle})
	}
	if queued {
		// A queued task never ran: its function will not release it.
		tb.live--
		tb.signalDrainedLocked()
	}
}

// deliverLocked is the only place a result is marked delivered. With a
// receipt, the task stays held (not evictable) until the receipt is
// committed or returned.
func (tb *Table) deliverLocked(t *task, now time.Time, rc *Receipt) Result {
	if t.delivered || !t.state.Finished() {
		panic("task: " + t.id + " delivered twice or before it finished")
	}
	t.delivered = true
	r := Result{Info: t.infoLocked(), Text: t.text, Err: t.err, Trace: t.traceLocked()}
	t.owner.pending.remove(t)
	if rc != nil && rc.hold(t) {
		t.heldBy = rc // recorded delivered at Commit: a crash before it leaves it undelivered
		tb.receipted++
	} else {
		tb.retireLocked(t, now)
		tb.eventLocked(t, EventDelivered, "", now)
	}
	return r
}

// retireLocked makes a finished task evictable.
func (tb *Table) retireLocked(t *task, now time.Time) {
	t.retiredAt = now
	tb.retired.push(t)
	tb.held--
}

// evictLocked applies retention to retired tasks: at most MaxRetained, none
// retired longer than RetainFor ago.
func (tb *Table) evictLocked(now time.Time) {
	for t := tb.retired.head; t != nil; t = tb.retired.head {
		if tb.retired.n <= tb.opts.MaxRetained && now.Sub(t.retiredAt) < tb.opts.RetainFor {
			break
		}
		tb.retired.remove(t)
		t.evicted = true
		delete(tb.tasks, t.n)
		if t.self != nil {
			delete(tb.owners, t.id)
		}
		tb.evictedInAll++
		tb.eventLocked(t, EventEvicted, "", now)
	}
	if tb.evictedInAll > 32 && tb.evictedInAll > len(tb.all)/2 {
		tb.all = slices.DeleteFunc(tb.all, func(t *task) bool { return t.evicted })
		tb.evictedInAll = 0
	}
}

func (tb *Table) eventLocked(t *task, typ EventType, text string, now time.Time) {
	e := tb.events.appendLocked(Event{
		Time: now, Type: typ, ID: t.id, Kind: t.kind, Owner: t.owner.id,
		State: t.state, Iteration: t.iteration, Text: text, EndedBy: t.endedBy,
	})
	if tb.opts.Recorder != nil {
		tb.recordLocked(t, &e)
	}
}

// traceLocked returns a copy of the trace, led by a note of what was dropped.
func (t *task) traceLocked() []string {
	if len(t.trace) == 0 {
		return nil
	}
	out := make([]string, 0, len(t.trace)+1)
	if t.traceDropped > 0 {
		out = append(out, "…("+strconv.Itoa(t.traceDropped)+" earlier trace lines dropped)")
	}
	return append(out, t.trace...)
}

func (t *task) infoLocked() Info {
	return Info{
		ID: t.id, Kind: t.kind, Label: t.label, Owner: t.owner.id, State: t.state,
		Created: t.created, Started: t.started, Finished: t.finished,
		Iteration: t.iteration, Activity: t.activity, LastActivity: t.lastActive,
		ExitCode: t.exitCodeLocked(), Delivered: t.delivered, Usage: t.usage,
		EndedBy: t.endedBy, EndReason: t.endReason,
	}
}

// exitCodeLocked returns a fresh copy of the reported exit code, nil if
// none was reported: callers keep snapshots, which must not alias the task.
func (t *task) exitCodeLocked() *int {
	if !t.hasExit {
		return nil
	}
	code := t.exitCode
	return &code
}

// lookupID returns the task with exactly this id, or nil.
func (tb *Table) lookupID(id string) *task {
	if t := tb.tasks[parseID(id)]; t != nil && t.id == id {
		return t
	}
	return nil
}

// lookupLocked finds a task by id; scoped lookups refuse tasks of other
// owners with ErrNotOwner.
func (tb *Table) lookupLocked(owner string, scoped bool, id string) (*task, error) {
	t := tb.lookupID(id)
	if t == nil {
		return nil, idError(id, ErrNotFound)
	}
	if scoped && t.owner.id != owner {
		return nil, idError(id, ErrNotOwner)
	}
	return t, nil
}

func (tb *Table) list(owner string, scoped bool) []Info {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.evictLocked(time.Now())
	out := make([]Info, 0, len(tb.tasks))
	for _, t := range tb.all {
		if !t.evicted && (!scoped || t.owner.id == owner) {
			out = append(out, t.infoLocked())
		}
	}
	return out
}

func (tb *Table) info(owner string, scoped bool, id string) (Info, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.evictLocked(time.Now())
	t, err := tb.lookupLocked(owner, scoped, id)
	if err != nil {
		return Info{}, err
	}
	return t.infoLocked(), nil
}

func (tb *Table) peek(owner string, scoped bool, id string, n, textLimit int) (Peek, error) {
	tb.mu.Lock()
	tb.evictLocked(time.Now())
	t, err := tb.lookupLocked(owner, scoped, id)
	if err != nil {
		tb.mu.Unlock()
		return Peek{}, err
	}
	p := Peek{Info: t.infoLocked()}
	history, output := t.history, t.output
	tb.mu.Unlock()

	// History and Output belong to the task's implementation: call them
	// without the lock.
	if n <= 0 {
		n = tb.opts.PeekBlocks
	}
	if history != nil {
		all := history.Snapshot()
		p.TotalBlocks = len(all)
		p.Blocks = recentBlocks(all, n, textLimit)
	}
	if output != nil {
		p.Output = output.Tail(n)
	}
	return p, nil
}

func (tb *Table) doneOf(owner string, scoped bool, id string) (<-chan struct{}, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	t, err := tb.lookupLocked(owner, scoped, id)
	if err != nil {
		return nil, err
	}
	if t.done == nil {
		t.done = make(chan struct{})
		if t.state.Finished() {
			close(t.done)
		}
	}
	return t.done, nil
}

func (tb *Table) outputOf(owner string, scoped bool, id string) (Output, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	t, err := tb.lookupLocked(owner, scoped, id)
	if err != nil {
		return nil, err
	}
	return t.output, nil
}

func (tb *Table) cancelID(owner string, scoped bool, id string, cause error) (bool, error) {
	tb.mu.Lock()
	t, err := tb.lookupLocked(owner, scoped, id)
	if err != nil {
		tb.mu.Unlock()
		return false, err
	}
	finished := t.state.Finished()
	if !finished {
		tb.cancelLocked(t, time.Now(), cause)
	}
	tb.mu.Unlock()
	return finished, nil
}

func (tb *Table) cancelAll(owner string, scoped bool, cause error) int {
	tb.mu.Lock()
	now, n := time.Now(), 0
	for _, t := range tb.all {
		if !t.evicted && !t.state.Finished() && (!scoped || t.owner.id == owner) {
			tb.cancelLocked(t, now, cause)
			n++
		}
	}
	tb.mu.Unlock()
	return n
}

// cancelLocked cancels an unfinished task. A queued task ends at once; a
// running one ends when its function returns. Cancelling the context under
// the lock makes the order of Cancel and finishRun well defined, and runs
// none of our code synchronously.
func (tb *Table) cancelLocked(t *task, now time.Time, cause error) {
	if t.ctx.Err() == nil {
		t.cause = cause // its own end, not its owner's: see endLocked
	}
	t.cancel(cause)
	if t.state == Queued {
		tb.runq.remove(t)
		tb.finishLocked(t, Canceled, "", context.Cause(t.ctx), now)
		tb.settleLocked(now)
	}
}
