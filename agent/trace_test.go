package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/tools"
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

// TestAnAutonomousTurnLinksToItsTasks (issue 40 item 2): the turn that
// two background shells' results start by themselves is its own
// invoke_agent span, autonomous, with a span link to each shell's task
// span (it outlives the turn that started them, and one turn carries
// both, so links, not a parent); the user's turn links to nothing.
func TestAnAutonomousTurnLinksToItsTasks(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	dir := t.TempDir()
	gated := `while [ ! -e gate ]; do sleep 0.01; done; echo `
	s := newSession(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "`+gated+`one", "run_in_background": true}},
		                {"name": "bash", "input": {"command": "`+gated+`two", "run_in_background": true}}]},
		{"text": "started"},
		{"expect": "(?s)background-result.*background-result", "text": "both done"}
	]}`, agent.Config{Tracer: tp, Settle: 2 * time.Second, Tools: tools.Config{Process: proc.Config{Dir: dir}}})
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	input <- "go"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 1 })
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	turns := func() (user, auto []sdktrace.ReadOnlySpan) {
		for _, sp := range spans.Ended() {
			if sp.Name() != "invoke_agent offstage" {
				continue
			}
			for _, kv := range sp.Attributes() {
				if kv.Key == "offstage.turn.autonomous" && kv.Value.AsBool() {
					auto = append(auto, sp)
				} else if kv.Key == "offstage.turn.autonomous" {
					user = append(user, sp)
				}
			}
		}
		return
	}
	waitFor(t, func() bool { _, auto := turns(); return len(auto) == 1 })
	cancel()
	<-ran
	user, auto := turns()
	tasks := map[string]string{} // span id → task id
	for _, sp := range spans.Ended() {
		if sp.Name() != "offstage.task shell" {
			continue
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == "offstage.task.id" {
				tasks[sp.SpanContext().SpanID().String()] = kv.Value.AsString()
			}
		}
	}
	if len(user) != 1 || len(user[0].Links()) != 0 || len(tasks) != 2 {
		t.Fatalf("user turns %d (links %v), shell task spans %v", len(user), user[0].Links(), tasks)
	}
	linked := map[string]bool{}
	for _, l := range auto[0].Links() {
		id := tasks[l.SpanContext.SpanID().String()]
		if id == "" || l.SpanContext.TraceID() != user[0].SpanContext().TraceID() {
			t.Errorf("the autonomous turn links to span %v, not a shell task span of the user's trace", l.SpanContext)
		}
		for _, kv := range l.Attributes {
			if kv.Key == "offstage.task.id" && kv.Value.AsString() == id {
				linked[id] = true
			}
		}
	}
	if len(linked) != 2 {
		t.Errorf("the autonomous turn links to %v, want both shells (%v) by task id", auto[0].Links(), tasks)
	}
}
