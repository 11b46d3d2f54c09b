package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
)

// Host is one offstage process that records into a journal. PID and
// Start (the process's start time in clock ticks since boot, from
// /proc/PID/stat) identify it on its machine: a pid alone can be reused.
type Host struct {
	ID       string
	Hostname string
	PID      int
	Start    int64
	Started  time.Time
	Version  string
	// Lease is when the host's lease ends, in a journal several machines
	// share (a Leaser); zero elsewhere.
	Lease time.Time
}

// Session is one conversation: a CLI run, an MCP or ACP session.
type Session struct {
	ID      string
	HostID  string
	Surface string // run, mcp, acp
	Cwd     string
	Model   string
	Started time.Time
	Ended   time.Time // zero while it runs (or if its host died)
	// Filled by queries:
	Tasks    int    // tasks it started
	Hostname string // of its host
	// Lost is how many of its records the journal could not write, as
	// its end recorded (see Journal): what the journal shows of it is
	// incomplete.
	Lost int
	// Usage is what it spent calling models in all (every agent's
	// calls), Autonomous what its top level spent in autonomous turns.
	Usage, Autonomous task.Usage
}

// Task is what the journal knows of one task.
type Task struct {
	Session  string
	ID       string // shell:3, unique within its session
	Kind     string
	Label    string
	Owner    string
	State    State
	Created  time.Time
	Started  time.Time
	Finished time.Time
	ExitCode *int
	Result   string // as delivered to the model
	Error    string
	// Delivered says the result reached the model's conversation.
	Delivered bool
	// LogPath is the shell's output log, if it has one.
	LogPath string
	// PID and PIDStart identify a shell's process group leader while it
	// runs (see Host).
	PID      int
	PIDStart int64
	Hostname string // of the session's host
	// CPU and MemoryPeak are what a shell used, at its end (see
	// proc.Exit): its CPU time and its highest memory in bytes; 0 where
	// it was not measured.
	CPU        time.Duration
	MemoryPeak int64
	// Sandbox is a shell's sandbox as sandbox.Status says it (mode,
	// where it could write, its network, what was not enforced); "" for
	// a shell without one.
	Sandbox string
	// Ports are the TCP ports leased for a shell (bash with port), held
	// while it ran: the first was its $PORT. None for a task that leased
	// none, or was recorded before the journal kept them.
	Ports []int
	// EndedBy says who or what ended the task (task.Info.EndedBy: self,
	// model, user, operator, parent, timeout, limit, session, supervisor;
	// host for one orphaned), and EndReason why, in words. Empty while it
	// runs, and for a task recorded before the journal kept them.
	EndedBy   string
	EndReason string
	// Usage is what an agent task spent calling models, with the tasks
	// it started, as of its last recorded progress or its end.
	Usage task.Usage
}

// Message is one message of a session's conversation, as the runtime
// serialises it.
type Message struct {
	Session string
	Seq     int
	Body    []byte
}

// A Record is one change the journal writes: *Host, *Session (started),
// SessionEnd, *Message, *TaskChange, TaskProcess, TaskSandbox, TaskPorts,
// TaskUsage, SessionTokens, Delivered.
type Record interface{ record() }

// SessionTokens records what a session spent so far (agent.Usage).
type SessionTokens struct {
	Session           string
	Total, Autonomous task.Usage
}

// SessionEnd records that a session ended, and how many of its records
// the journal lost.
type SessionEnd struct {
	Session string
	At      time.Time
	Lost    int
}

// TaskChange is a change of a task in a session's table.
type TaskChange struct {
	Session string
	task.Change
}

// TaskProcess records the process and log of a shell task.
type TaskProcess struct {
	Session  string
	ID       string
	PID      int
	PIDStart int64
	LogPath  string
}

// TaskSandbox records a shell task's sandbox.
type TaskSandbox struct {
	Session string
	ID      string
	Sandbox string
}

// TaskPorts records the TCP ports leased for a shell task.
type TaskPorts struct {
	Session string
	ID      string
	Ports   []int
}

// TaskUsage records what a shell task used, at its end.
type TaskUsage struct {
	Session    string
	ID         string
	CPU        time.Duration
	MemoryPeak int64
}

// HostPeer records where a live host is reached: the address it serves
// its tasks' output to peers on (http://HOST:PORT; "" for none), the
// secret peers show it (see package fleet), and the doorbell socket a
// SQLite host hears of cancel requests through ("" for none).
type HostPeer struct {
	ID     string
	Addr   string
	Secret string
	Bell   string
}

// Delivered records that results of a session reached its conversation
// outside the table (resumed after a restart): each is marked delivered,
// with a "delivered" event at At in its history.
type Delivered struct {
	Session string
	IDs     []string
	At      time.Time
}

func (*Host) record()         {}
func (*Session) record()      {}
func (SessionEnd) record()    {}
func (*Message) record()      {}
func (*TaskChange) record()   {}
func (TaskProcess) record()   {}
func (TaskSandbox) record()   {}
func (TaskPorts) record()     {}
func (TaskUsage) record()     {}
func (SessionTokens) record() {}
func (HostPeer) record()      {}
func (Delivered) record()     {}

// TaskFilter selects tasks in Store.Tasks. Zero fields select everything.
type TaskFilter struct {
	Session  string
	State    State
	Since    time.Time
	Hostname string // the tasks of one machine's hosts
	Limit    int
}

// Store is a journal's backend: the embedded SQLite (OpenSQLite) or a
// shared database. Write applies a batch in one transaction, in order;
// the rest read. A Store is used by one Journal's writer goroutine for
// writes and by any goroutine for reads.
type Store interface {
	Write(ctx context.Context, batch []Record) error
	// Hosts returns the hosts that have sessions with unfinished tasks or
	// no end, other than except.
	Hosts(ctx context.Context, except string) ([]Host, error)
	// Orphan marks the unfinished tasks of host's sessions orphaned at
	// time at, ends its open sessions, and returns those tasks.
	Orphan(ctx context.Context, hostID string, at time.Time) ([]Task, error)
	Sessions(ctx context.Context, limit int) ([]Session, error)
	Session(ctx context.Context, id string) (Session, error)
	Tasks(ctx context.Context, f TaskFilter) ([]Task, error)
	Task(ctx context.Context, session, id string) (Task, error)
	History(ctx context.Context, session string) ([]Message, error)
	Close() error
}

// Leaser is a Store several machines share (a fleet). Each host renews a
// lease; a host whose lease ran out is gone, wherever it ran, and one of
// the others orphans its unfinished tasks.
type Leaser interface {
	Store
	// Renew extends host's lease to until. It reports false if the host
	// was declared gone meanwhile (its lease ran out and its tasks were
	// orphaned).
	Renew(ctx context.Context, hostID string, until time.Time) (bool, error)
	// OrphanExpired finds the hosts whose lease ended before now and
	// that nobody has handled, and orphans their unfinished tasks and ends
	// their sessions, as Orphan does, in one transaction: of all the
	// hosts racing to do it, each expired host is handled by exactly one.
	OrphanExpired(ctx context.Context, now time.Time) ([]Host, []Task, error)
}

// ErrNotFound is returned for a session or task the journal does not
// hold.
var ErrNotFound = errors.New("journal: not found")

// Options shape a Journal's writer; the zero value gives the defaults.
type Options struct {
	// QueueRecords bounds the records waiting to be written. Recording a
	// task's spawn waits (see Backpressure) once the queue is half full;
	// past the bound other records are dropped and counted, and Report
	// says so once. Default 8192.
	QueueRecords int
	// Backpressure bounds how long recording a task's spawn waits for
	// room in the queue while the writer is healthy: a burst of spawns
	// then goes at the store's pace instead of losing records. If the
	// writer frees no room in that time, or is failing, records are
	// dropped and counted instead. Default 1s (one SQLite batch on a
	// loaded 2-core machine was seen to take over 500ms); negative:
	// never wait.
	Backpressure time.Duration
	// BatchRecords bounds one transaction. Default 512.
	BatchRecords int
	// Interval is how long the writer gathers records after a write
	// before the next, unless a batch is full or Flush or Close asks: a
	// crash loses at most about this much. Default 20ms.
	Interval time.Duration
	// Report receives the journal's own trouble (the disk is full, the
	// database is locked, records were dropped, and recovery), once per
	// episode. It may be called while the task table's lock is held (a
	// drop is reported as it happens): it must not block for long or call
	// the table. Default: dropped.
	Report func(msg string)
}

const (
	defaultQueueRecords = 8192
	defaultBatchRecords = 512
	defaultInterval     = 20 * time.Millisecond
	defaultBackpressure = time.Second
	retryFirst          = 100 * time.Millisecond
	retryMax            = 5 * time.Second
)

// Journal records sessions and tasks into a Store: records go into a
// bounded queue and one goroutine writes them in batches, one
// transaction each. A turn never waits for the disk; a burst of task
// spawns faster than the store writes waits briefly for room
// (Options.Backpressure), so a healthy journal keeps every record. When a
// write fails (a full disk, a database locked past its busy timeout) the
// batch is kept and retried with backoff while the session goes on; the
// queue then fills, and past its bound new records are dropped and
// counted. A damaged file, or one removed or replaced, ends the writing
// (ErrDamaged, ErrGone): what follows is lost and counted. Each episode
// is reported once, and its end too; Stats says what was lost, and a
// session's end records its own loss. What the running session holds in
// memory is never affected. Close flushes.
type Journal struct {
	store   Store
	opts    Options
	wake    chan struct{} // capacity 1: records are waiting
	done    chan struct{} // closed when the writer has finished
	abandon chan struct{} // closed when Close's context ends: stop retrying
	hurry   chan struct{} // capacity 1: Flush or Close wants the queue written now

	mu      sync.Mutex // guards the fields below
	queue   []entry    // in the order added; reused from batch to batch
	held    int        // records the writer took from the queue and has not written yet
	dropped int        // records dropped in the episode being reported
	closing bool
	flushed chan struct{} // closed and cleared when the queue empties; nil until a Flush waits
	written uint64        // records written so far
	failing error         // the error of the episode being reported, if any
	broken  error         // a permanent error (ErrDamaged, ErrGone): nothing more is written
	room    chan struct{} // closed and cleared when the writer frees room or stops being healthy; nil until a spawn waits
	stalled bool          // a spawn waited Backpressure in vain: drop until the writer writes again
	lost    uint64        // records not written, in all
	errs    uint64        // failed writes of a batch, in all (each retry counts)
	lostBy  map[string]int
	why     error // why records were last lost
}

// Stats is what a journal wrote and lost.
type Stats struct {
	Written uint64
	// Lost counts the records not written: dropped from a full queue
	// (the store failing or too slow), given up at Close, or after the
	// file was found damaged or gone.
	Lost uint64
	// Err says why records were last lost (nil if none were).
	Err error
	// Queued is how many records wait to be written now (held by the
	// writer or in its queue), and WriteErrors how many writes of a batch
	// failed so far, each retry counted: what a metrics system watches.
	Queued      int
	WriteErrors uint64
}

// New starts a journal writing into store.
func New(store Store, opts Options) *Journal {
	if opts.QueueRecords <= 0 {
		opts.QueueRecords = defaultQueueRecords
	}
	if opts.BatchRecords <= 0 {
		opts.BatchRecords = defaultBatchRecords
	}
	if opts.Report == nil {
		opts.Report = func(string) {}
	}
	if opts.Interval <= 0 {
		opts.Interval = defaultInterval
	}
	if opts.Backpressure == 0 {
		opts.Backpressure = defaultBackpressure
	}
	j := &Journal{store: store, opts: opts, wake: make(chan struct{}, 1), done: make(chan struct{}), abandon: make(chan struct{}), hurry: make(chan struct{}, 1)}
	go j.run()
	return j
}

// entry is one queued record. A task change is kept by value, so the
// queue of a busy table allocates nothing per change.
type entry struct {
	rec    Record // nil for a task change
	change TaskChange
}

// Add queues a record for writing and returns at once. It reports false
// if the record was dropped (the queue is full, or the journal closed or
// broken); a drop is counted (Stats).
func (j *Journal) Add(r Record) bool {
	return j.add(entry{rec: r})
}

// addChange queues a copy of a task change. It never waits: the table
// calls it under its lock, and paces spawns before that (SessionLog.Pace).
func (j *Journal) addChange(session string, c *task.Change) bool {
	return j.add(entry{change: TaskChange{Session: session, Change: *c}})
}

// pace waits, while the queue is at half its bound and the writer is
// healthy, for room, at most Options.Backpressure.
func (j *Journal) pace() {
	j.mu.Lock()
	if j.opts.Backpressure > 0 && len(j.queue)+j.held >= j.opts.QueueRecords/2 {
		j.waitRoomLocked()
	}
	j.mu.Unlock()
}

// session names the session a record belongs to ("" for a host).
func (e *entry) session() string {
	switch r := e.rec.(type) {
	case nil:
		return e.change.Session
	case *Session:
		return r.ID
	case SessionEnd:
		return r.Session
	case *Message:
		return r.Session
	case TaskProcess:
		return r.Session
	case TaskSandbox:
		return r.Session
	case TaskPorts:
		return r.Session
	case TaskUsage:
		return r.Session
	case Delivered:
		return r.Session
	}
	return ""
}

// add queues e, or drops and counts it when the journal is closing,
// broken, or its queue is full. It never waits (see pace).
func (j *Journal) add(e entry) bool {
	j.mu.Lock()
	if j.closing || j.broken != nil || len(j.queue)+j.held >= j.opts.QueueRecords {
		first := j.dropLocked(e.session(), 1, nil)
		closing, full := j.closing, !j.closing && j.broken == nil
		j.mu.Unlock()
		if first && closing {
			j.opts.Report("the journal is closing, so a record that came after it began to close was not kept (what comes later is missing from the record)")
		} else if first && full {
			j.opts.Report(fmt.Sprintf("the journal is %d records behind, so it is dropping new records (the session goes on; what is dropped is missing from the record)", j.opts.QueueRecords))
		}
		return false
	}
	j.queue = append(j.queue, e)
	first := len(j.queue) == 1 // the writer takes the whole queue when woken: wake it once
	j.mu.Unlock()
	if first {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// waitRoomLocked waits, with j.mu held on entry and on return, while
// the queue is at half its bound and the writer is healthy, for at most
// Options.Backpressure; in vain, it marks the journal stalled and says
// so: until the writer writes again, spawns do not wait, and records that
// do not fit the queue are dropped.
func (j *Journal) waitRoomLocked() {
	var timer *time.Timer
	for !j.closing && j.broken == nil && j.failing == nil && !j.stalled && len(j.queue)+j.held >= j.opts.QueueRecords/2 {
		if j.room == nil {
			j.room = make(chan struct{})
		}
		room := j.room
		j.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(j.opts.Backpressure)
			defer timer.Stop()
			select { // the writer may be gathering: write now
			case j.hurry <- struct{}{}:
			default:
			}
		}
		select {
		case <-room:
			j.mu.Lock()
		case <-timer.C:
			j.mu.Lock()
			if !j.stalled && j.broken == nil && j.failing == nil {
				j.stalled = true
				j.mu.Unlock()
				j.opts.Report(fmt.Sprintf("the journal's store has not taken a batch for %s; until it does, tasks do not wait for it and records that do not fit the queue are dropped (the session goes on)", j.opts.Backpressure))
				j.mu.Lock()
			}
			return
		}
	}
}

// dropLocked counts n records of session lost, because of why (nil: the
// queue was full), and reports whether they are the first of the
// episode.
func (j *Journal) dropLocked(session string, n int, why error) bool {
	if n <= 0 {
		return false
	}
	j.dropped += n
	j.lost += uint64(n)
	if j.lostBy == nil {
		j.lostBy = map[string]int{}
	}
	if session != "" {
		j.lostBy[session] += n
	}
	switch {
	case why != nil:
		j.why = why
	case j.broken != nil:
		j.why = j.broken
	case j.closing:
		j.why = errors.New("the journal was closing")
	case j.failing != nil:
		j.why = j.failing
	case j.stalled:
		j.why = fmt.Errorf("the store took no batch for %s and the queue of %d records filled", j.opts.Backpressure, j.opts.QueueRecords)
	default:
		j.why = fmt.Errorf("the queue of %d records was full", j.opts.QueueRecords)
	}
	return j.dropped == n
}

// dropEntriesLocked counts entries lost because of why.
func (j *Journal) dropEntriesLocked(es []entry, why error) int {
	n := 0
	for i := range es {
		if _, marker := es[i].rec.(*flushMarker); !marker {
			j.dropLocked(es[i].session(), 1, why)
			n++
		}
	}
	return n
}

// freeRoomLocked wakes the spawns waiting for room.
func (j *Journal) freeRoomLocked() {
	if j.room != nil {
		close(j.room)
		j.room = nil
	}
}

// Stats says what the journal wrote and lost so far.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Stats{Written: j.written, Lost: j.lost, Err: j.why, Queued: len(j.queue) + j.held, WriteErrors: j.errs}
}

// Trouble returns what keeps the journal from writing now: the error
// that broke it for good (its file damaged or gone: nothing is written
// from then on), or that of the writes failing and retried; nil while it
// writes.
func (j *Journal) Trouble() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken != nil {
		return j.broken
	}
	return j.failing
}

// LostOf returns how many records of session the journal lost so far.
func (j *Journal) LostOf(session string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lostBy[session]
}

// Flush waits until every record queued before the call is written (or
// given up on), or ctx ends.
func (j *Journal) Flush(ctx context.Context) error {
	for {
		j.mu.Lock()
		if len(j.queue) == 0 && j.flushed == nil {
			j.mu.Unlock()
			// The writer may hold a batch taken from the queue: wait for
			// it through a marker round.
			return j.waitIdle(ctx)
		}
		if j.flushed == nil {
			j.flushed = make(chan struct{})
		}
		ch := j.flushed
		j.mu.Unlock()
		select {
		case <-ch:
		case <-j.done:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// waitIdle waits until the writer holds no batch.
func (j *Journal) waitIdle(ctx context.Context) error {
	marker := &flushMarker{done: make(chan struct{})}
	j.mu.Lock()
	if j.closing {
		j.mu.Unlock()
		<-j.done
		return nil
	}
	j.queue = append(j.queue, entry{rec: marker})
	j.mu.Unlock()
	for _, ch := range []chan struct{}{j.wake, j.hurry} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	select {
	case <-marker.done:
		return nil
	case <-j.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

type flushMarker struct{ done chan struct{} }

func (*flushMarker) record() {}

// Close writes what is queued (trying until ctx ends), stops the writer
// and closes the store. It is idempotent.
func (j *Journal) Close(ctx context.Context) error {
	j.mu.Lock()
	already := j.closing
	j.closing = true
	j.freeRoomLocked()
	j.mu.Unlock()
	if !already {
		stop := context.AfterFunc(ctx, func() { close(j.abandon) })
		defer stop()
		for _, ch := range []chan struct{}{j.wake, j.hurry} {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	<-j.done
	if already {
		return nil
	}
	return j.store.Close()
}

// run is the writer goroutine: it takes batches from the queue and
// writes each in one transaction, retrying with backoff while the store
// fails, until Close has it stop (an empty queue) or give up (abandon).
func (j *Journal) run() {
	defer close(j.done)
	backoff := retryFirst
	var batch []entry
	var records []Record
	for {
		var closing bool
		if batch, closing = j.takeBatch(batch); len(batch) == 0 {
			if closing {
				return
			}
			<-j.wake
			continue
		}
		var markers []*flushMarker
		records, markers = splitBatch(batch, records[:0])
		if len(records) == 0 { // markers only: nothing to write
			j.wrote(0)
			closeMarkers(markers)
			batch = batch[:0]
			continue
		}
		err := j.writeBatch(records)
		switch {
		case err == nil:
			backoff = retryFirst
			j.wrote(len(records))
			closeMarkers(markers)
			batch = batch[:0]
			j.gather()
		case permanent(err):
			j.countError()
			j.broke(err, batch, markers)
			batch = batch[:0]
		default:
			j.countError()
			var retry bool
			if backoff, retry = j.waitRetry(err, backoff); !retry {
				j.giveUp(batch, len(records), markers)
				batch = batch[:0]
			}
		}
	}
}

// countError counts a failed write of a batch.
func (j *Journal) countError() {
	j.mu.Lock()
	j.errs++
	j.mu.Unlock()
}

// takeBatch returns the batch to write: batch itself while it holds
// records still to retry, else up to BatchRecords entries taken from the
// queue. An empty batch means the queue is empty: a waiting Flush is
// released, and closing says whether the writer is to stop.
func (j *Journal) takeBatch(batch []entry) (_ []entry, closing bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(batch) == 0 {
		n := min(len(j.queue), j.opts.BatchRecords)
		batch = append(batch[:0], j.queue[:n]...)
		rest := copy(j.queue, j.queue[n:])
		clear(j.queue[rest:])
		j.queue = j.queue[:rest]
		j.held = n
	}
	if len(batch) == 0 && j.flushed != nil {
		close(j.flushed)
		j.flushed = nil
	}
	return batch, j.closing
}

// splitBatch appends the records of batch to records, and returns them
// with the batch's flush markers, which are not written.
func splitBatch(batch []entry, records []Record) ([]Record, []*flushMarker) {
	var markers []*flushMarker
	for i := range batch {
		switch r := batch[i].rec.(type) {
		case nil:
			records = append(records, &batch[i].change)
		case *flushMarker:
			markers = append(markers, r)
		default:
			records = append(records, r)
		}
	}
	return records, markers
}

// writeBatch writes records in one transaction, giving the store 30
// seconds.
func (j *Journal) writeBatch(records []Record) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return j.store.Write(ctx, records)
}

// wrote accounts for a batch of n records written (0: a batch of flush
// markers only), and reports the end of a failing episode.
func (j *Journal) wrote(n int) {
	j.mu.Lock()
	if n == 0 {
		j.held = 0
		j.mu.Unlock()
		return
	}
	j.written += uint64(n)
	j.held = 0
	recovered, dropped := j.failing, j.dropped
	j.failing, j.dropped, j.stalled = nil, 0, false
	j.freeRoomLocked()
	j.mu.Unlock()
	if recovered != nil || dropped > 0 {
		j.opts.Report(fmt.Sprintf("the journal writes again; %d records were dropped meanwhile", dropped))
	}
}

// gather waits a while after a write, unless the queue already holds a
// batch or the journal is closing: fewer, larger transactions, and a
// writer that leaves the CPU to the session between them. Flush and Close
// cut the wait short.
func (j *Journal) gather() {
	j.mu.Lock()
	gather := !j.closing && len(j.queue) < j.opts.BatchRecords
	j.mu.Unlock()
	if !gather {
		return
	}
	timer := time.NewTimer(j.opts.Interval)
	select {
	case <-timer.C:
	case <-j.hurry:
		timer.Stop()
	}
}

// broke handles a permanent write error (damage, a vanished file):
// retrying cannot help, and writing on could harm. What is held and
// queued is lost, and so is everything added from now on (add refuses
// it); every flush waiting is released.
func (j *Journal) broke(err error, batch []entry, markers []*flushMarker) {
	j.mu.Lock()
	j.broken = err
	lost := j.dropEntriesLocked(batch, err)
	lost += j.dropEntriesLocked(j.queue, err)
	for _, e := range j.queue {
		if m, ok := e.rec.(*flushMarker); ok {
			markers = append(markers, m)
		}
	}
	clear(j.queue)
	j.queue, j.held = j.queue[:0], 0
	j.freeRoomLocked()
	j.mu.Unlock()
	j.opts.Report(fmt.Sprintf("%v (%s not written)", err, text.Plural(lost, "record")))
	closeMarkers(markers)
}

// waitRetry handles a write error that may pass: it reports the start of
// a failing episode, then waits backoff. It returns the next backoff and
// true, or false if Close ran out of time meanwhile (abandon).
func (j *Journal) waitRetry(err error, backoff time.Duration) (time.Duration, bool) {
	j.mu.Lock()
	report := j.failing == nil
	j.failing = err
	j.freeRoomLocked()
	j.mu.Unlock()
	if report {
		j.opts.Report(fmt.Sprintf("the journal cannot write (%v); the session goes on and the journal retries", err))
	}
	timer := time.NewTimer(backoff)
	select {
	case <-timer.C:
		return min(2*backoff, retryMax), true
	case <-j.abandon:
		timer.Stop()
		return backoff, false
	}
}

// giveUp drops what is left when Close ran out of time while writes
// failed: the batch (of n records) and the queue are not written.
func (j *Journal) giveUp(batch []entry, n int, markers []*flushMarker) {
	why := errors.New("the journal closed before it could write them")
	j.mu.Lock()
	lost := n + len(j.queue)
	j.dropEntriesLocked(batch, why)
	j.dropEntriesLocked(j.queue, why)
	clear(j.queue)
	j.queue, j.held = j.queue[:0], 0
	j.mu.Unlock()
	j.opts.Report(fmt.Sprintf("the journal closed with %d records it could not write", lost))
	closeMarkers(markers)
}

func closeMarkers(markers []*flushMarker) {
	for _, m := range markers {
		close(m.done)
	}
}

// SessionLog records one session: its tasks (as a task.Recorder), its
// conversation and its end.
type SessionLog struct {
	j  *Journal
	id string

	mu  sync.Mutex
	seq int // messages recorded
	// calls is the model calls recorded of each running agent task, so
	// that progress is recorded only when its usage grew; an entry goes
	// when its task finishes.
	calls map[string]int64
}

// StartSession records a session's start and returns its log. Messages
// continue after seq: 0 for a new session; for a resumed one, the number
// of messages it has (DB.LastSeq, or agent.Resume.Seq as Recorder.Load
// reads it). A Recorder calls this for you.
func (j *Journal) StartSession(s Session, seq int) *SessionLog {
	j.Add(&s)
	return &SessionLog{j: j, id: s.ID, seq: seq}
}

// continueSession returns the log of a session whose record the caller
// has written itself (a Recorder, taking a resumed session over):
// nothing is queued for its start.
func (j *Journal) continueSession(id string, seq int) *SessionLog {
	return &SessionLog{j: j, id: id, seq: seq}
}

// ID returns the session's id.
func (l *SessionLog) ID() string { return l.id }

// Pace is called by the task table before each spawn, outside its lock
// (task.Pacer): while the queue is half full and the writer healthy, it
// waits for room, at most Options.Backpressure (see the package doc), so a
// burst of spawns slows to the store's pace instead of losing records.
func (l *SessionLog) Pace() { l.j.pace() }

// Record queues a change of the session's task table and returns at once.
func (l *SessionLog) Record(c *task.Change) {
	switch c.Type {
	case task.EventSpawned, task.EventStarted, task.EventDelivered, task.EventUndelivered:
		l.j.addChange(l.id, c)
	case task.EventFinished:
		if !c.Usage.IsZero() {
			l.mu.Lock()
			delete(l.calls, c.ID)
			l.mu.Unlock()
		}
		l.j.addChange(l.id, c)
	case task.EventProgress:
		if l.usageGrew(c) {
			l.j.addChange(l.id, c)
		}
	}
}

// usageGrew reports whether c carries more model calls than the last
// recorded change of its task, and notes them.
func (l *SessionLog) usageGrew(c *task.Change) bool {
	if c.Usage.ModelCalls == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls[c.ID] >= c.Usage.ModelCalls {
		return false
	}
	if l.calls == nil {
		l.calls = make(map[string]int64)
	}
	l.calls[c.ID] = c.Usage.ModelCalls
	return true
}

// Tokens records what the session spent so far (agent.Config.OnUsage).
func (l *SessionLog) Tokens(total, autonomous task.Usage) {
	l.j.Add(SessionTokens{Session: l.id, Total: total, Autonomous: autonomous})
}

// Message records the next message of the conversation.
func (l *SessionLog) Message(body []byte) {
	l.mu.Lock()
	l.seq++
	seq := l.seq
	l.mu.Unlock()
	l.j.Add(&Message{Session: l.id, Seq: seq, Body: body})
}

// Process records a shell task's process and log.
func (l *SessionLog) Process(id string, pid int, pidStart int64, logPath string) {
	l.j.Add(TaskProcess{Session: l.id, ID: id, PID: pid, PIDStart: pidStart, LogPath: logPath})
}

// Sandbox records a shell task's sandbox (sandbox.Status.String),
// cut to 1000 bytes.
func (l *SessionLog) Sandbox(id, sandbox string) {
	if len(sandbox) > 1000 {
		sandbox = sandbox[:1000]
	}
	l.j.Add(TaskSandbox{Session: l.id, ID: id, Sandbox: sandbox})
}

// Ports records the TCP ports leased for a shell task (at most 64 are
// kept).
func (l *SessionLog) Ports(id string, ports []int) {
	if len(ports) == 0 {
		return
	}
	l.j.Add(TaskPorts{Session: l.id, ID: id, Ports: slices.Clone(ports[:min(len(ports), maxPorts)])})
}

// Usage records what a shell task used, at its end.
func (l *SessionLog) Usage(id string, cpu time.Duration, memoryPeak int64) {
	l.j.Add(TaskUsage{Session: l.id, ID: id, CPU: cpu, MemoryPeak: memoryPeak})
}

// Delivered records results delivered outside the table.
func (l *SessionLog) Delivered(ids ...string) {
	l.j.Add(Delivered{Session: l.id, IDs: ids, At: time.Now()})
}

// End records the session's end, with how many of its records the
// journal lost so far.
func (l *SessionLog) End() {
	l.j.mu.Lock()
	lost := l.j.lostBy[l.id]
	l.j.mu.Unlock()
	l.j.Add(SessionEnd{Session: l.id, At: time.Now(), Lost: lost})
}
