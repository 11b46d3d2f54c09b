package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// printer shows a session's events to a person (or, with json, to a
// script). It is an agent.Sink: safe for concurrent use.
type printer struct {
	w     io.Writer
	json  bool
	table *task.Table // for labels and the status line
	// width returns the terminal's width in columns (0: unknown); the
	// status line is cut to it, so it never wraps.
	width func() int
	// live keeps the status line of running tasks on screen (a terminal):
	// it is redrawn after whatever is printed, when no turn is printing.
	live bool
	// usage, if set, gives the session's usage for the status line, and
	// pricing turns tokens into money there.
	usage   func() agent.Usage
	pricing pricing
	// errorsLater: a failed turn's error is printed by the caller as the
	// run's own (one-shot): the trace does not say it a second time.
	errorsLater bool

	mu       sync.Mutex
	column   int               // guarded by mu: 0 at the start of a line
	thinking bool              // guarded by mu: in a streamed thinking block
	status   bool              // guarded by mu: a status line is drawn and must be cleared before printing
	inTurn   bool              // guarded by mu
	beats    map[string]string // guarded by mu: a sub-agent's last heartbeat shown
	queued   map[string]bool   // guarded by mu: tasks shown as queued, not yet as started
	seen     uint64            // guarded by mu: the newest event of the table's log printed
	bg       bool              // guarded by mu: a call went to the background since "all background work is done"
	answers  []string
}

func (p *printer) Event(e agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tasksLocked() // a task event of the table's log is printed here, with those before it
	if e.Type != agent.TaskEvent || e.Task == nil || e.Task.Seq == 0 || p.table == nil {
		p.eventLocked(e)
	}
	if p.live && !p.json {
		// After the event: an event that prints nothing (most of a
		// shell's) leaves the status line as it was.
		p.drawStatusLocked()
	}
}

// tasksLocked prints the events of the table's log not printed yet, in
// the order they happened. The session's follower delivers them on a
// goroutine of its own, which may lag behind the turn (on a loaded
// machine, by seconds): reading the log before each event of the turn
// keeps "· shell:8 started" before "← bash … running", and a notice
// before the answer to it. What the follower brings later was printed
// already. A log that overwrote events gives what it still holds; the
// follower says what was lost.
func (p *printer) tasksLocked() {
	if p.table == nil {
		return
	}
	evs, _ := p.table.Events().After(p.seen)
	for i := range evs {
		p.seen = evs[i].Seq
		p.eventLocked(agent.Event{Type: agent.TaskEvent, Task: &evs[i]})
	}
}

func (p *printer) eventLocked(e agent.Event) {
	if p.json {
		p.printJSON(e)
		return
	}
	switch e.Type {
	case agent.TurnStart:
		p.inTurn = true
		if e.Autonomous {
			p.lineLocked("── autonomous turn: background work finished, so the model takes a turn on its own ──")
		}
	case agent.TurnEnd:
		p.inTurn = false
		p.endLineLocked()
		switch {
		case errors.Is(e.Err, agent.ErrTurnCanceled) || errors.Is(e.Err, context.Canceled):
			p.lineLocked("⏹ interrupted") // the user's own Ctrl-C: no failure
		case e.Err != nil && !p.errorsLater:
			p.lineLocked("✗ the turn failed: " + safeText(e.Err.Error()))
		case e.Err == nil:
			p.answers = append(p.answers, e.Text)
		}
	case agent.TextDelta:
		if p.thinking {
			p.thinking = false
			p.endLineLocked()
		}
		p.writeLocked(safeText(e.Text))
	case agent.ThinkingDelta:
		if !p.thinking {
			p.endLineLocked()
			p.writeLocked("  (thinking) ")
			p.thinking = true
		}
		p.writeLocked(safeText(e.Text))
	case agent.ToolCallEvent:
		p.thinking = false
		p.endLineLocked()
		p.lineLocked(fmt.Sprintf("  → %s %s", e.Tool, clip(string(e.Input), 160)))
	case agent.ToolResultEvent:
		mark := "←"
		if e.IsError {
			mark = "✗"
		}
		if wentToBackground(e.Text) {
			p.bg = true
		}
		lines := humanResult(e.Text)
		p.lineLocked(fmt.Sprintf("  %s %s: %s", mark, e.Tool, lines[0]))
		for _, l := range lines[1:] {
			p.lineLocked("      " + l)
		}
	case agent.Reflow:
		if len(e.NoticeIDs) > 0 {
			p.lineLocked("  ⤷ background notices joined the conversation: " + strings.Join(e.NoticeIDs, ", "))
		}
		if len(e.TaskIDs) > 0 {
			p.lineLocked("  ⤷ background results joined the conversation: " + strings.Join(e.TaskIDs, ", "))
		}
	case agent.TaskEvent:
		p.taskLocked(e)
	case agent.BudgetStop:
		p.endLineLocked()
		p.lineLocked("⊘ " + safeText(e.Text))
	}
}

func (p *printer) taskLocked(e agent.Event) {
	if e.Task == nil {
		if e.Err != nil {
			p.lineLocked("  · " + e.Err.Error())
		}
		return
	}
	ev := e.Task
	who := ev.ID
	if ev.Owner != "" {
		who += " (started by " + ev.Owner + ")"
	}
	switch ev.Type {
	case task.EventSpawned:
		if info, err := p.infoOf(ev.ID); err == nil && info.State == task.Queued {
			if p.queued == nil {
				p.queued = map[string]bool{}
			}
			p.queued[ev.ID] = true
			p.lineLocked(fmt.Sprintf("  · %s queued (as many tasks run as may): %s", who, p.label(ev.ID)))
			break
		}
		p.lineLocked(fmt.Sprintf("  · %s started: %s", who, p.label(ev.ID)))
	case task.EventStarted:
		if p.queued[ev.ID] {
			delete(p.queued, ev.ID)
			p.lineLocked(fmt.Sprintf("  · %s started", who))
		}
	case task.EventProgress:
		// A sub-agent's heartbeat, when what it is doing changed: the
		// same activity again is noise.
		// Only its tool calls: "waiting for the model" comes before each
		// step, and "finished" just before the line saying it ended.
		tool, calls := strings.CutPrefix(ev.Text, "running tool ")
		if ev.Kind == agent.TaskKind && calls && p.beats[ev.ID] != ev.Text {
			if p.beats == nil {
				p.beats = map[string]string{}
			}
			p.beats[ev.ID] = ev.Text
			p.lineLocked(fmt.Sprintf("  · %s step %d: %s", who, ev.Iteration, tool))
		}
	case task.EventNotice:
		p.lineLocked(fmt.Sprintf("  · %s notice: %s", who, clip(ev.Text, 200)))
	case task.EventIdle:
		if p.bg { // after foreground work alone, there was none to speak of
			p.bg = false
			p.lineLocked("  · all background work is done")
		}
	case task.EventFinished:
		line := fmt.Sprintf("  · %s %s", who, ev.State)
		if ev.Text != "" && ev.State != task.Completed && ev.Text != ev.State.String() {
			line += ": " + clip(ev.Text, 120)
		}
		p.lineLocked(line)
	}
}

func (p *printer) label(id string) string {
	if p.table == nil {
		return ""
	}
	info, err := p.table.Info(id)
	if err != nil {
		return ""
	}
	return clip(info.Label, 200)
}

// infoOf is the task's info, if the printer has a table.
func (p *printer) infoOf(id string) (task.Info, error) {
	if p.table == nil {
		return task.Info{}, task.ErrNotFound
	}
	return p.table.Info(id)
}

// safeText is a model's text for a terminal: its lines and tabs, without
// other control characters, so that no escape sequence it writes (a
// clipboard write, a new title, a cleared screen) reaches the terminal.
func safeText(s string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r < 0xa0) || isBidiControl(r) {
			return -1
		}
		return r
	}, s)
}

// isBidiControl says whether r reorders the text around it on screen
// (U+202A–U+202E, U+2066–U+2069), which can make a line read as another.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// safeWriter writes bytes to a terminal without the control characters
// safeText leaves out, also when a sequence is split across writes.
type safeWriter struct {
	w  io.Writer
	c2 bool // the last byte was 0xc2, the first of a C1 control's two
}

func (s *safeWriter) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, b := range p {
		if s.c2 {
			s.c2 = false
			if b >= 0x80 && b < 0xa0 {
				continue // U+0080–U+009F: C1 controls (0x9b is a CSI)
			}
			out = append(out, 0xc2)
		}
		switch {
		case b == 0xc2:
			s.c2 = true
		case b < 0x20 && b != '\n' && b != '\t', b == 0x7f:
		default:
			out = append(out, b)
		}
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// session starts --json's stream with the session's id, so a script can
// --resume=ID what it ran; it prints nothing for a person (the
// conversation says it in a line of its own) or without an id.
func (p *printer) session(id string) {
	if !p.json || id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, _ := text.JSON(map[string]string{"type": "session", "session_id": id})
	fmt.Fprintf(p.w, "%s\n", b)
}

// line prints a line of the CLI's own (a user message, a note).
func (p *printer) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tasksLocked()
	if p.json {
		b, _ := text.JSON(map[string]string{"type": "note", "text": s})
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	p.endLineLocked()
	p.lineLocked(s)
	if p.live {
		p.drawStatusLocked()
	}
}

// lineLocked and writeLocked clear the status line before they print.
func (p *printer) lineLocked(s string) {
	p.clearStatusLocked()
	p.endLineLocked()
	fmt.Fprintln(p.w, s)
	p.column = 0
}

func (p *printer) writeLocked(s string) {
	p.clearStatusLocked()
	io.WriteString(p.w, s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		p.column = len(s) - i - 1
	} else {
		p.column += len(s)
	}
}

func (p *printer) endLineLocked() {
	if p.column > 0 {
		fmt.Fprintln(p.w)
		p.column = 0
	}
}

// drawStatus draws the status line of running tasks at the bottom of a
// terminal, when no turn is printing.
func (p *printer) drawStatus() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drawStatusLocked()
}

func (p *printer) drawStatusLocked() {
	if p.json || p.inTurn || p.column > 0 || p.table == nil {
		return
	}
	var parts, withMemory []string
	now := time.Now()
	for _, i := range p.table.List() {
		if i.State.Finished() {
			continue
		}
		part := fmt.Sprintf("%s %q %s %s", i.ID, clip(i.Label, 24), i.State, now.Sub(i.Created).Round(time.Second))
		if i.Iteration > 0 {
			part += fmt.Sprintf(" iter %d", i.Iteration)
		}
		if !i.LastActivity.IsZero() {
			part += fmt.Sprintf(" (heard %s ago)", now.Sub(i.LastActivity).Round(time.Second))
		}
		if i.Usage.Tokens() > 0 {
			part += " " + agent.FormatTokens(i.Usage.Tokens()) + " tokens"
		}
		parts = append(parts, part)
		withMemory = append(withMemory, part+shellMemory(p.table, i))
	}
	if len(parts) == 0 {
		p.clearStatusLocked()
		return
	}
	cols := defaultColumns
	if p.width != nil {
		if w := p.width(); w > 0 {
			cols = w
		}
	}
	// The last column stays empty: a character there leaves some
	// terminals about to wrap, and the next redraw would land a line down.
	// Memory is shown when the whole line fits with it.
	// The session's tokens come last: a narrow terminal cuts them first.
	var spent string
	if p.usage != nil {
		if u := p.usage().Total; u.Tokens() > 0 {
			spent = " · session " + agent.FormatTokens(u.Tokens()) + " tokens"
			if c, ok := p.pricing.prices.cost(p.pricing.model, u); ok {
				spent += " (" + money(c) + ")"
			}
		}
	}
	line := "⋯ " + strings.Join(withMemory, " · ") + spent
	if columns(line) > cols-1 {
		line = "⋯ " + strings.Join(parts, " · ") + spent
	}
	// One write clears the old line and draws the new: a terminal never
	// shows the row empty between the two.
	fmt.Fprintf(p.w, "\r\x1b[2K%s", fitColumns(line, cols-1))
	p.status = true
}

// shellMemory is a running shell's memory for the status line (" 212
// MiB"), or "" when it is not a running shell or nothing was measured.
func shellMemory(tb *task.Table, i task.Info) string {
	if i.Kind != "shell" || i.State != task.Running {
		return ""
	}
	sh, ok := tools.Shell(tb, i.ID)
	if !ok {
		return ""
	}
	if u := sh.Usage(); u.Memory > 0 {
		return " " + text.Bytes(u.Memory)
	}
	return ""
}

// defaultColumns is the width assumed when the terminal does not say.
const defaultColumns = 80

// fitColumns cuts s to at most n columns of a terminal, counting wide
// (East Asian, emoji) runes as two and dropping control characters, and
// marks a cut with "…".
func fitColumns(s string, n int) string {
	if n <= 0 {
		return ""
	}
	fits := columns(s) <= n
	var b strings.Builder
	used := 0
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			continue
		}
		w := runeColumns(r)
		if !fits && used+w > n-1 {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		used += w
	}
	return b.String()
}

// columns is how many terminal columns s takes (see fitColumns).
func columns(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x20 && r != 0x7f {
			n += runeColumns(r)
		}
	}
	return n
}

// runeColumns is 2 for the wide ranges of Unicode's East Asian Width
// (and the emoji blocks), 1 otherwise.
func runeColumns(r rune) int {
	switch {
	case r >= 0x1100 && r <= 0x115F, r >= 0x2E80 && r <= 0xA4CF, r >= 0xAC00 && r <= 0xD7A3,
		r >= 0xF900 && r <= 0xFAFF, r >= 0xFE30 && r <= 0xFE4F, r >= 0xFF00 && r <= 0xFF60,
		r >= 0xFFE0 && r <= 0xFFE6, r >= 0x1F300 && r <= 0x1FAFF, r >= 0x20000 && r <= 0x3FFFD:
		return 2
	}
	return 1
}

func (p *printer) clearStatusLocked() {
	if p.status {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.status = false
	}
}

func (p *printer) printJSON(e agent.Event) {
	out := map[string]any{"type": e.Type}
	set := func(k string, v any, ok bool) {
		if ok {
			out[k] = v
		}
	}
	set("autonomous", true, e.Autonomous)
	set("text", e.Text, e.Text != "")
	set("tool", e.Tool, e.Tool != "")
	set("tool_call_id", e.ToolCallID, e.ToolCallID != "")
	set("input", e.Input, len(e.Input) > 0)
	set("is_error", true, e.IsError)
	set("task_ids", e.TaskIDs, len(e.TaskIDs) > 0)
	set("error", e.Error, e.Error != "")
	if e.Err != nil {
		out["error"] = e.Err.Error()
	}
	set("usage", e.Usage, e.Usage != nil) // a turn_end's: its top-level calls
	if ev := e.Task; ev != nil {
		t := map[string]any{"seq": ev.Seq, "event": ev.Type.String(), "task_id": ev.ID, "state": ev.State.String()}
		if ev.Type == task.EventIdle { // about no task: {"event": "background_idle"}
			delete(t, "task_id")
			delete(t, "state")
		}
		set := func(k string, v any, ok bool) {
			if ok {
				t[k] = v
			}
		}
		set("owner", ev.Owner, ev.Owner != "")
		set("iteration", ev.Iteration, ev.Iteration > 0)
		set("text", ev.Text, ev.Text != "")
		out["task"] = t
	}
	b, err := text.JSON(out)
	if err != nil {
		return
	}
	fmt.Fprintf(p.w, "%s\n", b)
}

// resultLines is how many lines of a tool's output the trace shows.
const resultLines = 5

// humanResult renders a tool result for a person: the task, its status
// and exit code or error, the first lines of its output (or result), the
// note. A result that is not such a JSON object is cut to one line.
func humanResult(raw string) []string {
	var r struct {
		TaskID   string `json:"task_id"`
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Output   string `json:"output"`
		Result   string `json:"result"`
		Error    string `json:"error"`
		Note     string `json:"note"`
	}
	if lines := listResult(raw); lines != nil {
		return lines
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil || (r.TaskID == "" && r.Status == "") {
		return []string{clip(raw, 300)}
	}
	head := strings.TrimSpace(r.TaskID + " " + r.Status)
	if r.ExitCode != nil {
		head += fmt.Sprintf(", exit code %d", *r.ExitCode)
	}
	if r.Error != "" {
		head += ": " + clip(r.Error, 160)
	}
	lines := []string{head}
	body := r.Output
	if body == "" {
		body = r.Result
	}
	if body = strings.TrimRight(body, "\n"); body != "" {
		all := strings.Split(body, "\n")
		for _, l := range all[:min(len(all), resultLines)] {
			lines = append(lines, "│ "+clip(l, 160))
		}
		if len(all) > resultLines {
			lines = append(lines, fmt.Sprintf("│ … %s not shown", text.Plural(len(all)-resultLines, "line")))
		}
	}
	if r.Note != "" {
		lines = append(lines, clip(r.Note, 200))
	}
	return lines
}

// wentToBackground reports whether a call's result says its task runs on
// in the background (started there, or adopted).
func wentToBackground(raw string) bool {
	var r struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	}
	json.Unmarshal([]byte(raw), &r)
	return r.TaskID != "" && (r.Status == "running" || r.Status == "queued")
}

// listed is a task as task_wait and task_list give it.
type listed struct {
	TaskID     string `json:"task_id"`
	Status     string `json:"status"`
	Label      string `json:"label"`
	ExitCode   *int   `json:"exit_code"`
	Output     string `json:"output"`
	Result     string `json:"result"`
	OutputTail string `json:"output_tail"`
}

// listResult shows a result that lists tasks (task_wait's done and
// running, task_list's tasks) a line per task, with the last lines of
// what each printed, instead of its JSON cut on one line; nil for any
// other result.
func listResult(raw string) []string {
	var r struct {
		Done, Running, Tasks []listed
		Matched              *struct {
			TaskID string `json:"task_id"`
			Line   string `json:"line"`
		}
		Listening *struct {
			TaskID string `json:"task_id"`
			Port   int    `json:"port"`
		}
		Notices  []struct{ Text string }
		TimedOut bool   `json:"timed_out"`
		Note     string `json:"note"`
	}
	if json.Unmarshal([]byte(raw), &r) != nil || r.Done == nil && r.Running == nil && r.Tasks == nil {
		return nil
	}
	var lines []string
	if r.Matched != nil {
		lines = append(lines, fmt.Sprintf("%s matched: %s", r.Matched.TaskID, clip(r.Matched.Line, 160)))
	}
	if r.Listening != nil {
		lines = append(lines, fmt.Sprintf("%s listens on port %d", r.Listening.TaskID, r.Listening.Port))
	}
	for _, n := range r.Notices {
		lines = append(lines, "notice: "+clip(n.Text, 200))
	}
	for _, group := range [][]listed{r.Done, r.Running, r.Tasks} {
		for _, t := range group {
			head := t.TaskID + " " + t.Status
			if t.ExitCode != nil {
				head += fmt.Sprintf(", exit code %d", *t.ExitCode)
			}
			if t.Label != "" {
				head += ": " + clip(t.Label, 80)
			}
			lines = append(lines, head)
			body := strings.TrimRight(cmp.Or(t.Output, t.Result, t.OutputTail), "\n")
			if body == "" {
				continue
			}
			all := strings.Split(body, "\n")
			for _, l := range all[max(0, len(all)-3):] {
				lines = append(lines, "│ "+clip(l, 160))
			}
		}
	}
	switch {
	case len(lines) == 0:
		lines = []string{"no tasks"}
	case r.TimedOut:
		lines[0] += " (the wait timed out)"
	}
	if r.Note != "" {
		lines = append(lines, clip(r.Note, 200))
	}
	return lines
}

// clip shortens s to one line of at most n characters, as text.OneLine
// does, without control characters: no escape sequence reaches the
// terminal.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, text.Fold(s))
	return text.Cut(s, n)
}
