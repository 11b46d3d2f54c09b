package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/tools"
)

// TestNoPushTopLevelPushingSubAgents (issue 23, item 13): over MCP
// (Tools.NoPush) the top level's spawn_agent and tools promised a report
// "by itself"; they now say to wait for it. Its sub-agents, to whom
// results do come back (reflow), keep the promise.
func TestNoPushTopLevelPushingSubAgents(t *testing.T) {
	var mu sync.Mutex
	descs := map[string]map[string]string{} // agent → tool → description
	model := modelFunc(func(req provider.Request) provider.Response {
		mu.Lock()
		defer mu.Unlock()
		if descs[req.Agent] == nil {
			descs[req.Agent] = map[string]string{}
			for _, tl := range req.Tools {
				descs[req.Agent][tl.Name] = tl.Description
			}
		}
		if req.Agent == "" && len(req.Messages) == 1 {
			return toolCall("spawn_agent", `{"profile": "quick", "prompt": "say hi"}`)
		}
		return text("hi")
	})
	s, err := agent.New(t.Context(), agent.Config{Model: model, Profiles: testProfiles, NoContinuation: true,
		Tools: tools.Config{NoPush: true, Process: proc.Config{Dir: t.TempDir()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	top, sub := descs[""], descs["quick"]
	if d := top["spawn_agent"]; strings.Contains(d, "by itself when") || !strings.Contains(d, "task_wait waits for it and returns it") {
		t.Errorf("the top level's spawn_agent (NoPush) says:\n%s", d)
	}
	if d := top["bash"]; strings.Contains(d, "comes back to you by itself") {
		t.Errorf("the top level's bash (NoPush) says:\n%s", d)
	}
	if sub == nil {
		t.Fatal("the sub-agent made no model request")
	}
	for _, name := range []string{"bash", "spawn_agent"} {
		if d := sub[name]; !strings.Contains(d, "by itself when it finishes") {
			t.Errorf("the sub-agent's %s lost its promise:\n%s", name, d)
		}
	}
	var note string
	for _, tl := range s.Tools() {
		if tl.Name == "spawn_agent" {
			res, err := tl.Call(t.Context(), s.Table().View(""), []byte(`{"profile": "quick", "prompt": "again", "run_in_background": true}`))
			if err != nil {
				t.Fatal(err)
			}
			note = res.Text
		}
	}
	if strings.Contains(note, "will come back to you") || !strings.Contains(note, "task_wait") {
		t.Errorf("a background spawn_agent (NoPush) = %s", note)
	}
}

// TestSpawnAgentSchema (issue 23, item 14): profile listed the profiles in
// prose only; it is now an enum, and spawn_agent has an output schema
// with no null type in it.
func TestSpawnAgentSchema(t *testing.T) {
	defs, err := agent.ToolDefs(agent.Config{Model: modelFunc(func(provider.Request) provider.Response { return text("x") }), Profiles: testProfiles})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(defs, func(tl *tools.Tool) bool { return tl.Name == "spawn_agent" })
	if i < 0 {
		t.Fatal("no spawn_agent")
	}
	spawn := defs[i]
	if got := spawn.InputSchema.Properties["profile"].Enum; !slices.Equal(got, []any{"quick", "slow"}) {
		t.Errorf("profile enum = %v, want [quick slow]", got)
	}
	out, _ := json.Marshal(spawn.OutputSchema)
	in, _ := json.Marshal(spawn.InputSchema)
	if spawn.OutputSchema == nil || spawn.OutputSchema.Type != "object" || strings.Contains(string(out)+string(in), `"null"`) {
		t.Errorf("spawn_agent schemas: input %s, output %s", in, out)
	}
}

// TestSessionsShareSpawnAgentSchema (issue 35, item 6): every session
// built spawn_agent's schemas anew (cloned, then marshalled twice): most
// of what agent.New cost. Sessions with the same profiles share one.
func TestSessionsShareSpawnAgentSchema(t *testing.T) {
	ctx := context.Background()
	model := modelFunc(func(provider.Request) provider.Response { return text("x") })
	var schemas []*tools.Tool
	for range 2 {
		s, err := agent.New(ctx, agent.Config{Model: model, Profiles: testProfiles})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		i := slices.IndexFunc(s.Tools(), func(tl *tools.Tool) bool { return tl.Name == "spawn_agent" })
		if i < 0 {
			t.Fatal("no spawn_agent")
		}
		schemas = append(schemas, s.Tools()[i])
	}
	a, _ := schemas[0].InputJSON()
	b, _ := schemas[1].InputJSON()
	if schemas[0].InputSchema != schemas[1].InputSchema || schemas[0].OutputSchema != schemas[1].OutputSchema || &a[0] != &b[0] {
		t.Error("two sessions' spawn_agent have schemas of their own")
	}
}
