package acpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
)

// A prompt's response carries the turn's tokens in ACP's usage and what
// the session spent, sub-agents included, under _meta.
func TestAPromptSaysWhatItSpent(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "general", "prompt": "look"}}], "usage": {"input_tokens": 1000, "output_tokens": 10, "cached_input_tokens": 800}},
		{"text": "Done.", "usage": {"input_tokens": 1100, "output_tokens": 20}}
	], "agents": {"general": [{"text": "Nothing here.", "usage": {"input_tokens": 300, "output_tokens": 30}}]}}`
	h := start(t, script, acpserver.Config{})
	id := h.session(t)
	r, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Usage; u == nil || u.InputTokens != 2100 || u.OutputTokens != 30 || u.TotalTokens != 2130 || u.CachedReadTokens == nil || *u.CachedReadTokens != 800 {
		t.Errorf("usage = %+v, want the turn's 2100 in (800 cached), 30 out", u)
	}
	b, _ := json.Marshal(r.Meta[acpserver.UsageMeta])
	var meta map[string]task.Usage
	want := task.Usage{InputTokens: 2400, OutputTokens: 60, CachedInputTokens: 800, ModelCalls: 3}
	if err := json.Unmarshal(b, &meta); err != nil || meta["session"] != want || meta["turn"].ModelCalls != 2 {
		t.Errorf("_meta %s = %s, want the session's %+v and the turn's 2 calls", acpserver.UsageMeta, b, want)
	}
}

// A budget reached ends the prompt as ACP's limits do, not as an internal
// error (an outsider's finding: -32603, and the turn's tokens lost): a
// token budget is max_tokens, a call budget max_turn_requests, each with
// the usage, and a last message names the budget.
func TestABudgetReachedEndsThePromptWithItsUsage(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "task_list", "input": {}}], "usage": {"input_tokens": 600, "output_tokens": 10}},
		{"text": "never made", "usage": {"input_tokens": 600, "output_tokens": 10}}
	]}`
	for _, tc := range []struct {
		budget agent.Budget
		stop   acp.StopReason
		says   string
	}{
		{agent.Budget{Tokens: 100}, acp.StopReasonMaxTokens, "⊘ session token budget of 100 reached after 1 call."},
		{agent.Budget{Calls: 1}, acp.StopReasonMaxTurnRequests, "⊘ session call budget of 1 reached after 1 call."},
	} {
		h := start(t, script, acpserver.Config{Agent: agent.Config{Budget: tc.budget}, AllowAll: true})
		id := h.session(t)
		r, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
		if err != nil {
			t.Fatalf("budget %+v: prompt = %v, want a stop reason", tc.budget, err)
		}
		if r.StopReason != tc.stop {
			t.Errorf("budget %+v: stop reason %q, want %q", tc.budget, r.StopReason, tc.stop)
		}
		if u := r.Usage; u == nil || u.InputTokens != 600 || u.OutputTokens != 10 {
			t.Errorf("budget %+v: usage = %+v, want the turn's 600 in, 10 out", tc.budget, u)
		}
		if _, ok := r.Meta[acpserver.UsageMeta]; !ok {
			t.Errorf("budget %+v: no _meta %s", tc.budget, acpserver.UsageMeta)
		}
		if got := strings.Join(h.lines(id), "\n"); !strings.Contains(got, tc.says) {
			t.Errorf("budget %+v: updates do not say %q:\n%s", tc.budget, tc.says, got)
		}
	}
}
