package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// u is one scripted call's usage: in input tokens (c of them cached)
// and out output tokens.
func u(in, out, c int64) task.Usage {
	return task.Usage{InputTokens: in, OutputTokens: out, CachedInputTokens: c, ModelCalls: 1}
}

// The top level starts "outer", which starts "inner", both in the
// foreground: each task counts its own calls and those below it, the
// session every call once, the turn its top-level calls.
func TestUsageAddsUpAcrossSubAgents(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "outer", "prompt": "dig"}}], "usage": {"input_tokens": 1000, "output_tokens": 10, "cached_input_tokens": 800}},
		{"text": "done", "usage": {"input_tokens": 1100, "output_tokens": 20, "cached_input_tokens": 1000}}
	], "agents": {
		"outer": [
			{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "inner", "prompt": "deeper"}}], "usage": {"input_tokens": 300, "output_tokens": 30}},
			{"text": "outer found it", "usage": {"input_tokens": 400, "output_tokens": 40, "cached_input_tokens": 300}}
		],
		"inner": [{"text": "inner found it", "usage": {"input_tokens": 50, "output_tokens": 5}}]
	}}`
	profiles := []agent.Profile{{Name: "outer", Description: "o"}, {Name: "inner", Description: "i"}}
	s := newSession(t, script, agent.Config{Profiles: profiles})
	rec := &recorder{}
	if _, err := s.Turn(t.Context(), "go", rec); err != nil {
		t.Fatal(err)
	}
	inner := u(50, 5, 0)
	outer := u(300, 30, 0).Add(u(400, 40, 300)).Add(inner)
	top := u(1000, 10, 800).Add(u(1100, 20, 1000))
	for id, want := range map[string]task.Usage{"agent:1": outer, "agent:2": inner} {
		info, err := s.Table().Info(id)
		if err != nil || info.Usage != want {
			t.Errorf("%s Usage = %+v, %v; want %+v", id, info.Usage, err, want)
		}
	}
	if got, want := s.Usage(), (agent.Usage{Total: top.Add(outer)}); got != want {
		t.Errorf("session Usage() = %+v, want %+v (every call once)", got, want)
	}
	var turn *task.Usage
	for _, e := range rec.events {
		if e.Type == agent.TurnEnd {
			turn = e.Usage
		}
	}
	if turn == nil || *turn != top {
		t.Errorf("TurnEnd Usage = %+v, want the top level's calls %+v", turn, top)
	}
}

// Through the OpenAI and Anthropic fakes, which report 11 input tokens (3
// cached) and 7 output tokens a call, in their own terms.
func TestUsageThroughTheWire(t *testing.T) {
	script, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "quick", "prompt": "answer"}}]},
		{"text": "done"}
	], "agents": {"quick": [{"text": "quick answer"}]}}`))
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
			s, err := agent.New(context.Background(), agent.Config{Model: model, Profiles: testProfiles,
				Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
				t.Fatal(err)
			}
			call := u(11, 7, 3)
			if info, _ := s.Table().Info("agent:1"); info.Usage != call {
				t.Errorf("agent:1 Usage = %+v, want one call's %+v", info.Usage, call)
			}
			if got, want := s.Usage().Total, call.Add(call).Add(call); got != want {
				t.Errorf("session total = %+v, want three calls' %+v", got, want)
			}
		})
	}
}

// A worker that would go on calling tools is stopped by its budget: the
// task fails with a *BudgetError naming the budget, keeps what it had
// said, and the calls after the budget are never made. spawn_agent's
// budget tightens the profile's and cannot widen it.
func TestSubAgentBudgetsEndTheRightTask(t *testing.T) {
	var turns []string
	for i := range 6 {
		turns = append(turns, `{"text": "found `+string(rune('A'+i))+`", "tool_calls": [{"name": "task_list", "input": {}}], "usage": {"input_tokens": 100, "output_tokens": 20}}`)
	}
	worker := "[" + strings.Join(turns, ",") + "]"
	for _, tc := range []struct {
		name    string
		profile agent.Budget
		input   string
		calls   int64
		err     string
		partial string
	}{
		{"profile tokens", agent.Budget{Tokens: 250}, `{}`, 3, "token budget of 250 reached after 3 calls", "found C"},
		{"spawn calls tighten", agent.Budget{Tokens: 250}, `{"budget_calls": 2}`, 2, "call budget of 2 reached after 2 calls", "found B"},
		{"spawn cannot widen", agent.Budget{Calls: 1}, `{"budget_calls": 5}`, 1, "call budget of 1 reached after 1 call", "found A"},
		{"spawn tokens", agent.Budget{}, `{"budget_tokens": 1}`, 1, "token budget of 1 reached after 1 call", "found A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := strings.TrimSuffix(tc.input, "}")
			if input != "{" {
				input += ","
			}
			input += `"profile": "worker", "prompt": "work"}`
			script := `{"turns": [
				{"tool_calls": [{"name": "spawn_agent", "input": ` + input + `}]},
				{"expect": "budget of", "text": "the worker ran out"}
			], "agents": {"worker": ` + worker + `}}`
			profiles := []agent.Profile{{Name: "worker", Description: "w", Tools: []string{"task_list"}, Budget: tc.profile}}
			s := newSession(t, script, agent.Config{Profiles: profiles})
			if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
				t.Fatal(err)
			}
			info, _ := s.Table().Info("agent:1")
			if info.State != task.Failed || info.Usage.ModelCalls != tc.calls {
				t.Errorf("agent:1 = %s after %d calls, want failed after %d", info.State, info.Usage.ModelCalls, tc.calls)
			}
			if info.EndedBy != task.ByLimit || !strings.Contains(info.EndReason, tc.err) {
				t.Errorf("agent:1 ended by %q (%q), want limit naming %q", info.EndedBy, info.EndReason, tc.err)
			}
			text := s.History()[2].Content[0].Text
			if !strings.Contains(text, tc.err) || !strings.Contains(text, `"answer":"`+tc.partial+`"`) {
				t.Errorf("spawn_agent result = %s, want the error %q and the partial answer %q", text, tc.err, tc.partial)
			}
			if got := s.Usage().Total.ModelCalls; got != tc.calls+2 {
				t.Errorf("session calls = %d, want %d (nothing past the budget)", got, tc.calls+2)
			}
		})
	}
}

// A sub-agent's budget binds what its own sub-agents spend: a child given
// a budget far past its spawner's (or none) stops once the spawner's is
// reached, naming whose budget it was, and the spawner stops with it (an
// outsider's finding: the child spent 3× its parent's cap, and ended
// completed).
func TestASubAgentsBudgetBindsItsSubAgents(t *testing.T) {
	var child []string
	for i := range 6 {
		child = append(child, `{"text": "step `+string(rune('A'+i))+`", "tool_calls": [{"name": "task_list", "input": {}}], "usage": {"input_tokens": 100, "output_tokens": 20}}`)
	}
	for _, spawn := range []string{`{"profile": "child", "prompt": "dig", "budget_tokens": 50000}`, `{"profile": "child", "prompt": "dig"}`} {
		script := `{"turns": [
			{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "parent", "prompt": "lead"}}]},
			{"expect": "budget of 250 reached", "text": "over"}
		], "agents": {
			"parent": [
				{"tool_calls": [{"name": "spawn_agent", "input": ` + spawn + `}]},
				{"text": "never asked"}
			],
			"child": [` + strings.Join(child, ",") + `]
		}}`
		profiles := []agent.Profile{{Name: "parent", Description: "p", Budget: agent.Budget{Tokens: 250}}, {Name: "child", Description: "c", Tools: []string{"task_list"}}}
		s := newSession(t, script, agent.Config{Profiles: profiles})
		if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
			t.Fatal(err)
		}
		kid, _ := s.Table().Info("agent:2")
		if kid.State != task.Failed || kid.Usage.ModelCalls != 3 || !strings.Contains(kid.EndReason, "agent:1's token budget of 250 reached after 4 calls") {
			t.Errorf("spawned with %s: agent:2 = %s after %d calls (%q), want failed after 3 by agent:1's token budget", spawn, kid.State, kid.Usage.ModelCalls, kid.EndReason)
		}
		lead, _ := s.Table().Info("agent:1")
		if lead.State != task.Failed || lead.Usage.ModelCalls != 4 || !strings.Contains(lead.EndReason, "token budget of 250 reached after 4 calls") {
			t.Errorf("agent:1 = %s after %d calls (%q), want failed after 4 (its own and its sub-agent's 3)", lead.State, lead.Usage.ModelCalls, lead.EndReason)
		}
	}
}

// spawn_agent's budget_seconds past what a time.Duration holds is refused:
// it wrapped around to a budget that was none (or a fraction of a second),
// which lifted the profile's.
func TestBudgetSecondsPastADurationIsRefused(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "worker", "prompt": "work", "budget_seconds": 9223372036854775807}}]},
		{"expect": "budget_seconds is at most 9223372036", "text": "refused"}
	], "agents": {"worker": [{"text": "ran"}]}}`
	profiles := []agent.Profile{{Name: "worker", Description: "w", Budget: agent.Budget{Time: time.Second}}}
	s := newSession(t, script, agent.Config{Profiles: profiles})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Table().Info("agent:1"); err == nil {
		t.Error("a sub-agent was spawned with a budget_seconds past a time.Duration")
	}
}

// ParseTokens refuses what is no count, and what would make a bound the
// user wrote no bound: NaN, a fraction of a token (it rounded to 0, no
// budget).
func TestParseTokens(t *testing.T) {
	for in, want := range map[string]int64{"200000": 200000, "200k": 200000, "1.5M": 1500000, "0": 0, " 12K ": 12000, "2.5": 3} {
		if got, err := agent.ParseTokens(in); err != nil || got != want {
			t.Errorf("ParseTokens(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, why := range map[string]string{"NaN": "not a token count", "nan": "not a token count", "Inf": "not a token count", "0x10": "not a token count", "": "not a token count",
		"0.4": "less than one token", "1e-9": "less than one token", "1e-400": "less than one token", "0.0001k": "less than one token",
		"-1": "negative", "-1e400": "negative", "1e400": "more tokens than", "9223372036854775807": "more tokens than"} {
		if got, err := agent.ParseTokens(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseTokens(%q) = %d, %v; want an error saying %q", in, got, err, why)
		}
	}
}

// The time budget: the worker thinks longer than it may.
func TestSubAgentTimeBudget(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "worker", "prompt": "work", "budget_seconds": 1}}]},
		{"expect": "time budget of 1s reached after 1 call", "text": "ok"}
	], "agents": {"worker": [
		{"text": "first look", "tool_calls": [{"name": "task_list", "input": {}}]},
		{"text": "never said", "delay_ms": 60000}
	]}}`
	profiles := []agent.Profile{{Name: "worker", Description: "w", Tools: []string{"task_list"}}}
	s := newSession(t, script, agent.Config{Profiles: profiles})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Table().Info("agent:1")
	if r.State != task.Failed {
		t.Errorf("agent:1 is %s, want failed", r.State)
	}
	if text := s.History()[2].Content[0].Text; !strings.Contains(text, `"answer":"first look"`) {
		t.Errorf("spawn_agent result = %s, want the partial answer", text)
	}
}

// A session budget stops autonomous turns and says so; the next user
// turn fails with it, naming it, and makes no call.
func TestSessionBudgetStopsAutonomousTurns(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e gate ]; do sleep 0.01; done", "run_in_background": true}}], "usage": {"input_tokens": 600}},
		{"text": "started", "usage": {"input_tokens": 600}},
		{"text": "never played"}
	]}`
	dir := t.TempDir()
	cfg := agent.Config{Settle: 10 * time.Millisecond, Budget: agent.Budget{Tokens: 1000}}
	cfg.Tools.Process.Dir = dir
	s := newSession(t, script, cfg)
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error)
	go func() { s.Run(ctx, input, rec); ran <- nil }()
	input <- "start"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 1 })
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return rec.count(agent.BudgetStop, true) == 1 })
	input <- "more"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 2 })
	cancel()
	<-ran
	if n := s.AutonomousTurns(); n != 0 {
		t.Errorf("%d autonomous turns, want none past the budget", n)
	}
	var stop, last agent.Event
	for _, e := range rec.events {
		switch e.Type {
		case agent.BudgetStop:
			stop = e
		case agent.TurnEnd:
			last = e
		}
	}
	var be *agent.BudgetError
	if !errors.As(stop.Err, &be) || be.Scope != agent.ScopeSession || be.Budget != agent.BudgetTokens {
		t.Errorf("BudgetStop Err = %v, want the session's token budget", stop.Err)
	}
	if !errors.Is(last.Err, agent.ErrBudget) || last.Error != "session token budget of 1k reached after 2 calls" {
		t.Errorf("the next user turn ended with %q, want the session budget's error", last.Error)
	}
	if got := s.Usage().Total.ModelCalls; got != 2 {
		t.Errorf("%d model calls, want 2", got)
	}
}

// A chain of autonomous turns is bounded apart from the session; a user
// turn starts a new chain.
func TestAutonomousBudgetStopsTheChain(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e gate1 ]; do sleep 0.01; done", "run_in_background": true}},
		                {"name": "bash", "input": {"command": "while [ ! -e gate2 ]; do sleep 0.01; done", "run_in_background": true}}]},
		{"text": "started"},
		{"expect": "gate1", "text": "one finished"},
		{"expect": "gate2", "text": "two reached me with the user's turn"}
	]}`
	dir := t.TempDir()
	cfg := agent.Config{Settle: 10 * time.Millisecond, AutonomousBudget: agent.Budget{Calls: 1}}
	cfg.Tools.Process.Dir = dir
	s := newSession(t, script, cfg)
	rec := &recorder{}
	input := make(chan string)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error)
	go func() { s.Run(ctx, input, rec); ran <- nil }()
	open := func(gate string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, gate), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	input <- "start"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 1 })
	open("gate1")
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, true) == 1 })
	open("gate2")
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range rec.events {
				if e.Type != agent.TaskEvent {
					t.Logf("%+v", e)
				}
			}
		}
	})
	waitFor(t, func() bool { return rec.count(agent.BudgetStop, true) == 1 })
	input <- "and?"
	waitFor(t, func() bool { return rec.count(agent.TurnEnd, false) == 2 })
	cancel()
	<-ran
	if n := s.AutonomousTurns(); n != 1 {
		t.Errorf("%d autonomous turns, want 1", n)
	}
	if got := s.Usage().Autonomous.ModelCalls; got != 1 {
		t.Errorf("autonomous calls = %d, want 1", got)
	}
	for _, e := range rec.events {
		if e.Type == agent.TurnEnd && e.Err != nil {
			t.Errorf("a turn failed: %v", e.Err)
		}
	}
}

// The model sees what a sub-agent spent: task_list's tokens, and
// task_inspect's usage.
func TestTheModelSeesASubAgentsUsage(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "worker", "prompt": "work"}}]},
		{"tool_calls": [{"name": "task_list", "input": {}}]},
		{"expect": "\"tokens\":120[,}]", "tool_calls": [{"name": "task_inspect", "input": {"task_id": "agent:1"}}]},
		{"expect": "\"usage\":\\{\"input_tokens\":100,\"output_tokens\":20,\"cached_input_tokens\":60,\"model_calls\":1\\}", "text": "seen"}
	], "agents": {"worker": [{"text": "done", "usage": {"input_tokens": 100, "output_tokens": 20, "cached_input_tokens": 60}}]}}`
	profiles := []agent.Profile{{Name: "worker", Description: "w"}}
	s := newSession(t, script, agent.Config{Profiles: profiles})
	if answer, err := s.Turn(t.Context(), "go", agent.Discard); err != nil || answer != "seen" {
		t.Fatalf("Turn() = %q, %v", answer, err)
	}
}

// TestATimeBudgetEndsTheForegroundShellByALimit (an outsider's finding):
// a sub-agent's time budget ended the shell it ran in the foreground
// "by the user" ("the turn that ran it in the foreground was
// cancelled"), though no one acted; a limit did.
func TestATimeBudgetEndsTheForegroundShellByALimit(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "worker", "prompt": "work", "budget_seconds": 1}}]},
		{"expect": "time budget of 1s reached after 1 call", "text": "ok"}
	], "agents": {"worker": [
		{"text": "sleeping", "tool_calls": [{"name": "bash", "input": {"command": "sleep 60"}}]},
		{"text": "never said"}
	]}}`
	profiles := []agent.Profile{{Name: "worker", Description: "w", Tools: []string{"bash"}}}
	s := newSession(t, script, agent.Config{Profiles: profiles})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Table().Done("shell:2")
	<-d
	shell, _ := s.Table().Info("shell:2")
	if shell.Owner != "agent:1" || shell.EndedBy != task.ByLimit || shell.EndReason != "agent:1's time budget of 1s was reached" {
		t.Errorf("the sub-agent's shell ended %q: %q (owner %s), want by a limit: agent:1's time budget of 1s was reached", shell.EndedBy, shell.EndReason, shell.Owner)
	}
	if a, _ := s.Table().Info("agent:1"); a.EndedBy != task.ByLimit {
		t.Errorf("the sub-agent ended %q: %q, want by a limit", a.EndedBy, a.EndReason)
	}
}
