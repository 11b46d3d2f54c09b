package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/internal/tracing"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// loop is one agent's conversation: the top level or a sub-agent.
type loop struct {
	s       *Session
	agent   string // profile name for the model ("" for the top level)
	system  string
	model   provider.Model
	view    *task.View
	tools   []*tools.Tool
	defs    []provider.Tool
	maxIter int
	hist    *history
	handle  *task.Handle // sub-agents: progress and trace; nil at the top level
	budget  Budget       // a sub-agent's own (see overBudget)
	start   time.Time    // when a sub-agent began: its time budget's start
	parent  *loop        // a sub-agent's spawner, when that is a sub-agent: its budget binds this one too
}

// loopKey is the context key of the sub-agent loop whose turn a context
// runs (spawn reads it: the spawner).
type loopKey struct{}

// spawner returns the sub-agent loop whose tool call ctx is, or nil (the
// top level).
func spawner(ctx context.Context) *loop {
	l, _ := ctx.Value(loopKey{}).(*loop)
	return l
}

// ErrIterationCap is returned (wrapped) when a turn reached the iteration
// cap with the model still calling tools.
var ErrIterationCap = errors.New("iteration cap reached")

// turn appends blocks as a user message and runs the model and its tool
// calls until the model stops or the iteration cap. It returns the final
// answer. Cancelling ctx stops the model call and foreground tools, not
// background tasks; the history stays consistent (every tool call gets a
// result).
func (l *loop) turn(ctx context.Context, blocks []provider.Block, sink Sink) (string, provider.StopReason, error) {
	if len(blocks) > 0 {
		l.hist.append(provider.Message{Role: provider.User, Content: blocks})
	}
	for iter := 1; iter <= l.maxIter; iter++ {
		l.reflow(sink)
		if err := l.overBudget(); err != nil {
			return "", "", err
		}
		l.progress(iter, "waiting for the model")
		req := provider.Request{System: l.system, Messages: l.hist.view(), Tools: l.defs, Agent: l.agent}
		res, err := l.generate(ctx, req, sink)
		if err != nil {
			return "", "", err
		}
		l.account(res.Usage)
		res.Message.Role = provider.Assistant
		l.hist.append(res.Message)
		calls := res.Message.ToolCalls()
		if len(calls) == 0 {
			return res.Message.TextOf(), res.StopReason, nil
		}
		l.hist.append(provider.Message{Role: provider.User, Content: l.callTools(ctx, iter, calls, sink)})
		if err := ctx.Err(); err != nil {
			return "", "", context.Cause(ctx)
		}
	}
	return "", "", &iterationCapError{n: l.maxIter}
}

// iterationCapError is ErrIterationCap with the cap: a sub-agent that
// reached it ended by a limit (task.Ender).
type iterationCapError struct{ n int }

func (e *iterationCapError) Error() string {
	return fmt.Sprintf("%v: the model was still calling tools after %d iterations", ErrIterationCap, e.n)
}

func (e *iterationCapError) Unwrap() error { return ErrIterationCap }

func (e *iterationCapError) EndedBy() (by, reason string) {
	return task.ByLimit, fmt.Sprintf("iterations: the model was still calling tools after %d", e.n)
}

// generate is one model call, streamed to sink, in a chat span.
func (l *loop) generate(ctx context.Context, req provider.Request, sink Sink) (provider.Response, error) {
	name := l.agent
	if name == "" {
		name = "offstage"
	}
	ctx, span := tracing.Start(ctx, "chat", trace.SpanKindClient, tracing.OperationName.String("chat"),
		tracing.AgentName.String(name), tracing.Conversation(l.s.id))
	defer span.End()
	res, err := l.model.Generate(ctx, req, func(e provider.Event) {
		switch e.Type {
		case provider.TextDelta:
			emit(sink, Event{Type: TextDelta, Text: e.Text})
		case provider.ThinkingDelta:
			emit(sink, Event{Type: ThinkingDelta, Text: e.Text})
		}
	})
	tracing.Fail(span, err)
	span.SetAttributes(tracing.InputTokens.Int(res.Usage.InputTokens), tracing.OutputTokens.Int(res.Usage.OutputTokens))
	return res, err
}

// callTools runs the calls concurrently and returns their results in call
// order. A call to an unknown tool gets an error result; so does a tool
// whose runtime failed (the model should know it did not happen).
func (l *loop) callTools(ctx context.Context, iter int, calls []provider.Block, sink Sink) []provider.Block {
	results := make([]provider.Block, len(calls))
	var wg sync.WaitGroup
	var prev <-chan struct{} // the last call that may start a task: its ids come first
	for i, c := range calls {
		emit(sink, Event{Type: ToolCallEvent, Tool: c.ToolName, ToolCallID: c.ToolCallID, Input: c.Input})
		l.progress(iter, "running tool "+c.ToolName)
		l.trace(c)
		cctx, done := ctx, func() {}
		if t := l.tool(c.ToolName); t != nil && t.StartsTasks {
			cctx, prev, done = tools.InCallOrder(ctx, prev)
		}
		call := func() {
			defer done()
			results[i] = l.callTool(cctx, c)
			emit(sink, Event{Type: ToolResultEvent, Tool: c.ToolName, ToolCallID: c.ToolCallID, Text: results[i].Text, IsError: results[i].IsError})
		}
		if len(calls) == 1 {
			// One call runs on the turn's goroutine, whose stack has grown
			// already: a goroutine of its own was started, woke a thread
			// and grew its stack again on every turn with a tool call.
			call()
			break
		}
		wg.Go(call)
	}
	wg.Wait()
	return results
}

func (l *loop) callTool(ctx context.Context, c provider.Block) (out provider.Block) {
	ctx, span := tracing.Start(ctx, "execute_tool "+c.ToolName, trace.SpanKindInternal, tracing.OperationName.String("execute_tool"),
		tracing.ToolName.String(c.ToolName), tracing.ToolCallID.String(c.ToolCallID), tracing.Conversation(l.s.id))
	defer func() {
		if out.IsError {
			span.SetStatus(codes.Error, "the tool's result is an error")
		}
		span.End()
	}()
	out = provider.Block{Type: provider.ToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName}
	tool := l.tool(c.ToolName)
	if tool == nil {
		out.Text, out.IsError = errorJSON(fmt.Sprintf("There is no tool %q here; the tools are: %s.", c.ToolName, l.toolNames())), true
		return out
	}
	if res, ok := tool.Check(c.Input); !ok { // nobody is asked about a call that cannot run
		out.Text, out.IsError = res.Text, true
		return out
	}
	if permit := l.s.cfg.Permit; permit != nil {
		call := ToolCall{ID: c.ToolCallID, Tool: tool, Input: c.Input}
		if l.handle != nil {
			call.Agent, call.Profile = l.handle.ID(), l.agent
		}
		if err := permit(ctx, call); err != nil {
			out.Text, out.IsError = errorJSON("This call was not run: "+err.Error()), true
			return out
		}
	}
	res, err := tool.Call(ctx, l.view, c.Input)
	if err != nil {
		out.Text, out.IsError = errorJSON("The tool failed inside the runtime and did nothing: "+err.Error()), true
		return out
	}
	out.Text, out.IsError = res.Text, res.IsError
	return out
}

// partial returns the text of the last assistant message that has some:
// what a sub-agent stopped by a budget had said so far.
func (l *loop) partial() string {
	msgs := l.hist.messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.Assistant {
			if t := msgs[i].TextOf(); t != "" {
				return t
			}
		}
	}
	return ""
}

// tool is the tool called name, or nil.
func (l *loop) tool(name string) *tools.Tool {
	var tool *tools.Tool
	for _, t := range l.tools {
		if t.Name == name {
			tool = t
		}
	}
	return tool
}

func (l *loop) toolNames() string {
	names := make([]string, len(l.tools))
	for i, t := range l.tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

func errorJSON(msg string) string {
	b, _ := text.JSON(tools.ErrorOutput{Error: msg})
	return string(b)
}

// reflow adds the owner's background notices and finished results to the
// history, framed as what they are, before a model request.
func (l *loop) reflow(sink Sink) {
	var carried *carried
	if l.handle == nil { // the top level
		carried = l.s.carried
	}
	blocks, ids, noticeIDs := drainBackground(l.view, carried)
	if len(blocks) == 0 {
		return
	}
	l.hist.append(provider.Message{Role: provider.User, Content: blocks})
	emit(sink, Event{Type: Reflow, TaskIDs: ids, NoticeIDs: noticeIDs})
}

// drainBackground takes the view's waiting notices and finished results
// (each exactly once) and frames them as blocks: notices first, as they
// were posted before the results that follow them.
func drainBackground(v *task.View, c *carried) (blocks []provider.Block, ids, noticeIDs []string) {
	notices, results := c.take()
	notices = append(notices, v.Notices()...)
	results = append(results, v.Drain()...)
	blocks, noticeIDs = frameNotices(notices)
	rb, ids := frame(results)
	return append(blocks, rb...), ids, noticeIDs
}

// noticeHeader starts every reflowed notice, as backgroundHeader does
// results.
const noticeHeader = "[offstage] A background task has something to tell you while it runs. This is a notice, not its result (that still comes when it finishes) and not a message from the user."

// frameNotices turns notices into one text block for the history.
func frameNotices(notices []task.Notice) ([]provider.Block, []string) {
	if len(notices) == 0 {
		return nil, nil
	}
	var b strings.Builder
	var ids []string
	b.WriteString(noticeHeader)
	for _, n := range notices {
		if n.TaskID == "" {
			fmt.Fprintf(&b, "\n<background-notice kind=%q>\n%s\n</background-notice>", n.Kind, n.Text)
			continue
		}
		fmt.Fprintf(&b, "\n<background-notice task_id=%q label=%q kind=%q>\n%s\n</background-notice>", n.TaskID, n.Label, n.Kind, n.Text)
		if !slices.Contains(ids, n.TaskID) {
			ids = append(ids, n.TaskID)
		}
	}
	return []provider.Block{{Type: provider.Text, Text: b.String()}}, ids
}

// backgroundHeader starts every reflowed result, so neither the model nor
// the history guard can take it for the user's words.
const backgroundHeader = "[offstage] A background task finished. This is its result, not a message from the user."

// resultBytes caps a reflowed result's text.
const resultBytes = 4 << 10

// frame turns results into text blocks for the history.
func frame(results []task.Result) ([]provider.Block, []string) {
	var blocks []provider.Block
	var ids []string
	for _, r := range results {
		var b strings.Builder
		b.WriteString(backgroundHeader)
		fmt.Fprintf(&b, "\n<background-result task_id=%q label=%q status=%q", r.ID, r.Label, r.State)
		if r.ExitCode != nil {
			fmt.Fprintf(&b, " exit_code=\"%d\"", *r.ExitCode)
		}
		if r.EndedBy != "" && r.EndedBy != task.BySelf {
			fmt.Fprintf(&b, " ended_by=%q end_reason=%q", r.EndedBy, text.OneLine(r.EndReason, 200))
		}
		b.WriteString(">\n")
		text := r.Text
		if len(text) > resultBytes {
			text = "…(" + strconv.Itoa(len(text)-resultBytes) + " earlier bytes)" + strings.ToValidUTF8(text[len(text)-resultBytes:], "")
		}
		b.WriteString(text)
		if r.Err != nil && r.State != task.Completed {
			fmt.Fprintf(&b, "\nerror: %s", r.Err)
		}
		if trace := tools.ShortTrace(r.Trace); len(trace) > 0 {
			b.WriteString("\ntrace (its last tool calls):\n- " + strings.Join(trace, "\n- "))
		}
		b.WriteString("\n</background-result>")
		blocks = append(blocks, provider.Block{Type: provider.Text, Text: b.String()})
		ids = append(ids, r.ID)
	}
	return blocks, ids
}

func isBackground(b *provider.Block) bool {
	return b.Type == provider.Text && (strings.HasPrefix(b.Text, backgroundHeader) || strings.HasPrefix(b.Text, noticeHeader))
}

func (l *loop) progress(iter int, activity string) {
	if l.handle != nil {
		l.handle.Progress(iter, activity)
	}
}

// trace records a tool call in a sub-agent's trace, which travels with its
// result: "bash {"command":"make test"}".
func (l *loop) trace(c provider.Block) {
	if l.handle != nil {
		l.handle.Trace(c.ToolName + " " + string(c.Input))
	}
}
