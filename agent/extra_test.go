package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// toolsSeen is a model that records the tools each agent was offered and
// answers through the script it wraps.
type toolsSeen struct {
	provider.Model
	mu   sync.Mutex
	seen map[string][]string // agent ("" for the top level) → tool names
}

func (m *toolsSeen) Generate(ctx context.Context, req provider.Request, on func(provider.Event)) (provider.Response, error) {
	m.mu.Lock()
	for _, t := range req.Tools {
		if !slices.Contains(m.seen[req.Agent], t.Name) {
			m.seen[req.Agent] = append(m.seen[req.Agent], t.Name)
		}
	}
	m.mu.Unlock()
	return m.Model.Generate(ctx, req, on)
}

// TestExtraTools: Config.ExtraTools are offered to the top level and to
// the sub-agents their profile allows, run through Permit, and their
// results reach the model; a name that clashes is refused.
func TestExtraTools(t *testing.T) {
	type echoIn struct {
		Text string `json:"text"`
	}
	echo := tools.Define("ext__echo", "Echoes text.", 0, func(_ context.Context, _ *task.View, in echoIn) (any, error) {
		return map[string]string{"echoed": in.Text}, nil
	})
	echo.Safety = tools.Mutating
	script := `{"turns": [
		{"tool_calls": [{"name": "ext__echo", "input": {"text": "hello"}}]},
		{"expect": "\"echoed\":\"hello\"", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "all", "prompt": "go"}}, {"name": "spawn_agent", "input": {"profile": "bash-only", "prompt": "go"}}]},
		{"text": "done"}
	], "agents": {
		"all": [{"tool_calls": [{"name": "ext__echo", "input": {"text": "from all"}}]}, {"expect": "from all", "text": "ok"}],
		"bash-only": [{"tool_calls": [{"name": "ext__echo", "input": {"text": "from bash-only"}}]}, {"expect": "There is no tool", "text": "ok"}]
	}}`
	var mu sync.Mutex
	var asked []string
	m := &toolsSeen{seen: map[string][]string{}}
	cfg := agent.Config{
		ExtraTools: []*tools.Tool{echo},
		Profiles: []agent.Profile{
			{Name: "all", Description: "every tool"},
			{Name: "bash-only", Description: "bash", Tools: []string{"bash"}},
		},
		Permit: func(_ context.Context, c agent.ToolCall) error {
			mu.Lock()
			defer mu.Unlock()
			if c.Tool.Name == "ext__echo" {
				asked = append(asked, c.Profile+":"+string(c.Input))
			}
			return nil
		},
	}
	wrapped, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	m.Model = wrapped
	cfg.Model = m
	cfg.Tools.Process.Dir = t.TempDir()
	s, err := agent.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if answer, err := s.Turn(t.Context(), "go", agent.Discard); err != nil || answer != "done" {
		t.Fatalf("Turn() = %q, %v", answer, err)
	}
	m.mu.Lock()
	top, all, bashOnly := m.seen[""], m.seen["all"], m.seen["bash-only"]
	m.mu.Unlock()
	if !slices.Contains(top, "ext__echo") || !slices.Contains(all, "ext__echo") || slices.Contains(bashOnly, "ext__echo") {
		t.Errorf("tools offered: top %v, all %v, bash-only %v; want ext__echo for the first two only", top, all, bashOnly)
	}
	mu.Lock()
	got := strings.Join(asked, " ")
	mu.Unlock()
	if got != `:{"text": "hello"} all:{"text": "from all"}` {
		t.Errorf("Permit asked about ext__echo calls %q; want the top level's and the \"all\" sub-agent's", got)
	}
	if !slices.ContainsFunc(s.Tools(), func(t *tools.Tool) bool { return t.Name == "ext__echo" }) {
		t.Error("Session.Tools() lacks the extra tool")
	}
	defs, err := agent.ToolDefs(agent.Config{ExtraTools: []*tools.Tool{echo}})
	if err != nil || !slices.ContainsFunc(defs, func(t *tools.Tool) bool { return t.Name == "ext__echo" }) {
		t.Errorf("ToolDefs() = %d tools, %v; want ext__echo among them", len(defs), err)
	}

	clash := tools.Define("bash", "Not the real bash.", 0, func(context.Context, *task.View, echoIn) (any, error) { return nil, nil })
	for name, extra := range map[string][]*tools.Tool{"a built-in's name": {clash}, "twice": {echo, echo}, "nil": {nil}} {
		if _, err := agent.New(t.Context(), agent.Config{ExtraTools: extra}); err == nil {
			t.Errorf("ExtraTools %s: New did not refuse it", name)
		}
	}
}
