package acpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// Caps on what a card shows; the model's own results have theirs.
const (
	cardTextBytes = 8 << 10
	cardTailLines = 15
)

// card is the tool call that started a background task (a shell, or a
// sub-agent): the editor's live view of it, in_progress until the task
// ends.
type card struct {
	call  acp.ToolCallId
	final bool // its last update was sent
}

// Event makes a session an agent.Sink: every event of the session, from
// turns prompted or autonomous and from its task table, becomes a session
// update, added in order (outbox.go).
func (s *session) Event(e agent.Event) {
	switch e.Type {
	case agent.TextDelta:
		s.message(e.Text)
	case agent.ThinkingDelta:
		s.thought(e.Text)
	case agent.ToolCallEvent:
		s.toolCall(e)
	case agent.ToolResultEvent:
		s.toolResult(e)
	case agent.TaskEvent:
		if e.Task != nil && e.Task.Type == task.EventIdle {
			s.update(backgroundIdle(e.Task.Time))
		} else if e.Task != nil {
			s.taskEvent(*e.Task)
		}
	case agent.Reflow:
		if e.Autonomous {
			s.between.Store(false) // a turn starts that reads no input
			s.thought(reflowThought(e))
		}
	case agent.TurnEnd:
		switch {
		case !e.Autonomous:
			s.turnEnd(e)
		case e.Err != nil && !errors.Is(e.Err, agent.ErrTurnCanceled):
			s.message("\n(The turn started by finished background work failed: " + e.Err.Error() + ")\n")
		}
	}
}

func (s *session) toolOf(name string) *tools.Tool {
	for _, t := range s.tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func (s *session) toolCall(e agent.Event) {
	t := s.toolOf(e.Tool)
	title, kind := describe(t, e.Input)
	s.cardStarted(e.ToolCallID, title, kind, e.Input)
}

// toolResult ends a tool call's card, unless the call started background
// work: then the card stays in_progress until the task ends.
func (s *session) toolResult(e agent.Event) {
	id := acp.ToolCallId(e.ToolCallID)
	out := readOutput(e.Text)
	if taskID, status := out.get("task_id"), out.get("status"); !e.IsError && taskID != "" && (e.Tool == "bash" || e.Tool == "spawn_agent") && (status == "running" || status == "queued") {
		note := "Running in the background as " + taskID + "."
		if tail := out.get("output"); tail != "" {
			note += "\n\n" + lastLines(tail, cardTailLines)
		}
		s.update(acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusInProgress),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(note))}), acp.WithUpdateRawOutput(out.raw)))
		s.mu.Lock()
		s.cards[taskID] = &card{call: id}
		s.mu.Unlock()
		if info, err := s.sess.Table().Info(taskID); err == nil && info.State.Finished() {
			s.finishCard(taskID) // it ended before its card was made
		}
		return
	}
	s.cardEnded(e.ToolCallID, cardStatus(e.IsError, &out), resultText(e.Tool, &out, e.Text), out.raw, e.Text)
}

// cardStatus is how a finished call's card ends: failed for an error
// result, and for a command that did not complete (cancelled with the
// turn, timed out, failed), which a card marked completed would hide.
func cardStatus(isError bool, out *toolOutput) acp.ToolCallStatus {
	switch s := out.get("status"); {
	case isError, s == task.Canceled.String(), s == task.TimedOut.String(), s == task.Failed.String():
		return acp.ToolCallStatusFailed
	}
	return acp.ToolCallStatusCompleted
}

// resultText is what a finished call's card shows: a command's output,
// an error's sentence, a sub-agent's answer, or the result itself.
func resultText(tool string, out *toolOutput, raw string) string {
	pick := func(keys ...string) string {
		var parts []string
		for _, k := range keys {
			if v := out.get(k); v != "" {
				parts = append(parts, v)
			}
		}
		return strings.Join(parts, "\n")
	}
	var shown string
	switch {
	case out.errorOnly:
		shown = pick("error")
	case tool == "bash":
		shown = pick("output", "error", "note")
		if out.hasExit {
			shown = fmt.Sprintf("exit %d\n%s", int(out.exit), shown)
		}
	case tool == "spawn_agent":
		shown = pick("answer", "error", "note")
	case strings.HasPrefix(tool, "mcp__"):
		shown = pick("content", "error")
	}
	if strings.TrimSpace(shown) == "" {
		shown = raw
	}
	return text.Clip(shown, cardTextBytes)
}

// taskEvent keeps background tasks' cards current: a sub-agent's latest
// step (one line, replaced), a shell's latest output, and the end.
func (s *session) taskEvent(ev task.Event) {
	s.subCallsAdvance(ev)
	switch ev.Type {
	case task.EventFinished:
		s.finishCard(ev.ID)
	case task.EventProgress, task.EventOutput, task.EventNotice:
		s.mu.Lock()
		c := s.cards[ev.ID]
		live := c != nil && !c.final
		s.mu.Unlock()
		if !live {
			return
		}
		var line string
		if ev.Type == task.EventNotice {
			line = ev.ID + " notice, " + ev.Text
		} else if ev.Type == task.EventProgress {
			if ev.Kind != agent.TaskKind {
				return // a shell's activity line; its output says more
			}
			line = fmt.Sprintf("%s, step %d: %s", ev.ID, ev.Iteration, ev.Text)
		} else if tail := s.shellTail(ev.ID); tail != "" {
			line = ev.ID + " is running; its latest output:\n" + tail
		} else {
			return
		}
		s.update(acp.UpdateToolCall(c.call, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(line))})))
	}
}

// IdleMeta is the key of the _meta of the session_info_update a session
// sends when its last running or queued background task ends (the task
// table's background_idle event): {"offstage/backgroundIdle": true}, with
// updatedAt the time it ended. A session_info_update of its own, not a
// thought: an editor joins consecutive thought chunks into one block, so a
// thought would run into the autonomous turn's that usually follows.
const IdleMeta = "offstage/backgroundIdle"

// backgroundIdle is the update for the background_idle event at t.
func backgroundIdle(t time.Time) acp.SessionUpdate {
	at := t.UTC().Format(time.RFC3339Nano)
	return acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{
		SessionUpdate: "session_info_update",
		Meta:          map[string]any{IdleMeta: true},
		UpdatedAt:     &at,
	}}
}

// reflowThought says why an autonomous turn starts.
func reflowThought(e agent.Event) string {
	switch {
	case len(e.NoticeIDs) > 0 && len(e.TaskIDs) > 0:
		return fmt.Sprintf("Background work finished (%s) and sent notices (%s); looking at them.\n", strings.Join(e.TaskIDs, ", "), strings.Join(e.NoticeIDs, ", "))
	case len(e.NoticeIDs) > 0:
		return fmt.Sprintf("Background work sent notices (%s); looking at them.\n", strings.Join(e.NoticeIDs, ", "))
	}
	return fmt.Sprintf("Background work finished (%s); looking at the results.\n", strings.Join(e.TaskIDs, ", "))
}

// finishCard sends a background task's card its last update, once.
func (s *session) finishCard(id string) {
	s.mu.Lock()
	c := s.cards[id]
	if c == nil || c.final {
		s.mu.Unlock()
		return
	}
	c.final = true
	delete(s.cards, id)
	s.mu.Unlock()
	r, _, err := s.sess.Table().Result(id)
	if err != nil {
		return
	}
	status := acp.ToolCallStatusCompleted
	if r.State != task.Completed {
		status = acp.ToolCallStatusFailed
	}
	raw := map[string]any{"task_id": id, "status": r.State.String()}
	shown := fmt.Sprintf("%s %s", id, r.State)
	if r.ExitCode != nil {
		raw["exit_code"] = *r.ExitCode
		shown += fmt.Sprintf(" (exit %d)", *r.ExitCode)
	}
	if r.Err != nil && r.State != task.Completed {
		raw["error"] = r.Err.Error()
		shown += ": " + r.Err.Error()
	}
	if body := strings.TrimSpace(r.Text); body != "" {
		shown += "\n\n" + lastLines(body, 40)
	}
	s.update(acp.UpdateToolCall(c.call, acp.WithUpdateStatus(status),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text.Clip(shown, cardTextBytes)))}), acp.WithUpdateRawOutput(raw)))
}

func (s *session) shellTail(id string) string {
	p, ok := tools.Shell(s.sess.Table(), id)
	if !ok {
		return ""
	}
	return strings.TrimRight(p.Tail(cardTailLines), "\n")
}

// describe gives a tool call its title and kind, as an editor shows them.
//
// Kinds: bash, task_input and spawn_agent execute (they run things);
// task_list, task_inspect and task_output read; task_wait is "other" (it
// waits, it neither reads files nor thinks); task_cancel is "delete" (it
// ends a task and kills its processes).
func describe(t *tools.Tool, input json.RawMessage) (string, acp.ToolKind) {
	if t == nil {
		return "Unknown tool", acp.ToolKindOther
	}
	if t.Name == "task_list" { // its title takes nothing from the input: not decoded
		return "List tasks", acp.ToolKindRead
	}
	in := describedInput(input)
	id := strings.TrimSpace(fmt.Sprint(orEmpty(in.TaskID)))
	switch t.Name {
	case "bash":
		title := "Run: " + text.OneLine(in.Command, 80)
		if in.Background {
			title += " (in the background)"
		}
		if in.Sandbox != nil && !*in.Sandbox {
			title += " (outside the sandbox)"
		}
		return title, acp.ToolKindExecute
	case "spawn_agent":
		return "Sub-agent " + in.Profile + ": " + text.OneLine(in.Prompt, 60), acp.ToolKindExecute
	case "task_inspect":
		return "Inspect " + id, acp.ToolKindRead
	case "task_output":
		return "Read the output of " + id, acp.ToolKindRead
	case "task_wait":
		ids := make([]string, 0, len(in.TaskIDs))
		for _, x := range in.TaskIDs {
			ids = append(ids, fmt.Sprint(x))
		}
		title := "Wait for " + strings.Join(ids, ", ")
		if in.Until != "" {
			title += " until a line matches " + text.OneLine(in.Until, 40)
		}
		return title, acp.ToolKindOther
	case "task_cancel":
		return "Cancel " + id, acp.ToolKindDelete
	case "task_input":
		return "Send input to " + id, acp.ToolKindExecute
	}
	// Not Safety.Consequential: a destructive tool of an embedder's is
	// "other" (offstage's own, task_cancel, is "delete" above).
	kind := acp.ToolKindOther
	switch t.Safety {
	case tools.ReadOnly:
		kind = acp.ToolKindRead
	case tools.Execute:
		kind = acp.ToolKindExecute
	}
	if t.Title != "" {
		return t.Title, kind
	}
	return t.Name, kind
}

// toolInput is what describe reads of a call's input.
type toolInput struct {
	Command    string `json:"command"`
	Background bool   `json:"run_in_background"`
	Profile    string `json:"profile"`
	Prompt     string `json:"prompt"`
	TaskID     any    `json:"task_id"`
	TaskIDs    []any  `json:"task_ids"`
	Text       string `json:"text"`
	Until      string `json:"until"`
	Sandbox    *bool  `json:"sandbox"`
}

// describedInput decodes a call's input as far as it is toolInput's (a
// call whose input does not decode is described from what did); a
// function of its own, so that the value decoded into is allocated only
// for the calls whose title reads it.
func describedInput(input json.RawMessage) toolInput {
	var in toolInput
	json.Unmarshal(input, &in)
	return in
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

// promptText turns a prompt's content into the text of the user's turn:
// text as it is, an attached text file as a fenced block with its URI, a
// link as its name and URI. Images, audio and binary resources are
// refused with a clear error (the capabilities say so too).
func promptText(blocks []acp.ContentBlock) (string, error) {
	if len(blocks) == 1 && blocks[0].Text != nil && blocks[0].Text.Type == "text" && strings.TrimSpace(blocks[0].Text.Text) != "" {
		return blocks[0].Text.Text, nil // the usual prompt: its text as it is
	}
	var b strings.Builder
	for i, c := range blocks {
		if i > 0 {
			b.WriteString("\n")
		}
		switch {
		case c.Text != nil && c.Text.Type != "" && c.Text.Type != "text":
			// The SDK decodes a block of a type it does not know as text,
			// with that type: it was "the prompt is empty".
			return "", invalid("prompt block %d is of type %q, which offstage does not know; send text blocks (text, resource_link, or an embedded text resource)", i, c.Text.Type)
		case c.Text != nil:
			b.WriteString(c.Text.Text)
		case c.ResourceLink != nil:
			fmt.Fprintf(&b, "[%s](%s)", c.ResourceLink.Name, c.ResourceLink.Uri)
		case c.Resource != nil && c.Resource.Resource.TextResourceContents != nil:
			r := c.Resource.Resource.TextResourceContents
			fmt.Fprintf(&b, "Attached %s:\n```\n%s\n```", r.Uri, r.Text)
		case c.Image != nil, c.Audio != nil, c.Resource != nil:
			return "", invalid("prompt block %d is an image, audio or binary resource, which offstage does not take (promptCapabilities says so); send text", i)
		default:
			return "", invalid("prompt block %d has no content offstage knows", i)
		}
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", invalid("the prompt is empty; send at least one text block")
	}
	return b.String(), nil
}

// rawJSON is a call's input as its card's rawInput: the JSON as it is,
// or the text when it is not JSON.
func rawJSON(b json.RawMessage) any {
	if v, ok := asJSON(b); ok {
		return v
	}
	return string(b)
}

// rawOr is a result's rawOutput: the JSON object, or else the text.
func rawOr(out *toolOutput, raw string) any {
	if out.raw != nil {
		return out.raw
	}
	return raw
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("…(%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// replayBytes bounds each replayed block of a loaded conversation.
const replayBytes = 8 << 10

// replay sends a loaded conversation to the client as the updates it
// would have seen: the user's messages, the model's text and thoughts,
// its tool calls with their results as their cards showed them (see
// replayer).
func (s *session) replay(history []provider.Message) {
	r := replayer{s: s, tools: map[string]string{}, cards: map[string]acp.ToolCallId{}}
	for _, m := range history {
		for _, b := range m.Content {
			r.block(m.Role, b)
		}
	}
	// The cards left in progress are tasks whose results the conversation
	// has not had. A live session's table still has them: each card ends
	// now if its task has, and with its task otherwise, as it would have
	// on the connection that made it (the editor's card spun for good).
	for _, id := range slices.Sorted(maps.Keys(r.cards)) {
		info, err := s.sess.Table().Info(id)
		if err != nil {
			continue // not in this table: a session loaded from the journal
		}
		s.mu.Lock()
		if s.cards[id] == nil {
			s.cards[id] = &card{call: r.cards[id]}
		}
		s.mu.Unlock()
		if info.State.Finished() {
			s.finishCard(id)
		}
	}
}

// replayer turns a recorded conversation back into the updates the editor
// saw live: tool cards titled as they were (an editor's MCP tools by
// name, even before their servers answer again), results as their cards
// showed them, not raw JSON, and the background results and notices the
// runtime put in the conversation as the line that announced them and
// the end of the card that started the task, not as the model's framing.
type replayer struct {
	s     *session
	tools map[string]string         // tool call id → tool name
	cards map[string]acp.ToolCallId // background task id → the call that started it
}

func (r *replayer) block(role provider.Role, b provider.Block) {
	s := r.s
	switch b.Type {
	case provider.Text:
		shown := text.Clip(b.Text, replayBytes)
		switch {
		case role == provider.Assistant:
			s.message(shown)
		case strings.HasPrefix(b.Text, "[offstage] A background task finished."):
			r.results(b.Text)
		case strings.HasPrefix(b.Text, "[offstage] A background task has something to tell you"):
			ids := elementIDs(b.Text, "<background-notice task_id=")
			s.thought(reflowThought(agent.Event{NoticeIDs: ids, TaskIDs: nil}))
		case strings.HasPrefix(b.Text, "[offstage]"):
			s.thought(shown + "\n")
		default:
			s.update(acp.UpdateUserMessageText(shown))
		}
	case provider.Thinking:
		s.thought(text.Clip(b.Text, replayBytes))
	case provider.ToolUse:
		r.tools[b.ToolCallID] = b.ToolName
		t := s.toolOf(b.ToolName)
		title, kind := describe(t, b.Input)
		if t == nil && strings.HasPrefix(b.ToolName, "mcp__") {
			title = b.ToolName // its server has not answered (yet): named as the model called it
		}
		s.update(acp.StartToolCall(acp.ToolCallId(b.ToolCallID), title, acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusInProgress)))
	case provider.ToolResult:
		r.result(b)
	}
}

// result ends a call's card as toolResult did live, or leaves a card that
// started background work in progress until its result comes.
func (r *replayer) result(b provider.Block) {
	id, name := acp.ToolCallId(b.ToolCallID), r.tools[b.ToolCallID]
	out := readOutput(b.Text)
	if taskID, status := out.get("task_id"), out.get("status"); !b.IsError && taskID != "" && (name == "bash" || name == "spawn_agent") && (status == "running" || status == "queued") {
		r.cards[taskID] = id
		r.s.update(acp.UpdateToolCall(id, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("Running in the background as " + taskID + "."))})))
		return
	}
	status := cardStatus(b.IsError, &out)
	r.s.update(acp.UpdateToolCall(id, acp.WithUpdateStatus(status),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text.Clip(resultText(name, &out, b.Text), replayBytes)))})))
}

// results replays a delivery of background results: the line announcing
// it, then each result on the card of the call that started its task.
func (r *replayer) results(block string) {
	var ids []string
	for _, el := range strings.Split(block, "<background-result ")[1:] {
		attrs, body, _ := strings.Cut(el, ">\n")
		body, _, _ = strings.Cut(body, "\n</background-result>")
		taskID, state := attr(attrs, "task_id"), attr(attrs, "status")
		ids = append(ids, taskID)
		call, ok := r.cards[taskID]
		if !ok {
			continue
		}
		status := acp.ToolCallStatusCompleted
		if state != task.Completed.String() {
			status = acp.ToolCallStatusFailed
		}
		shown := taskID + " " + state
		if code := attr(attrs, "exit_code"); code != "" {
			shown += " (exit " + code + ")"
		}
		if body = strings.TrimSpace(body); body != "" {
			shown += "\n\n" + lastLines(body, 40)
		}
		r.s.update(acp.UpdateToolCall(call, acp.WithUpdateStatus(status),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text.Clip(shown, cardTextBytes)))})))
	}
	r.s.thought(reflowThought(agent.Event{TaskIDs: ids}))
}

// attr is the value of name="…" in an element's attributes, as frame
// wrote them (%q), or "".
func attr(attrs, name string) string {
	_, rest, ok := strings.Cut(attrs, " "+name+"=")
	if !ok {
		_, rest, ok = strings.Cut(attrs, name+"=")
	}
	if !ok {
		return ""
	}
	v, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return ""
	}
	u, _ := strconv.Unquote(v)
	return u
}

// elementIDs are the task ids of the elements starting with prefix.
func elementIDs(block, prefix string) []string {
	var ids []string
	for _, el := range strings.Split(block, prefix)[1:] {
		if v, err := strconv.QuotedPrefix(el); err == nil {
			u, _ := strconv.Unquote(v)
			if !slices.Contains(ids, u) {
				ids = append(ids, u)
			}
		}
	}
	return ids
}
