package tracing

import (
	"context"
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
	callCtx, call := Root(callCtx, tp, "execute_tool bash")
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
