package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/anthropic"
	"github.com/offstage/offstage/provider/openai"
	"github.com/offstage/offstage/provider/providertest"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// profiles for the tests: "quick" answers at once, "slow" after a while,
// neither starts tasks, so task numbers are predictable.
var testProfiles = []agent.Profile{
	{Name: "quick", Description: "answers at once", System: "be quick\n" + providertest.Marker("quick")},
	{Name: "slow", Description: "takes its time", System: "be slow\n" + providertest.Marker("slow")},
}

func newSession(t *testing.T, script string, cfg agent.Config) *agent.Session {
	t.Helper()
	m, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = m
	if cfg.Profiles == nil {
		cfg.Profiles = testProfiles
	}
	if cfg.Tools.Process.Dir == "" {
		cfg.Tools.Process.Dir = t.TempDir()
	}
	s, err := agent.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return s
}

// recorder is a Sink that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []agent.Event
}

func (r *recorder) Event(e agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) count(typ agent.EventType, autonomous bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Type == typ && e.Autonomous == autonomous {
			n++
		}
	}
	return n
}

// mentions counts, in the whole history, the blocks that report the result
// of id: background results reflowed, and tool results of task_wait,
// task_inspect or a foreground tool that carry it.
func mentions(history []provider.Message, id string) (background, tool int) {
	bg := regexp.MustCompile(`<background-result task_id="` + regexp.QuoteMeta(id) + `"`)
	for _, m := range history {
		for _, b := range m.Content {
			switch {
			case b.Type == provider.Text && bg.MatchString(b.Text):
				if m.Role != provider.User || !strings.HasPrefix(b.Text, "[offstage] A background task finished") {
					panic("a background result is not framed as one")
				}
				background++
			case b.Type == provider.ToolResult && strings.Contains(b.Text, `"done":[{"task_id":"`+id+`"`):
				tool++
			}
		}
	}
	return background, tool
}

const endToEnd = `{
  "turns": [
    {"text": "Starting a quick helper.", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "quick", "prompt": "say hi", "run_in_background": true}}]},
    {"expect": "agent:1", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "slow", "prompt": "take your time", "run_in_background": true}}]},
    {"expect": "agent:2", "tool_calls": [{"name": "bash", "input": {"command": "echo from the shell", "run_in_background": true}}]},
    {"expect": "shell:3", "text": "While they run, let me think.", "tool_calls": [{"name": "task_wait", "input": {"task_ids": ["agent:1"], "timeout_seconds": 10}}]},
    {"tool_calls": [{"name": "task_cancel", "input": {"task_id": "agent:2"}}]},
    {"expect": "Cancellation requested", "text": "Done for now."},
    {"text": "Anything that finished has been reported."}
  ],
  "agents": {
    "quick": [{"text": "hi there", "delay_ms": 300}],
    "slow": [{"text": "finally", "delay_ms": 100000}]
  }
}`

func TestEndToEndEveryResultReachesTheHistoryOnce(t *testing.T) {
	checkEndToEnd(t, newSession(t, endToEnd, agent.Config{NoContinuation: true}))
}

// The same flow with the model behind a real wire format: the session talks
// to a fake OpenAI or Anthropic server through the provider, and the
// server's answers come from the same script.
func TestEndToEndThroughTheWire(t *testing.T) {
	script, err := scripted.Parse([]byte(endToEnd))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		endpoint providertest.Endpoint
		connect  func(url string) (provider.Model, error)
	}{
		"openai": {providertest.OpenAI, func(url string) (provider.Model, error) {
			return openai.New(openai.Config{Model: "fake", APIKey: "k", BaseURL: url})
		}},
		"anthropic": {providertest.Anthropic, func(url string) (provider.Model, error) {
			return anthropic.New(anthropic.Config{Model: "fake", APIKey: "k", BaseURL: url})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			srv := tc.endpoint(script, providertest.Options{Key: "k"})
			defer srv.Close()
			model, err := tc.connect(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			s, err := agent.New(context.Background(), agent.Config{Model: model, Profiles: testProfiles, NoContinuation: true,
				Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			checkEndToEnd(t, s)
		})
	}
}

func checkEndToEnd(t *testing.T, s *agent.Session) {
	t.Helper()
	rec := &recorder{}
	answer, err := s.Turn(t.Context(), "go", rec)
	if err != nil || answer != "Done for now." {
		t.Fatalf("Turn() = %q, %v", answer, err)
	}
	// Wait for the cancelled agent and the shell to finish, then a second
	// turn reflows whatever is left.
	for _, id := range []string{"agent:2", "shell:3"} {
		done, err := s.Table().View("").Done(id)
		if err != nil {
			t.Fatal(err)
		}
		<-done
	}
	if _, err := s.Turn(t.Context(), "anything else?", rec); err != nil {
		t.Fatal(err)
	}
	history := s.History()
	for _, id := range []string{"agent:1", "agent:2", "shell:3"} {
		if bg, tool := mentions(history, id); bg+tool != 1 {
			t.Errorf("%s reached the history %d times as a background result and %d as a tool result, want once in all", id, bg, tool)
		}
	}
	// The slow helper is still running when the model waits for it, so
	// the wait takes its result; the cancelled one is reflowed.
	if _, tool := mentions(history, "agent:1"); tool != 1 {
		t.Error("agent:1 was not taken by task_wait")
	}
	var canceled bool
	for _, m := range history {
		for _, b := range m.Content {
			canceled = canceled || strings.Contains(b.Text, `task_id="agent:2" label="slow: take your time" status="canceled"`)
		}
	}
	if !canceled {
		t.Error("the cancelled sub-agent is not reported canceled")
	}
	if n := rec.count(agent.ToolCallEvent, false); n != 5 {
		t.Errorf("%d tool call events, want 5", n)
	}
}

// Both shells wait for one gate the test opens once they run, so they
// finish together, well within the settle window: with fixed sleeps
// (0.2 s and 0.25 s, a 200 ms window) a busy machine split them into two
// turns.
func TestActiveContinuationRunsOneAutonomousTurn(t *testing.T) {
	dir := t.TempDir()
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e gate ]; do sleep 0.01; done; echo one", "run_in_background": true}},
		                {"name": "bash", "input": {"command": "while [ ! -e gate ]; do sleep 0.01; done; echo two", "run_in_background": true}}]},
		{"text": "Both started; I will report when they finish."},
		{"expect": "(?s)background-result.*background-result", "text": "Both finished: one and two."}
	]}`
	cfg := agent.Config{Settle: 2 * time.Second}
	cfg.Tools.Process.Dir = dir
	s := newSession(t, script, cfg)
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	input <- "start two things"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 1 })
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The one autonomous turn takes both results, or its script fails:
	// none is left for a second one.
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, true) == 1 })
	cancel()
	<-ran
	if n := s.AutonomousTurns(); n != 1 {
		t.Fatalf("%d autonomous turns, want exactly 1 with both results batched", n)
	}
	h := s.History()
	if last := h[len(h)-1]; last.TextOf() != "Both finished: one and two." {
		t.Errorf("last message = %+v", last)
	}
	if rec.count(agent.TaskEvent, false) == 0 {
		t.Error("no task events were forwarded")
	}
}

// Each shell waits for a gate the test opens when the user turn that
// started it has ended: "echo one" finishing before that turn's second
// model request was reflowed into it, and the autonomous turn never came
// (a loaded run waited 10 s for it).
func TestAutonomousTurnsStopAtTheCap(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e gate1 ]; do sleep 0.01; done; echo one", "run_in_background": true}}]},
		{"text": "started one"},
		{"text": "one finished"},
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e gate2 ]; do sleep 0.01; done; echo two", "run_in_background": true}}]},
		{"text": "started two"},
		{"expect": "echo two|two", "text": "two was reflowed into this user turn"}
	]}`
	dir := t.TempDir()
	open := func(gate string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, gate), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := agent.Config{MaxAutonomousTurns: 1, Settle: 50 * time.Millisecond}
	cfg.Tools.Process.Dir = dir
	s := newSession(t, script, cfg)
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	input <- "first"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 1 })
	open("gate1")
	waitFor(t, func() bool { return s.AutonomousTurns() == 1 && rec.count(agent.TurnEnd, true) == 1 })
	input <- "second"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 2 })
	open("gate2")
	done, _ := s.Table().View("").Done("shell:2")
	<-done
	time.Sleep(200 * time.Millisecond) // past the settle window: no autonomous turn may start
	if n := s.AutonomousTurns(); n != 1 {
		t.Errorf("%d autonomous turns, want 1 (the cap)", n)
	}
	input <- "third"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 3 })
	cancel()
	<-ran
	if bg, _ := mentions(s.History(), "shell:2"); bg != 1 {
		t.Errorf("shell:2 reflowed %d times, want once, into the third user turn", bg)
	}
}

func TestNoAutonomousTurnAfterClose(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 0.3", "run_in_background": true}}]},
		{"text": "started"}
	]}`
	s := newSession(t, script, agent.Config{Settle: 10 * time.Millisecond})
	input := make(chan string)
	ran := make(chan struct{})
	go func() { s.Run(t.Context(), input, agent.Discard); close(ran) }()
	input <- "go"
	waitFor(t, func() bool { return len(s.History()) == 4 })
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	close(input)
	<-ran
	if n := s.AutonomousTurns(); n != 0 {
		t.Errorf("%d autonomous turns after Close, want 0", n)
	}
}

func TestCancellingATurnIsPromptAndSparesBackgroundWork(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}}]},
		{"text": "thinking very hard", "delay_ms": 100000}
	]}`
	s := newSession(t, script, agent.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel() // the user's Ctrl-C, mid-response
	}()
	start := time.Now()
	_, err := s.Turn(ctx, "go", agent.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Turn() = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Turn returned %v after the cancel", d)
	}
	if info, _ := s.Table().Info("shell:1"); info.State.String() != "running" {
		t.Errorf("the background shell is %v after the turn was cancelled, want running", info.State)
	}
}

func TestCancelTurnStopsOnlyTheTurn(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}}]},
		{"text": "thinking very hard", "delay_ms": 100000}
	]}`
	s := newSession(t, script, agent.Config{})
	if s.CancelTurn() {
		t.Error("CancelTurn() with no turn running = true")
	}
	go func() {
		waitFor(t, func() bool { return len(s.History()) >= 3 })
		s.CancelTurn()
	}()
	if _, err := s.Turn(t.Context(), "go", agent.Discard); !errors.Is(err, agent.ErrTurnCanceled) {
		t.Errorf("Turn() = %v, want ErrTurnCanceled", err)
	}
	if info, _ := s.Table().Info("shell:1"); info.State.String() != "running" {
		t.Errorf("the background shell is %v, want running", info.State)
	}
}

func TestToolMistakesGoBackToTheModel(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "no_such_tool", "input": {}}, {"name": "spawn_agent", "input": {"profile": "nobody", "prompt": "x"}}]},
		{"expect": "There is no tool ..no_such_tool", "text": "ok"}
	]}`
	s := newSession(t, script, agent.Config{})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	h := s.History()
	results := h[2].Content
	if len(results) != 2 || !results[0].IsError || !results[1].IsError || !strings.Contains(results[1].Text, "the profiles are: quick, slow") {
		t.Errorf("tool results = %+v", results)
	}
}

func TestIterationCap(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "task_list", "input": {}}]},
		{"tool_calls": [{"name": "task_list", "input": {}}]},
		{"tool_calls": [{"name": "task_list", "input": {}}]}
	]}`
	s := newSession(t, script, agent.Config{MaxIterations: 2})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); !errors.Is(err, agent.ErrIterationCap) {
		t.Errorf("Turn() = %v, want ErrIterationCap", err)
	}
}

func TestForegroundSubAgentAnswersAndTraces(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "lister", "prompt": "list your tasks"}}]},
		{"expect": "nothing running", "text": "The helper says nothing is running."}
	], "agents": {"lister": [
		{"tool_calls": [{"name": "task_list", "input": {}}]},
		{"text": "nothing running"}
	]}}`
	profiles := []agent.Profile{{Name: "lister", Description: "lists", Tools: []string{"task_list"}}}
	s := newSession(t, script, agent.Config{Profiles: profiles})
	answer, err := s.Turn(t.Context(), "go", agent.Discard)
	if err != nil || answer != "The helper says nothing is running." {
		t.Fatalf("Turn() = %q, %v", answer, err)
	}
	if d := s.Table().View("").Drain(); d != nil {
		t.Errorf("a foreground sub-agent's result was left for reflow: %v", d)
	}
	if got := s.History()[2].Content[0].Text; !strings.Contains(got, `"trace":["task_list {}"]`) {
		t.Errorf("spawn_agent result = %s, want the sub-agent's trace", got)
	}
	p, err := s.Table().Peek("agent:1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalBlocks != 4 || p.Blocks[1].Tool != "task_list" {
		t.Errorf("sub-agent history = %+v", p.Blocks)
	}
}

func TestSubAgentToolsAndNesting(t *testing.T) {
	var seen [][]string
	var mu sync.Mutex
	model := modelFunc(func(req provider.Request) provider.Response {
		var names []string
		for _, t := range req.Tools {
			names = append(names, t.Name)
		}
		mu.Lock()
		seen = append(seen, names)
		mu.Unlock()
		if len(req.Messages) == 1 && req.Agent != "leaf" {
			// spawn one level down
			return toolCall("spawn_agent", `{"profile": "`+map[string]string{"": "mid", "mid": "leaf"}[req.Agent]+`", "prompt": "go"}`)
		}
		return text("done")
	})
	s, err := agent.New(context.Background(), agent.Config{Model: model, Profiles: []agent.Profile{
		{Name: "mid", Description: "middle"}, {Name: "leaf", Description: "leaf", Tools: []string{"bash", "task_list", "spawn_agent"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	has := func(names []string, n string) bool {
		return strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ")
	}
	if !has(seen[0], "spawn_agent") || !has(seen[0], "task_input") {
		t.Errorf("top level tools = %v", seen[0])
	}
	if !has(seen[1], "spawn_agent") {
		t.Errorf("depth-1 sub-agent tools = %v, want spawn_agent", seen[1])
	}
	if has(seen[2], "spawn_agent") || !has(seen[2], "bash") || has(seen[2], "task_wait") {
		t.Errorf("depth-2 sub-agent tools = %v, want its profile's, without spawn_agent", seen[2])
	}
}

// modelFunc is a Model made of a function of the request.
type modelFunc func(provider.Request) provider.Response

func (f modelFunc) Generate(_ context.Context, req provider.Request, _ func(provider.Event)) (provider.Response, error) {
	return f(req), nil
}

func toolCall(name, input string) provider.Response {
	return provider.Response{StopReason: provider.ToolCalls, Message: provider.Message{Role: provider.Assistant, Content: []provider.Block{
		{Type: provider.ToolUse, ToolCallID: "c1", ToolName: name, Input: []byte(input)},
	}}}
}

func text(s string) provider.Response {
	return provider.Response{StopReason: provider.EndTurn, Message: provider.Message{Role: provider.Assistant, Content: []provider.Block{{Type: provider.Text, Text: s}}}}
}

func TestHistoryGuardBoundsTheConversation(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "seq 1 20000"}}]},
		{"tool_calls": [{"name": "bash", "input": {"command": "seq 1 20000"}}]},
		{"tool_calls": [{"name": "bash", "input": {"command": "seq 1 20000"}}]},
		{"text": "done"}
	]}`
	s := newSession(t, script, agent.Config{HistoryBytes: 12 << 10, Tools: tools.Config{}})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	total, cut := 0, 0
	for _, m := range s.History() {
		for _, b := range m.Content {
			total += len(b.Text) + len(b.Input)
			if strings.HasPrefix(b.Text, "[cut to keep the conversation within its budget") {
				cut++
			}
		}
	}
	if total > 12<<10 || cut == 0 {
		t.Errorf("history holds %d bytes with %d cuts, want at most 12 KiB", total, cut)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBackgroundSubAgentResultCarriesItsTrace(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "lister", "prompt": "look around", "run_in_background": true}}]},
		{"text": "started"},
		{"expect": "trace \\(its last tool calls\\):\n- task_list \\{\\}", "text": "it looked"}
	], "agents": {"lister": [
		{"delay_ms": 300, "tool_calls": [{"name": "task_list", "input": {}}]},
		{"text": "nothing here"}
	]}}`
	// The sub-agent takes a while, so its result arrives after the first
	// turn and is reflowed into the second.
	s := newSession(t, script, agent.Config{NoContinuation: true, Profiles: []agent.Profile{{Name: "lister", Description: "lists"}}})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Table().View("").Done("agent:1")
	<-done
	if answer, err := s.Turn(t.Context(), "and?", agent.Discard); err != nil || answer != "it looked" {
		t.Errorf("Turn() = %q, %v", answer, err)
	}
}

func TestANoticeWakesAnIdleSessionOnceAndIsNotAResult(t *testing.T) {
	script := `{"turns": [
		{"text": "nothing to do"},
		{"expect": "(?s)has something to tell you.*background-notice task_id=\"custom:1\" label=\"watcher\" kind=\"test\">\nsaw ERROR", "text": "I saw the notice."},
		{"expect": "background-result task_id=\"custom:1\"", "text": "And now its result."}
	]}`
	s := newSession(t, script, agent.Config{Settle: 10 * time.Millisecond, NoticeSettle: -1})
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	input <- "hello"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 1 })
	release := make(chan struct{})
	_, err := s.Table().View("").Spawn(task.Spec{Kind: "custom", Label: "watcher"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.Notify("test", "saw ERROR")
		<-release
		return "finished", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, true) == 1 })
	close(release)
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, true) == 2 })
	cancel()
	<-ran
	if bg, _ := mentions(s.History(), "custom:1"); bg != 1 {
		t.Errorf("custom:1's result reached the history %d times, want once", bg)
	}
	var notices int
	for _, e := range rec.events {
		if e.Type == agent.Reflow && len(e.NoticeIDs) == 1 && e.NoticeIDs[0] == "custom:1" && len(e.TaskIDs) == 0 {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d reflows of the notice alone, want 1", notices)
	}
}

// TestAWatchWakesAnIdleSession: a job printing ERROR lines among 100k
// others notifies its owner with the matches, within the caps, and the
// idle session takes an autonomous turn on the notice.
func TestAWatchWakesAnIdleSession(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "awk 'BEGIN { for (i = 1; i <= 10; i++) printf \"line %d\\nERROR %d0000\\n\", i, i }'; sleep 2", "run_in_background": true, "notify_on": "^ERROR"}}]},
		{"text": "Started the job; I will hear of errors."},
		{"expect": "(?s)background-notice task_id=\"shell:1\".*kind=\"watch\">\nshell:1 printed 10 lines matching \"\\^ERROR\":\nERROR 10000\nERROR 20000", "text": "Errors at every ten thousand."},
		{"expect": "background-result task_id=\"shell:1\"", "text": "The job finished."}
	]}`
	s := newSession(t, script, agent.Config{Settle: 10 * time.Millisecond, NoticeSettle: -1})
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	input <- "run the job and tell me about errors"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, true) == 2 })
	cancel()
	<-ran
	h := s.History()
	if got := h[len(h)-1].TextOf(); got != "The job finished." {
		t.Errorf("last message %q", got)
	}
	notices := 0
	for _, m := range h {
		for _, b := range m.Content {
			notices += strings.Count(b.Text, "<background-notice")
		}
	}
	if notices != 1 {
		t.Errorf("%d notices in the history, want 1", notices)
	}
}

// TestInTurnCoversTheResultsATurnTook: from the moment an autonomous turn
// takes the finished results (they count as delivered; its Reflow event)
// until it ends, InTurn says a turn holds the session. offstage run's
// one-shot wait saw the results delivered and no TurnStart yet, took the
// session for settled, and interrupted the turn (CI, under load).
func TestInTurnCoversTheResultsATurnTook(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo done", "run_in_background": true}}]},
		{"text": "Started."},
		{"text": "It finished."}
	]}`
	s := newSession(t, script, agent.Config{})
	var mu sync.Mutex
	seen := map[agent.EventType][]bool{}
	sink := agent.SinkFunc(func(e agent.Event) {
		if e.Type == agent.Reflow || e.Type == agent.TurnStart || e.Type == agent.TurnEnd {
			mu.Lock()
			seen[e.Type] = append(seen[e.Type], s.InTurn())
			mu.Unlock()
		}
	})
	input := make(chan string, 1)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, sink); close(ran) }()
	input <- "start it"
	waitFor(t, func() bool { return s.AutonomousTurns() == 1 && !s.InTurn() })
	cancel()
	<-ran
	mu.Lock()
	defer mu.Unlock()
	for typ, got := range seen {
		for i, in := range got {
			if !in {
				t.Errorf("%s event %d: InTurn() = false, want true while the turn holds the session", typ, i)
			}
		}
	}
	if len(seen[agent.Reflow]) != 1 || len(seen[agent.TurnEnd]) != 2 {
		t.Errorf("events seen: %v", seen)
	}
	if s.InTurn() {
		t.Error("InTurn() after every turn ended")
	}
}

// TestRunActsOnAReadyTokenAnEndedRunTook (an outsider's finding): a
// result that finished while no one listened leaves one ready token. A
// Run whose input had closed could take it and return (the closed input
// and the token were both ready: select picked either), and the next
// Run then never woke for the result (under offstage serve, an attach
// waited for another task's end). Twenty Runs on closed input each pick
// one way at random; the next Run must still deliver the result.
func TestRunActsOnAReadyTokenAnEndedRunTook(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo done", "run_in_background": true}}]},
		{"text": "started"},
		{"expect": "background-result", "text": "it finished: done"}
	]}`
	s := newSession(t, script, agent.Config{Settle: time.Millisecond})
	if _, err := s.Turn(t.Context(), "start it", agent.Discard); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Table().View("").Done("shell:1")
	<-done
	closed := make(chan string)
	close(closed)
	for range 20 {
		s.Run(t.Context(), closed, agent.Discard)
	}
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, rec); close(ran) }()
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, true) == 1 })
	cancel()
	<-ran
	if h := s.History(); h[len(h)-1].TextOf() != "it finished: done" {
		t.Errorf("last message = %+v, want the autonomous turn's", h[len(h)-1])
	}
}
