// Package task is the registry of an agent session's background work: the
// sub-agents and shell processes that keep running while the conversation
// goes on.
//
// A [Table] holds the tasks. Each task runs a [Func] on its own goroutine
// and gets an id "KIND:N" (agent:3, shell:4): N comes from one counter per
// table and is never reused. Every task has an owner: "" for the session's
// top level, or the id of the agent task that started it. Code acting for a
// model works through a [View] bound to its owner, so it can only see, wait
// on, read and cancel its own tasks; the Table's own methods see everything
// and are meant for UIs.
//
// The package is pure Go: it starts no processes and speaks no JSON.
// Processes (package proc) and tools (package tools) build on it.
//
//	tb := task.New(ctx, task.Options{})
//	defer tb.Close(context.Background())
//	top := tb.View("")
//	id, _ := top.Spawn(task.Spec{Kind: "agent", Label: "review"}, func(ctx context.Context, h *task.Handle) (string, error) {
//		h.Progress(1, "reading the diff")
//		return "looks good", nil
//	})
//	<-top.Ready()           // woken when a task of the top level finishes
//	for _, r := range top.Drain() {
//		fmt.Println(r.ID, r.State, r.Text) // each result exactly once
//	}
//
// # Lifecycle
//
// A task is queued, then running, then finished in exactly one of
// completed, failed, canceled or timed_out. At most Options.MaxRunning
// functions run at once; the rest wait queued and start in FIFO order.
//
// A task's context is a child of its owner's (the table's for the top
// level): cancelling an agent task cancels everything it started. When a
// task finishes, in any state, its unfinished children are cancelled with
// cause [ErrOwnerDone]. Cancel returns at once; the task becomes canceled
// when its function returns (a queued task at once). A task cancelled by
// anyone before its function's return is recorded ends canceled whatever
// the function returned; its text is kept. A task running past
// Spec.Timeout ends timed_out. A panic in a task function is recovered at
// the task boundary and the task ends failed with a [*PanicError].
//
// Every finished task says who or what ended it (Info.EndedBy, one of
// the By constants: self, model, user, operator, parent, timeout, limit,
// session, supervisor, host) and why in words (Info.EndReason). [EndOf]
// is the one mapping from a task's error or cancellation cause to the
// name: a cause that implements [Ender] names itself (see [Ended],
// [Closed]; another package's error, such as a spent budget, does so by
// implementing EndedBy); otherwise the sentinels decide. [View.Cancel] is
// the owner's model cancelling, [Table.Cancel] a user's; CancelCause and
// [Table.CloseCause] name anyone else. A task cancelled through its
// owner's context ends by its parent, and the reason names the owner
// and how it ended; one the table's close or context reaches ends as
// the table did (its session closed).
//
// A finished result is delivered to its owner exactly once, by whichever
// comes first of [View.Drain] (the runtime's passive reflow before each
// model request) and [View.Wait] (the model asked). Delivery is a flag
// flipped under the table's lock by one function. An undelivered result is
// never evicted while its owner can still receive it; once the owner task
// has finished, nothing will, and its children's results become evictable.
// Finished, delivered tasks stay inspectable until retention evicts them
// (Options.MaxRetained, Options.RetainFor; the oldest go first).
//
// A delivery can be taken back, for a caller that hands results on
// through something that can fail (an MCP server writing a task_wait's
// answer to a client that may have died): a Wait under a context from
// [WithReceipt] holds what it delivers, unevictable, until
// [Receipt.Commit] makes it final or [Receipt.Return] makes the results
// undelivered again (EventUndelivered), back among the owner's in finish
// order, for the next Drain or Wait.
//
// A running task can also tell its owner something before its result,
// with [Handle.Notify]: a shell that seems to wait for input, lines a watch
// was set to look for. A [Notice] is not a result: it never consumes,
// replaces or delays the result. It is delivered exactly once, by
// whichever comes first of [View.Notices] (read with Drain before each
// model request) and a [View.Wait] on that task, which a notice ends at
// once. It wakes Ready like a result. At most Options.MaxNotices wait per
// owner; more are refused, counted, and the count is delivered as a
// notice of its own. Notices of an owner that has finished are dropped.
//
// [Table.Close] cancels everything with cause [ErrClosed], refuses new
// tasks, and waits until every task function has returned. Undelivered
// results can still be drained afterwards.
//
// # Concurrency properties
//
// Every method of Table, View, Handle and EventLog is safe for concurrent
// use. One mutex guards the table; no method holds it while calling code
// it does not own: task functions, History.Snapshot and Output.Tail are
// all called without it. Cancellation functions of contexts are called
// under it, which is safe because they run no caller code synchronously.
//
// Waiting is done on channels: each task has a done channel closed exactly
// once, after its result is written ([View.Done]); [View.Wait] blocks on a
// per-owner channel closed whenever a task of that owner finishes, and
// decides and delivers in the same critical section, so a finished task is
// never reported as still running or as canceled when it completed.
// [View.Ready] is a capacity-1 channel per owner holding a permit: a task
// that finishes while nobody listens leaves a token, so the wake-up is
// never lost; a token can be stale (Wait took the results), and Drain then
// returns nothing.
//
// Events: the table appends every state change, in the order the changes
// happen under its lock, to one bounded [EventLog] with sequence numbers
// 1, 2, 3, …. Appending never blocks and never waits for readers: when the
// log is full the oldest event is overwritten. Readers poll
// [EventLog.After] or block in [EventLog.Wait] from the last sequence they
// saw; a reader that fell more than Options.EventLogSize events behind gets
// an error wrapping [ErrEventsDropped] together with the events still
// held, never a silent gap, and should resynchronise with Table.List and
// EventLog.Last. When the last queued or running task finishes, one
// [EventIdle] ("background_idle") follows its EventFinished: a hook or UI
// waits for it instead of polling the list.
//
// Recording: Options.Recorder, if set, is handed every task's event with the
// task's details as it happens, under the table's lock, in one Change the
// table reuses: it must copy what it keeps, return quickly and never call
// the table (a journal queues a copy). EventLog.Follow is the way to read
// events as they come instead.
//
// Costs: Spawn, Cancel and a Drain that finds nothing are O(1); Drain is
// O(results returned); List is O(tasks held) and copies an Info per task,
// while AppendBriefs fills the caller's slice with compact rows, narrowed
// and paged by a Query, allocating nothing more. Memory is bounded:
// Options.MaxTasks tasks that may not be evicted (Spawn fails with
// [ErrFull] beyond it), Options.MaxRetained evictable ones, result text cut
// to Options.MaxResultBytes, traces to Options.MaxTrace lines, and the
// event log to Options.EventLogSize events (it grows as events come).
package task
