package task

import (
	"context"
	"time"
)

// State is where a task is in its life. The zero value is Queued.
//
//	queued → running → completed | failed | canceled | timed_out
//
// A queued task that is cancelled goes straight to canceled.
type State uint8

const (
	Queued    State = iota // waiting for a running slot (Options.MaxRunning)
	Running                // its function is running
	Completed              // its function returned a nil error
	Failed                 // its function returned an error or panicked
	Canceled               // someone cancelled it (Cancel, its owner ending, Close)
	TimedOut               // it ran past Spec.Timeout
)

var stateNames = [...]string{"queued", "running", "completed", "failed", "canceled", "timed_out"}

// String returns the state's stable lowercase name, as tools show it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// Finished reports whether s is terminal.
func (s State) Finished() bool { return s >= Completed }

// Func is the body of a task. It runs on its own goroutine with a context
// that is cancelled when the task is cancelled, its owner ends, its timeout
// passes or the table closes, and a Handle for reporting progress.
//
// The returned text is the result the owner's conversation will see. A
// non-nil error makes the task failed, unless the task was cancelled or
// timed out, which take precedence whatever the function returns.
type Func func(ctx context.Context, h *Handle) (string, error)

// Spec describes a task to spawn.
type Spec struct {
	// Kind names the family of the task and prefixes its id ("agent",
	// "shell", or any name a library user picks). Required; it must not
	// contain ':' or white space.
	Kind string
	// Label is a short human description (a command, a profile name).
	Label string
	// Timeout, when positive, ends the task timed_out after it has been
	// running that long. Time spent queued does not count.
	Timeout time.Duration
}

// Info is a snapshot of a task: what List, Peek and Wait report for a task
// without consuming its result.
type Info struct {
	ID    string
	Kind  string
	Label string
	Owner string // "" for the top level, else the owning task's id
	State State

	Created  time.Time
	Started  time.Time // zero while queued
	Finished time.Time // zero until finished

	// Progress, as last reported through the Handle.
	Iteration    int
	Activity     string
	LastActivity time.Time // when progress was last reported; Started before that

	// ExitCode is the process exit code a task reported with
	// Handle.SetExitCode, nil if it reported none. Each snapshot has its
	// own copy.
	ExitCode *int

	// Delivered reports whether the result has reached the owner (through
	// Drain or Wait).
	Delivered bool

	// EndedBy, once the task has finished, says who or what ended it: one
	// of the By constants (BySelf, ByModel, ByUser, …). EndReason says why
	// in words: "task_cancel", "its owner agent:3 ended (model:
	// task_cancel)", "the MCP client went away". Both are empty while
	// the task runs. See EndOf.
	EndedBy   string
	EndReason string
	// Usage is what the task spent calling a model, with the tasks it
	// started (Handle.AddUsage); zero for a shell.
	Usage Usage
}

// Result is the outcome of a finished task, delivered to its owner exactly
// once.
type Result struct {
	Info
	// Text is what the task function returned, cut to Options.MaxResultBytes.
	Text string
	// Err is nil for completed tasks. For failed ones it is the function's
	// error (or a *PanicError); for canceled and timed_out ones it is the
	// cancellation cause (ErrCanceled, ErrOwnerDone, ErrClosed, ErrTimedOut
	// or the cause of the table's parent context).
	Err error
	// Trace holds the lines the task added with Handle.Trace, oldest first.
	Trace []string
}

// Options configure a Table. The zero value gives the documented defaults.
type Options struct {
	// MaxRunning bounds how many task functions run at once; more tasks
	// wait queued and start in FIFO order. Default 8.
	MaxRunning int
	// MaxTasks bounds the tasks the table may not evict: queued, running,
	// and finished but undelivered. Spawn fails with ErrFull beyond it.
	// Default 4096.
	MaxTasks int
	// MaxRetained bounds finished, delivered tasks kept for inspection;
	// the oldest are evicted first. Default 64.
	MaxRetained int
	// RetainFor bounds how long a finished, delivered task is kept for
	// inspection after delivery. Default 1h.
	RetainFor time.Duration
	// MaxResultBytes cuts a task's result text (keeping its start and
	// saying how much was cut). Default 256 KiB.
	MaxResultBytes int
	// MaxTrace bounds the trace lines kept per task (the newest are kept);
	// each line is cut to 512 bytes. Default 32.
	MaxTrace int
	// PeekBlocks is the number of history blocks Peek returns when asked
	// for n <= 0. Default 10.
	PeekBlocks int
	// PeekTextLimit cuts the free text of each peeked history block, in
	// characters. Default 0: kinds and tool names only, plus a note of how
	// long the text was.
	PeekTextLimit int
	// EventLogSize is how many events the log retains. Default 1024.
	EventLogSize int
	// MaxNotices bounds the notices (Handle.Notify) waiting for one owner
	// to read them; more are refused and counted, and the next read says
	// how many. Default 32.
	MaxNotices int
	// MaxNoticeBytes cuts a notice's text. Default 8 KiB.
	MaxNoticeBytes int
	// Recorder, if set, receives every event with the task's details, for
	// a durable record (see Recorder).
	Recorder Recorder
	// FirstID makes the ids of the table's tasks start after it: a table
	// that continues a recorded session (resumed after a restart) gives
	// no id the session has used. Default 0: shell:1 comes first.
	FirstID uint64
}

const (
	defaultMaxRunning     = 8
	defaultMaxTasks       = 4096
	defaultMaxRetained    = 64
	defaultRetainFor      = time.Hour
	defaultMaxResultBytes = 256 << 10
	defaultMaxTrace       = 32
	maxTraceLineBytes     = 512
	defaultPeekBlocks     = 10
	defaultEventLogSize   = 1024
	defaultMaxNotices     = 32
	defaultMaxNoticeBytes = 8 << 10
)

func (o Options) withDefaults() Options {
	if o.MaxRunning <= 0 {
		o.MaxRunning = defaultMaxRunning
	}
	if o.MaxTasks <= 0 {
		o.MaxTasks = defaultMaxTasks
	}
	if o.MaxRetained <= 0 {
		o.MaxRetained = defaultMaxRetained
	}
	if o.RetainFor <= 0 {
		o.RetainFor = defaultRetainFor
	}
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = defaultMaxResultBytes
	}
	if o.MaxTrace <= 0 {
		o.MaxTrace = defaultMaxTrace
	}
	if o.PeekBlocks <= 0 {
		o.PeekBlocks = defaultPeekBlocks
	}
	if o.PeekTextLimit < 0 {
		o.PeekTextLimit = 0
	}
	if o.EventLogSize <= 0 {
		o.EventLogSize = defaultEventLogSize
	}
	if o.MaxNotices <= 0 {
		o.MaxNotices = defaultMaxNotices
	}
	if o.MaxNoticeBytes <= 0 {
		o.MaxNoticeBytes = defaultMaxNoticeBytes
	}
	return o
}
