package task

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
