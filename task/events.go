package task

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// EventType says what happened to a task.
type EventType uint8

const (
	EventSpawned   EventType = iota + 1 // the task entered the table (queued or about to run)
	EventStarted                        // its function started
	EventProgress                       // it reported progress (Iteration, Text = activity)
	EventOutput                         // it reported new output (Text says how much, if known)
	EventFinished                       // it finished (State; Text = error, if any)
	EventDelivered                      // its result reached its owner
	EventEvicted                        // retention removed it from the table
	EventNotice                         // it posted a notice to its owner (Text = kind: text, cut)
	// EventIdle: the table's last queued or running task finished, so no
	// background work is left (ID and Owner empty). It comes once each
	// time the table goes from some unfinished task to none: hooks and
	// UIs wait for it instead of polling the list. The Recorder is not
	// given it: it concerns no task.
	EventIdle
	// EventUndelivered: a delivery was taken back (Receipt.Return): the
	// answer that carried the result never reached the owner, so the
	// result waits to be delivered again.
	EventUndelivered
)

var eventNames = [...]string{"", "spawned", "started", "progress", "output", "finished", "delivered", "evicted", "notice", "background_idle", "undelivered"}

func (e EventType) String() string {
	if int(e) < len(eventNames) && e != 0 {
		return eventNames[e]
	}
	return "unknown"
}

// Event is one entry of the table's event log.
type Event struct {
	Seq       uint64 // 1, 2, 3, … in the order the changes happened
	Time      time.Time
	Type      EventType
	ID        string
	Kind      string // the task's Spec.Kind ("agent", "shell", …); "" for EventIdle
	Owner     string
	State     State // the task's state after the change
	Iteration int   // for EventProgress
	Text      string
	EndedBy   string // for EventFinished: who ended the task (Info.EndedBy)
}

// EventLog is the table's bounded, append-only log of events. Writers never
// wait for readers: when the log is full the oldest event is overwritten,
// and a reader that asks for it gets ErrEventsDropped instead of a silent
// gap. Its methods are safe for concurrent use.
//
// The log shares the table's mutex: the table appends while it holds it
// anyway (events must be in the order of the changes), so appending costs
// no extra locking; readers hold it only to copy events out.
type EventLog struct {
	mu   *sync.Mutex // the table's
	size uint64      // how many events the log retains
	// ring[(seq-1) % size] holds event seq. It grows as events come, up
	// to size: until then it holds every event so far, at seq-1 (a table
	// of a session that does little never pays for the whole log: 1,024
	// events were 110 KB per idle MCP session).
	ring    []Event       // guarded by mu
	last    uint64        // guarded by mu; seq of the newest event, 0 if none
	changed chan struct{} // guarded by mu; closed and replaced on append, nil until a reader waits
}

// firstEvents is the room the log starts with.
const firstEvents = 16

func newEventLog(mu *sync.Mutex, size int) *EventLog {
	return &EventLog{mu: mu, size: uint64(size)}
}

// appendLocked records e, stamping its sequence number. It never blocks.
func (l *EventLog) appendLocked(e Event) Event {
	l.last++
	e.Seq = l.last
	if n := uint64(len(l.ring)); n < l.size {
		if n == uint64(cap(l.ring)) { // grow by doubling, up to size
			ring := make([]Event, n, min(max(2*n, firstEvents), l.size))
			copy(ring, l.ring)
			l.ring = ring
		}
		l.ring = append(l.ring, e)
	} else {
		l.ring[(e.Seq-1)%l.size] = e
	}
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return e
}

// Last returns the sequence number of the newest event, 0 if there is none.
// A reader that starts from a fresh List snapshot reads After(Last()) to
// follow changes from there on.
func (l *EventLog) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// After returns the retained events with Seq > seq, oldest first; nil if
// there are none. If events after seq were already overwritten it returns
// the events it still has and an error wrapping ErrEventsDropped that says
// how many were lost. It does not block.
func (l *EventLog) After(seq uint64) ([]Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.afterLocked(seq)
}

func (l *EventLog) afterLocked(seq uint64) ([]Event, error) {
	if seq >= l.last {
		return nil, nil
	}
	var err error
	size := l.size
	if oldest := l.oldestLocked(); seq+1 < oldest {
		err = fmt.Errorf("%w: %d events after seq %d were overwritten", ErrEventsDropped, oldest-seq-1, seq)
		seq = oldest - 1
	}
	out := make([]Event, 0, l.last-seq)
	for s := seq + 1; s <= l.last; s++ {
		out = append(out, l.ring[(s-1)%size])
	}
	return out, err
}

func (l *EventLog) oldestLocked() uint64 {
	if size := l.size; l.last > size {
		return l.last - size + 1
	}
	return 1
}

// Follow calls fn with every event appended from now on, in order, until
// ctx ends. If it falls more than the log's size behind, it calls fn once
// with a nil event and an error wrapping ErrEventsDropped, and goes on
// from the oldest event still held. fn runs on the caller's goroutine and
// should return quickly: the log does not wait for it, it only drops.
func (l *EventLog) Follow(ctx context.Context, fn func(e *Event, err error)) {
	l.FollowFrom(ctx, l.Last(), fn)
}

// FollowFrom is Follow from the event after seq (Last, taken before the
// follower's goroutine starts, so that nothing appended meanwhile is
// missed).
func (l *EventLog) FollowFrom(ctx context.Context, seq uint64, fn func(e *Event, err error)) {
	for {
		evs, err := l.Wait(ctx, seq)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrEventsDropped) {
			fn(nil, err)
		}
		for i := range evs {
			fn(&evs[i], nil)
			seq = evs[i].Seq
		}
	}
}

// Wait is After that blocks until at least one event after seq exists or
// ctx ends (then it returns nil and context.Cause(ctx)). Any number of
// readers may wait at once; none of them slows the writers.
func (l *EventLog) Wait(ctx context.Context, seq uint64) ([]Event, error) {
	for {
		l.mu.Lock()
		if seq < l.last {
			defer l.mu.Unlock()
			return l.afterLocked(seq)
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}
