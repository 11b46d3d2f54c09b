package acpserver_test

import (
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
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
