package agent_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
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

// TestOneToolCallRunsOnTheTurn (issue 35, item 6): a turn's only tool
// call ran on a goroutine of its own, started, woken and its stack grown
// again on every turn: half of a direct turn's CPU. It runs where the
// turn runs (the sink sees its call and its result from the same
// goroutine as the turn's start); two calls still run at once.
func TestOneToolCallRunsOnTheTurn(t *testing.T) {
	goroutine := func() string {
		var buf [64]byte
		return strings.Fields(string(buf[:runtime.Stack(buf[:], false)]))[1]
	}
	var mu sync.Mutex
	var ran []string // goroutine of each call
	where := tools.Define("ext__where", "Says nothing.", 0, func(context.Context, *task.View, struct{}) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, goroutine())
		return map[string]string{}, nil
	})
	calls := 0
	model := modelFunc(func(provider.Request) provider.Response {
		calls++
		if calls == 1 {
			return toolCall("ext__where", "{}")
		}
		return text("done")
	})
	s, err := agent.New(t.Context(), agent.Config{Model: model, ExtraTools: []*tools.Tool{where}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	var turn string
	sink := agent.SinkFunc(func(e agent.Event) {
		if e.Type == agent.ToolCallEvent {
			turn = goroutine()
		}
	})
	if _, err := s.Turn(t.Context(), "go", sink); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != turn {
		t.Errorf("the one call ran on goroutine %v, the turn on %s; want the turn's", ran, turn)
	}
}
