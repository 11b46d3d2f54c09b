// Package tracing holds the OpenTelemetry spans offstage makes, named as
// OpenTelemetry's GenAI conventions name them, so that a session's trace
// reads prompt → model call → tool call → background task → subprocess:
//
//   - invoke_agent offstage: one turn of a session (autonomous or not);
//   - chat MODEL: one model call, with its token usage;
//   - execute_tool TOOL: one tool call (gen_ai.tool.name,
//     gen_ai.tool.call.id, gen_ai.conversation.id);
//   - offstage.task KIND: one task (a shell or a sub-agent), a child of the
//     call that started it, which it may outlive: a background task's span
//     ends when the task does, with its end and its exit code;
//   - an autonomous turn (one a background task's result or notice
//     started, with no message of the user's) is linked to the span of
//     each task it hears from (see Spans): a span link, not a parent,
//     since one turn may carry several tasks' results, of several traces;
//   - and a traced program a shell runs joins the trace through
//     TRACEPARENT in its environment (W3C trace context).
//
// Every span takes its tracer from the span in its context (see
// trace.Span.TracerProvider), so a caller that traces nothing pays for
// nothing: with no span in the context, every span here is a no-op and
// TRACEPARENT is not set.
package tracing

import (
	"context"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/offstage/offstage/task"
)

// scope names offstage's instrumentation.
const scope = "github.com/offstage/offstage"

// Attribute keys: GenAI's and offstage's own.
const (
	OperationName  = attribute.Key("gen_ai.operation.name")
	ConversationID = attribute.Key("gen_ai.conversation.id")
	AgentName      = attribute.Key("gen_ai.agent.name")
	RequestModel   = attribute.Key("gen_ai.request.model")
	InputTokens    = attribute.Key("gen_ai.usage.input_tokens")
	OutputTokens   = attribute.Key("gen_ai.usage.output_tokens")
	ToolName       = attribute.Key("gen_ai.tool.name")
	ToolCallID     = attribute.Key("gen_ai.tool.call.id")
	TaskID         = attribute.Key("offstage.task.id")
	TaskKind       = attribute.Key("offstage.task.kind")
	TaskLabel      = attribute.Key("offstage.task.label")
	TaskState      = attribute.Key("offstage.task.state")
	TaskEndedBy    = attribute.Key("offstage.task.ended_by")
	TaskEndReason  = attribute.Key("offstage.task.end_reason")
	ExitCode       = attribute.Key("process.exit.code")
	Autonomous     = attribute.Key("offstage.turn.autonomous")
)

// Conversation is the gen_ai.conversation.id attribute of a session, or
// none for a session without an id (one recorded by no journal): an
// invalid attribute, which spans drop.
func Conversation(id string) attribute.KeyValue {
	if id == "" {
		return attribute.KeyValue{}
	}
	return ConversationID.String(id)
}

// Start starts a span named name as a child of ctx's span, with the
// tracer of ctx's span's provider (a no-op without one).
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer(scope)
	return tracer.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// Root starts a turn's span with tp (nil: a no-op), the root of what the
// turn does unless ctx already carries a span, linked to links (the
// spans of the tasks that caused it; none for a user's turn).
func Root(ctx context.Context, tp trace.TracerProvider, name string, links []trace.Link, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tp == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tp.Tracer(scope).Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...), trace.WithLinks(links...))
}

// Spans remembers the span of each task started by calls made under it
// (WithSpans), by task id, so that the turn a task's result or notice
// later starts by itself can link to it. It keeps the newest maxSpans; a
// task linked for its result is forgotten. The zero value is ready; it is
// safe for concurrent use.
type Spans struct {
	mu    sync.Mutex
	byID  map[string]trace.SpanContext // guarded by mu
	order []string                     // guarded by mu: ids as added, oldest first, to forget
}

// maxSpans bounds what a Spans remembers: tasks whose results the model
// took with task_wait are never linked, and a long session starts many.
const maxSpans = 1024

type spansKey struct{}

// WithSpans returns ctx carrying s: the tasks a call made in it starts
// (Task, with it as the call's context) are remembered in s.
func WithSpans(ctx context.Context, s *Spans) context.Context {
	return context.WithValue(ctx, spansKey{}, s)
}

func (s *Spans) add(id string, sc trace.SpanContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = make(map[string]trace.SpanContext)
	}
	s.byID[id] = sc
	s.order = append(s.order, id)
	if len(s.order) > maxSpans {
		delete(s.byID, s.order[0])
		s.order = slices.Delete(s.order, 0, 1)
	}
}

// Links returns links to the spans of the tasks whose results (finished)
// and notices (noticed, still running) a turn carries, and forgets the
// finished ones. Tasks it never saw start (or forgot) have none.
func (s *Spans) Links(finished, noticed []string) []trace.Link {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var links []trace.Link
	for i, id := range slices.Concat(finished, noticed) {
		sc, ok := s.byID[id]
		if !ok {
			continue
		}
		if i < len(finished) {
			delete(s.byID, id) // its id stays in order until it ages out
		}
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{TaskID.String(id)}})
	}
	return links
}

// Task starts a task's span in the task's own context (taskCtx, which
// outlives the call), as a child of the span of the call that started it
// (callCtx) and linked to it, since it may end long after the call.
func Task(taskCtx, callCtx context.Context, kind, id, label string) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(callCtx)
	if !parent.IsValid() {
		return taskCtx, trace.SpanFromContext(taskCtx)
	}
	tracer := trace.SpanFromContext(callCtx).TracerProvider().Tracer(scope)
	ctx := trace.ContextWithSpanContext(taskCtx, parent)
	ctx, span := tracer.Start(ctx, "offstage.task "+kind, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(trace.Link{SpanContext: parent}),
		trace.WithAttributes(TaskID.String(id), TaskKind.String(kind), TaskLabel.String(label)))
	if s, ok := callCtx.Value(spansKey{}).(*Spans); ok && span.SpanContext().IsValid() {
		s.add(id, span.SpanContext())
	}
	return ctx, span
}

// EndTask ends a task's span once the task has finished and its table
// has said how: its state, who ended it and why (ended_by, end_reason),
// its exit code. A span that records nothing ends at once.
func EndTask(span trace.Span, v *task.View, id string) {
	done, err := v.Done(id)
	if !span.IsRecording() || err != nil {
		span.End()
		return
	}
	go func() {
		<-done
		if info, err := v.Info(id); err == nil {
			span.SetAttributes(TaskState.String(info.State.String()), TaskEndedBy.String(info.EndedBy), TaskEndReason.String(info.EndReason))
			if info.ExitCode != nil {
				span.SetAttributes(ExitCode.Int(*info.ExitCode))
			}
			if info.State != task.Completed {
				span.SetStatus(codes.Error, info.State.String()+": "+info.EndReason)
			}
		}
		span.End()
	}()
}

// Fail marks a span failed with err, if any.
func Fail(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// Traceparent returns the W3C traceparent of ctx's span ("" without a
// sampled one), for a program started in it.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}
