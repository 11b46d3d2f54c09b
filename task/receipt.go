package task

import (
	"context"
	"sync"
	"time"
)

// A Receipt holds the results that Waits under one context delivered
// until the caller knows whether the answer carrying them reached the
// owner: an MCP server hands a task_wait's results to a client through a
// pipe, and a client that dies as the answer is written never gets them.
// Commit says the answer went out: the results stay delivered. Return
// says it did not: the results become undelivered again, and the next
// Drain or Wait delivers them, once.
//
// Until then a held result counts as delivered (Info.Delivered; a Wait
// reports it as delivered before) but is not evictable: it is one of the
// tasks Options.MaxTasks bounds. Exactly one of Commit and Return counts;
// later calls do nothing, and a Wait under the context after that
// delivers for good. A Receipt nobody settles keeps its results held for
// the table's life: settle every one.
//
// Only View.Wait holds: Drain, the runtime's own reflow into a
// conversation it keeps, delivers for good.
//
// Its methods are safe for concurrent use.
type Receipt struct {
	mu      sync.Mutex
	tasks   []*task // guarded by mu: held here, in the order delivered
	settled bool    // guarded by mu: Commit or Return was called
}

type receiptKey struct{}

// WithReceipt returns a context under which View.Wait holds what it
// delivers on a new Receipt, and the Receipt.
func WithReceipt(parent context.Context) (context.Context, *Receipt) {
	rc := new(Receipt)
	return context.WithValue(parent, receiptKey{}, rc), rc
}

// receiptOf returns the receipt ctx carries, or nil.
func receiptOf(ctx context.Context) *Receipt {
	rc, _ := ctx.Value(receiptKey{}).(*Receipt)
	return rc
}

// hold adds t, a task being delivered, to the receipt; false once the
// receipt is settled. It is called with t's table locked.
func (r *Receipt) hold(t *task) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return false
	}
	r.tasks = append(r.tasks, t)
	return true
}

// settle marks the receipt settled and returns what it held, or nil if
// it was settled before.
func (r *Receipt) settle() []*task {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return nil
	}
	r.settled = true
	held := r.tasks
	r.tasks = nil
	return held
}

// IDs returns the ids of the results the receipt holds, in the order
// they were delivered; nil once it is settled.
func (r *Receipt) IDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, t := range r.tasks {
		ids = append(ids, t.id)
	}
	return ids
}

// Commit makes the held deliveries final: the results are recorded
// delivered (EventDelivered, which a held one has not had: a process
// that dies holding it leaves it undelivered in a journal) and become
// evictable, as any delivered one.
func (r *Receipt) Commit() {
	for _, t := range r.settle() {
		tb := t.handle.tb
		tb.mu.Lock()
		if t.heldBy == r {
			now := time.Now()
			tb.unholdLocked(t)
			tb.retireLocked(t, now)
			tb.eventLocked(t, EventDelivered, "", now)
			tb.evictLocked(now)
		}
		tb.mu.Unlock()
	}
}

// Return takes the held deliveries back and returns the ids of the
// results it made undelivered: each goes back among its owner's
// undelivered results, in the order they finished, wakes the owner
// (View.Ready, Waits), and is recorded with EventUndelivered (it was
// never recorded delivered: that waits for Commit). A result
// whose owner has finished meanwhile stays undelivered and becomes
// evictable, as any result nothing can deliver.
func (r *Receipt) Return() []string {
	var ids []string
	for _, t := range r.settle() {
		tb := t.handle.tb
		tb.mu.Lock()
		if t.heldBy == r {
			tb.undeliverLocked(t, time.Now())
			ids = append(ids, t.id)
		}
		tb.mu.Unlock()
	}
	return ids
}

// undeliverLocked takes back the held delivery of t.
func (tb *Table) undeliverLocked(t *task, now time.Time) {
	tb.unholdLocked(t)
	t.delivered = false
	o := t.owner
	if o.dead {
		tb.retireLocked(t, now)
	} else {
		o.pending.pushInOrder(t)
		o.wakeLocked()
		o.changedLocked()
	}
	tb.eventLocked(t, EventUndelivered, "", now)
}

// unholdLocked ends the hold of t's receipt on it.
func (tb *Table) unholdLocked(t *task) {
	t.heldBy = nil
	tb.unreceiptLocked()
}

// unreceiptLocked counts a hold of a receipt's, or a Wait under one,
// ended.
func (tb *Table) unreceiptLocked() {
	tb.receipted--
	if tb.receipted == 0 && tb.unreceipted != nil {
		close(tb.unreceipted)
		tb.unreceipted = nil
	}
}

// WaitReceipts waits until no result is held by a Receipt (each was
// committed or returned) and no Wait under one is under way (it would
// hold what it delivers), or ctx ends, and reports whether none is. A
// session that ends waits on it, a little, before its recording ends:
// an answer being written as the session closes (a task_wait the close
// itself ended) is settled by its transport after the write, over a relay
// after the relay said it passed the answer on, and a commit after the
// recording's end would not be recorded.
func (tb *Table) WaitReceipts(ctx context.Context) bool {
	tb.mu.Lock()
	if tb.receipted == 0 {
		tb.mu.Unlock()
		return true
	}
	if tb.unreceipted == nil {
		tb.unreceipted = make(chan struct{})
	}
	ch := tb.unreceipted
	tb.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
