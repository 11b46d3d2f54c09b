package task

import (
	"cmp"
	"slices"
	"time"
)

// queue is an intrusive FIFO of tasks with O(1) push, pop and removal from
// anywhere. A task is in at most one queue at a time, which lets one pair of
// links serve all three the table keeps: the run queue (queued tasks), each
// owner's pending list (finished, undelivered) and the retired list
// (finished, evictable). All of it is guarded by Table.mu.
type queue struct {
	head, tail *task
	n          int
}

func (q *queue) push(t *task) {
	if t.in != nil {
		panic("task: " + t.id + " pushed onto a second queue")
	}
	t.in, t.prev, t.next = q, q.tail, nil
	if q.tail != nil {
		q.tail.next = t
	} else {
		q.head = t
	}
	q.tail = t
	q.n++
}

// pushInOrder inserts t where finish order puts it: a result taken back
// (Receipt.Return) goes back before the ones that finished after it.
func (q *queue) pushInOrder(t *task) {
	at := q.tail
	for at != nil && at.finishN > t.finishN {
		at = at.prev
	}
	if at == q.tail {
		q.push(t)
		return
	}
	if t.in != nil {
		panic("task: " + t.id + " pushed onto a second queue")
	}
	next := q.head
	if at != nil {
		next = at.next
	}
	t.in, t.prev, t.next = q, at, next
	next.prev = t
	if at != nil {
		at.next = t
	} else {
		q.head = t
	}
	q.n++
}

func (q *queue) remove(t *task) {
	if t.in != q {
		return
	}
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		q.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		q.tail = t.prev
	}
	t.in, t.prev, t.next = nil, nil, nil
	q.n--
}

func (q *queue) pop() *task {
	t := q.head
	if t != nil {
		q.remove(t)
	}
	return t
}

// Brief is a compact snapshot of a task, what a row of a list needs. Its
// strings are the task's own, so filling a slice of Briefs allocates
// nothing but the slice (a List of 10,000 tasks copies 10,000 Infos and
// an exit code each). Info gives the rest of a task.
type Brief struct {
	ID    string
	Kind  string
	Label string
	Owner string // "" for the top level, else the owning task's id
	State State
	// Created is when the task was spawned; LastActivity when it last
	// reported progress (Started before that, zero while queued).
	Created, LastActivity time.Time
	// ExitCode is the exit code the task reported, if HasExit.
	ExitCode int
	HasExit  bool
	// Tokens is what an agent task spent so far calling models, input and
	// output, with the tasks it started (Usage.Tokens).
	Tokens int64
}

// Query says which tasks a list of Briefs holds. Its zero value selects
// every task.
type Query struct {
	// States, if not empty, selects the tasks in one of these states.
	States []State
	// Kind, if set, selects the tasks of this kind ("shell", "agent").
	Kind string
	// After, if set, selects only tasks after this id in id order: the
	// ID of the last Brief of the page before. The task it names need
	// not exist any more; an id that is not one (no ":N") selects from
	// the first.
	After string
	// Limit, if positive, is the most Briefs returned; the tasks selected
	// beyond it are counted instead.
	Limit int
}

func (q *Query) selects(t *task) bool {
	if q.Kind != "" && t.kind != q.Kind {
		return false
	}
	return len(q.States) == 0 || slices.Contains(q.States, t.state)
}

// AppendBriefs appends to dst a Brief of each task q selects, in id order,
// and returns the extended slice and how many more tasks q selects beyond
// its Limit. Pass dst[:0] of the last call to list again without
// allocating. It is meant for UIs; the model sees only its own tasks,
// through View.AppendBriefs. It holds the table's lock for the length of
// one pass over the table, without calling out.
func (tb *Table) AppendBriefs(dst []Brief, q Query) ([]Brief, int) {
	return tb.appendBriefs(dst, "", false, q)
}

func (tb *Table) appendBriefs(dst []Brief, owner string, scoped bool, q Query) (out []Brief, more int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.evictLocked(time.Now())
	from := 0
	if q.After != "" {
		after := parseID(q.After)
		from, _ = slices.BinarySearchFunc(tb.all, after+1, func(t *task, n uint64) int { return cmp.Compare(t.n, n) })
	}
	out = dst
	shown := 0
	for _, t := range tb.all[from:] {
		if t.evicted || scoped && t.owner.id != owner || !q.selects(t) {
			continue
		}
		if q.Limit > 0 && shown == q.Limit {
			more++
			continue
		}
		shown++
		out = append(out, Brief{ID: t.id, Kind: t.kind, Label: t.label, Owner: t.owner.id, State: t.state,
			Created: t.created, LastActivity: t.lastActive, ExitCode: t.exitCode, HasExit: t.hasExit, Tokens: t.usage.Tokens()})
	}
	return out, more
}
