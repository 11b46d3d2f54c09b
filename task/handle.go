package task

import (
	"strconv"
	"time"
)

// maxActivityBytes cuts activity lines: they are one-line summaries.
const maxActivityBytes = 256

// Handle is a running task's link back to the table: it reports progress,
// attaches what Peek shows, and starts tasks owned by this one. Its methods
// are safe for concurrent use. After the task finished they do nothing.
type Handle struct {
	tb *Table
	t  *task
}

// ID returns the task's id.
func (h *Handle) ID() string { return h.t.id }

// View returns the view of the table owned by this task: tasks spawned
// through it are this task's children, cancelled when it ends.
func (h *Handle) View() *View { return h.tb.View(h.t.id) }

// Progress reports the task's iteration number (an agent's turn, say) and
// a short activity line ("running tool bash"). It emits EventProgress.
func (h *Handle) Progress(iteration int, activity string) {
	h.update(func(t *task) {
		t.iteration = iteration
		t.activity = cutBytes(activity, maxActivityBytes)
	}, EventProgress, "")
}

// Activity reports a new activity line, keeping the iteration number.
func (h *Handle) Activity(activity string) {
	h.update(func(t *task) { t.activity = cutBytes(activity, maxActivityBytes) }, EventProgress, "")
}

// OutputArrived reports that the task's output grew to total bytes. It
// counts as activity and emits EventOutput; callers that see output in
// many small pieces should rate-limit it.
func (h *Handle) OutputArrived(total int64) {
	h.update(func(*task) {}, EventOutput, strconv.FormatInt(total, 10))
}

// Trace adds a line to the task's trace, which travels with its result.
// The trace keeps the newest Options.MaxTrace lines, each cut to 512
// bytes; the result's trace then starts with a line saying how many older
// lines were dropped.
func (h *Handle) Trace(line string) {
	max := h.tb.opts.MaxTrace
	h.tb.mu.Lock()
	defer h.tb.mu.Unlock()
	t := h.t
	if t.state.Finished() {
		return
	}
	if len(t.trace) == max {
		copy(t.trace, t.trace[1:])
		t.trace = t.trace[:max-1]
		t.traceDropped++
	}
	t.trace = append(t.trace, cutBytes(line, maxTraceLineBytes))
}

// SetExitCode records the exit code of the process the task ran. It shows
// in Info and Result.
func (h *Handle) SetExitCode(code int) {
	h.update(func(t *task) { t.exitCode, t.hasExit = code, true }, 0, "")
}

// AttachHistory makes Peek show the last blocks of history.
func (h *Handle) AttachHistory(history History) {
	h.update(func(t *task) { t.history = history }, 0, "")
}

// AttachOutput makes Peek show the tail of out.
func (h *Handle) AttachOutput(out Output) {
	h.update(func(t *task) { t.output = out }, 0, "")
}

// update applies f to the task under the lock, marks activity and, when
// typ is not zero, emits an event.
func (h *Handle) update(f func(*task), typ EventType, text string) {
	h.tb.mu.Lock()
	defer h.tb.mu.Unlock()
	t := h.t
	if t.state.Finished() {
		return
	}
	f(t)
	if typ == 0 {
		return
	}
	now := time.Now()
	t.lastActive = now
	if typ == EventProgress {
		text = t.activity
	}
	h.tb.eventLocked(t, typ, text, now)
}
