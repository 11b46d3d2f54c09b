package tracing

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWithoutASpanNothingIsTraced: no tracer, no span, no TRACEPARENT.
func TestWithoutASpanNothingIsTraced(t *testing.T) {
	ctx, span := Start(context.Background(), "x", 0)
	if span.SpanContext().IsValid() || Traceparent(ctx) != "" {
		t.Errorf("a span without a tracer: %v %q", span.SpanContext(), Traceparent(ctx))
	}
	ctx, span = Task(context.Background(), context.Background(), "shell", "shell:1", "true")
	if span.SpanContext().IsValid() || Traceparent(ctx) != "" {
		t.Errorf("a task span without a traced call: %v", span.SpanContext())
	}
}

// TestATaskOutlivesItsCall: a task's span is a child of its call's span
// and linked to it, in the task's own context (not cancelled with the
// call's), and its traceparent names it.
func TestATaskOutlivesItsCall(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	callCtx, cancel := context.WithCancel(context.Background())
	callCtx, call := Root(callCtx, tp, "execute_tool bash", nil)
	taskCtx, span := Task(context.Background(), callCtx, "shell", "shell:1", "sleep 1")
	cancel()
	call.End()
	if taskCtx.Err() != nil {
		t.Error("the task's context ended with its call's")
	}
	ro := span.(sdktrace.ReadOnlySpan)
	if ro.Parent().SpanID() != call.SpanContext().SpanID() || len(ro.Links()) != 1 || ro.Links()[0].SpanContext.SpanID() != call.SpanContext().SpanID() {
		t.Errorf("task span parent %v links %v", ro.Parent(), ro.Links())
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if got := Traceparent(taskCtx); got != want {
		t.Errorf("Traceparent = %q, want %q", got, want)
	}
	span.End()
}

// TestSpansAreBoundedAndLinkedOnce: a Spans keeps the newest maxSpans
// tasks' spans; a finished task is linked once, a noticed one each time.
func TestSpansAreBoundedAndLinkedOnce(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	var s Spans
	callCtx, call := Root(WithSpans(context.Background(), &s), tp, "execute_tool bash", nil)
	defer call.End()
	for i := range maxSpans + 10 {
		_, span := Task(context.Background(), callCtx, "shell", fmt.Sprintf("shell:%d", i), "true")
		span.End()
	}
	if n := len(s.Links([]string{"shell:0", "shell:9"}, nil)); n != 0 {
		t.Errorf("%d links to the oldest tasks, forgotten past %d", n, maxSpans)
	}
	last := fmt.Sprintf("shell:%d", maxSpans+9)
	if n := len(s.Links(nil, []string{last})) + len(s.Links(nil, []string{last})); n != 2 {
		t.Errorf("a noticed task linked %d times in two turns, want 2", n)
	}
	if n := len(s.Links([]string{last}, nil)) + len(s.Links([]string{last}, nil)); n != 1 {
		t.Errorf("a finished task linked %d times, want once", n)
	}
	if len(s.byID) > maxSpans || len(s.order) > maxSpans {
		t.Errorf("Spans holds %d spans, %d ids; at most %d", len(s.byID), len(s.order), maxSpans)
	}
}
