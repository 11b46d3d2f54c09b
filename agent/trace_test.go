package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/offstage/offstage/agent"
)

// TestATurnIsOneTrace (issue 40 item 2): a turn is an invoke_agent span;
// its model calls are chat spans, its tool calls execute_tool spans with
// the GenAI attributes; the background shell and the sub-agent a call
// starts are task spans, children of that call, ending when they do; the
// sub-agent's own model calls nest under its task; and the shell's
// command sees TRACEPARENT naming its task's span.
func TestATurnIsOneTrace(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	s := newSession(t, `{"turns": [
		{"tool_calls": [
			{"name": "bash", "input": {"command": "echo tp=$TRACEPARENT", "run_in_background": true}},
			{"name": "spawn_agent", "input": {"profile": "quick", "prompt": "look"}}]},
		{"text": "started"},
		{"text": "all done"}
	], "agents": {"quick": [{"text": "looked"}]}}`, agent.Config{Tracer: tp})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	// The shell's span ends with the shell, after the turn.
	byName := func() map[string][]sdktrace.ReadOnlySpan {
		m := map[string][]sdktrace.ReadOnlySpan{}
		for _, sp := range spans.Ended() {
			m[sp.Name()] = append(m[sp.Name()], sp)
		}
		return m
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(byName()["offstage.task shell"]) == 0 || len(byName()["offstage.task agent"]) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the task spans never ended: %v", byName())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := byName()
	root := one(t, m, "invoke_agent offstage")
	attr := func(sp sdktrace.ReadOnlySpan, key string) string {
		for _, kv := range sp.Attributes() {
			if string(kv.Key) == key {
				return kv.Value.String()
			}
		}
		return ""
	}
	if attr(root, "gen_ai.conversation.id") != s.ID() || attr(root, "gen_ai.operation.name") != "invoke_agent" {
		t.Errorf("turn span attributes: %v", root.Attributes())
	}
	trace := root.SpanContext().TraceID()
	var bashCall, spawnCall sdktrace.ReadOnlySpan
	for _, sp := range spans.Ended() {
		if sp.SpanContext().TraceID() != trace {
			t.Errorf("span %s is in another trace", sp.Name())
		}
		switch sp.Name() {
		case "execute_tool bash":
			bashCall = sp
		case "execute_tool spawn_agent":
			spawnCall = sp
		}
	}
	if bashCall == nil || spawnCall == nil {
		t.Fatalf("tool call spans: %v", m)
	}
	if attr(bashCall, "gen_ai.tool.name") != "bash" || attr(bashCall, "gen_ai.tool.call.id") == "" || bashCall.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("execute_tool bash: %v, parent %v", bashCall.Attributes(), bashCall.Parent())
	}
	if len(m["chat"]) < 3 { // two of the top level, one of the sub-agent
		t.Errorf("chat spans: %d, want 3", len(m["chat"]))
	}
	shell := one(t, m, "offstage.task shell")
	if shell.Parent().SpanID() != bashCall.SpanContext().SpanID() || !strings.HasPrefix(attr(shell, "offstage.task.id"), "shell:") || attr(shell, "process.exit.code") != "0" ||
		attr(shell, "offstage.task.state") != "completed" || attr(shell, "offstage.task.ended_by") != "self" {
		t.Errorf("shell task span: parent %v, attributes %v", shell.Parent(), shell.Attributes())
	}
	agentTask := one(t, m, "offstage.task agent")
	if agentTask.Parent().SpanID() != spawnCall.SpanContext().SpanID() {
		t.Errorf("sub-agent task span's parent %v, want the spawn_agent call", agentTask.Parent())
	}
	nested := false
	for _, c := range m["chat"] {
		nested = nested || c.Parent().SpanID() == agentTask.SpanContext().SpanID()
	}
	if !nested {
		t.Error("the sub-agent's model call is not under its task span")
	}
	// The shell's output names its own span as the parent of what it runs.
	out := shellOutput(t, s, attr(shell, "offstage.task.id"))
	want := "tp=00-" + trace.String() + "-" + shell.SpanContext().SpanID().String() + "-01"
	if !strings.Contains(out, want) {
		t.Errorf("the command saw %q, want %q", out, want)
	}
}

// TestNoTracerNoTraceparent: without a tracer nothing is traced and a
// command gets no TRACEPARENT.
func TestNoTracerNoTraceparent(t *testing.T) {
	s := newSession(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo tp=[$TRACEPARENT]"}}]},
		{"text": "ok"}]}`, agent.Config{})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if out := shellOutput(t, s, "shell:1"); !strings.Contains(out, "tp=[]") {
		t.Errorf("output %q, want no TRACEPARENT", out)
	}
}

func one(t *testing.T, m map[string][]sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(m[name]) != 1 {
		t.Fatalf("%d spans %q, want 1 (all: %v)", len(m[name]), name, m)
	}
	return m[name][0]
}

// shellOutput reads a shell's whole output through task_output.
func shellOutput(t *testing.T, s *agent.Session, id string) string {
	t.Helper()
	for _, tool := range s.Tools() {
		if tool.Name == "task_output" {
			res, err := tool.Call(t.Context(), s.Table().View(""), []byte(`{"task_id": "`+id+`", "since": 0}`))
			if err != nil {
				t.Fatal(err)
			}
			return res.Text
		}
	}
	t.Fatal("no task_output")
	return ""
}
