package acpserver_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
)

// titles returns the titles of the permission requests so far.
func (c *client) titles() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, p := range c.asked {
		title := "(no title)"
		if p.ToolCall.Title != nil {
			title = *p.ToolCall.Title
		}
		out = append(out, title)
	}
	return out
}

// awaitAsked waits until n permission requests have arrived.
func (h *harness) awaitAsked(t *testing.T, n int) []string {
	t.Helper()
	h.client.await(t, "permission request "+string(rune('0'+n))+" arrives", func([]acp.SessionNotification) bool {
		return len(h.client.asked) >= n // the lock is held
	})
	return h.client.titles()
}

func titleOf(p acp.RequestPermissionRequest) string {
	if p.ToolCall.Title == nil {
		return ""
	}
	return *p.ToolCall.Title
}

// heldModel holds the sub-agents' model calls until open is closed.
type heldModel struct {
	provider.Model
	open chan struct{}
}

func (m heldModel) Generate(ctx context.Context, req provider.Request, on func(provider.Event)) (provider.Response, error) {
	if req.Agent != "" {
		select {
		case <-m.open:
		case <-ctx.Done():
			return provider.Response{}, ctx.Err()
		}
	}
	return m.Model.Generate(ctx, req, on)
}

// TestSubAgentCallsAskWhileIdle: a background sub-agent's bash, after
// the prompt that started it ended, reaches the client as a permission
// request naming the sub-agent, with a card of its own; allowed, it runs,
// and the card ends when the sub-agent moves on.
func TestSubAgentCallsAskWhileIdle(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "general", "prompt": "list files", "run_in_background": true}}]},
		{"expect": "agent:1", "text": "Started."},
		{"expect": "background-result(.|\n)*listed: from the sub-agent", "text": "Noted."}
	], "agents": {"general": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo from the sub-agent"}}]},
		{"expect": "from the sub-agent", "text": "listed: from the sub-agent"}
	]}}`))
	if err != nil {
		t.Fatal(err)
	}
	held := heldModel{Model: m, open: make(chan struct{})}
	h := start(t, "", acpserver.Config{Agent: agent.Config{Model: held}})
	id := h.session(t)
	if got := h.prompt(t, id, "go"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s", got)
	}
	if got := h.client.titles(); len(got) != 1 || got[0] != "Sub-agent general: list files" {
		t.Fatalf("asked during the prompt: %q, want the spawn_agent call only", got)
	}
	close(held.open) // no prompt runs now
	got := h.awaitAsked(t, 2)
	if want := "agent:1 (general) wants to run: echo from the sub-agent"; got[1] != want {
		t.Errorf("the sub-agent's request is titled %q, want %q", got[1], want)
	}
	h.client.mu.Lock()
	req := h.client.asked[1]
	h.client.mu.Unlock()
	var names []string
	for _, o := range req.Options {
		names = append(names, o.Name)
	}
	if all := strings.Join(names, " | "); len(req.Options) != 4 || !strings.Contains(all, "for agent:1") || !strings.Contains(all, "in this session") {
		t.Errorf("the sub-agent's options: %s; want allow once, always for agent:1, always in this session, reject", all)
	}
	h.client.await(t, "the autonomous turn ends", func(us []acp.SessionNotification) bool { return has(lines(us, id), "Noted.") })
	ls := h.lines(id)
	for _, want := range []string{
		`tool_call pending execute "agent:1 (general) wants to run: echo from the sub-agent"`,
		"tool_call_update in_progress Allowed: agent:1 runs it",
		"tool_call_update completed Ran; its result went to agent:1.",
	} {
		if !has(ls, want) {
			t.Errorf("no update %q; all:\n%s", want, strings.Join(ls, "\n"))
		}
	}
}

// TestSubAgentRejectionIsItsToolError: rejecting a sub-agent's call
// gives the sub-agent an error result it acts on; its card fails.
func TestSubAgentRejectionIsItsToolError(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "general", "prompt": "list files", "run_in_background": true}}]},
		{"expect": "agent:1", "text": "Started."},
		{"expect": "background-result(.|\n)*I was not allowed", "text": "Noted."}
	], "agents": {"general": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo from the sub-agent"}}]},
		{"expect": "not run: the user rejected this call; do not retry it as it was: take another way, or report back", "text": "I was not allowed to list files."}
	]}}`
	h := start(t, script, acpserver.Config{})
	// The sub-agent's call is rejected only once the prompted turn has
	// ended: its result must come back in an autonomous turn, and a
	// sub-agent that finished before the top level's second model call
	// would have it reflowed into that call instead.
	prompted := make(chan struct{})
	h.client.choose = func(p acp.RequestPermissionRequest) acp.PermissionOptionId {
		if strings.HasPrefix(titleOf(p), "agent:") {
			select {
			case <-prompted:
			case <-time.After(20 * time.Second):
			}
			return "reject"
		}
		return "allow_once"
	}
	id := h.session(t)
	h.prompt(t, id, "go")
	close(prompted)
	h.client.await(t, "the autonomous turn ends", func(us []acp.SessionNotification) bool { return has(lines(us, id), "Noted.") })
	if got := h.client.titles(); len(got) != 2 || got[1] != "agent:1 (general) wants to run: echo from the sub-agent" {
		t.Errorf("asked %q", got)
	}
	if ls := h.lines(id); !has(ls, "tool_call_update failed Not run: the user rejected this call") {
		t.Errorf("the rejected call's card:\n%s", strings.Join(ls, "\n"))
	}
}

// queuedLog is a log handler that keeps the agents whose permission
// requests were queued behind another, in order.
type queuedLog struct{ c *queuedAgents }

type queuedAgents struct {
	mu      sync.Mutex
	agents  []string
	changed chan struct{}
}

func (q queuedLog) Enabled(context.Context, slog.Level) bool { return true }
func (q queuedLog) WithAttrs([]slog.Attr) slog.Handler       { return q }
func (q queuedLog) WithGroup(string) slog.Handler            { return q }
func (q queuedLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "permission request queued") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "agent" {
			q.c.mu.Lock()
			q.c.agents = append(q.c.agents, a.Value.String())
			close(q.c.changed)
			q.c.changed = make(chan struct{})
			q.c.mu.Unlock()
		}
		return true
	})
	return nil
}

// awaitOther waits until a sub-agent other than self was queued, or
// stop is closed.
func (q *queuedAgents) awaitOther(self string, stop <-chan struct{}) bool {
	deadline := time.After(20 * time.Second)
	for {
		q.mu.Lock()
		found := slices.ContainsFunc(q.agents, func(a string) bool { return a != "" && a != self })
		changed := q.changed
		q.mu.Unlock()
		if found {
			return true
		}
		select {
		case <-changed:
		case <-stop:
			return false
		case <-deadline:
			return false
		}
	}
}

// TestSubAgentRequestsAreOneAtATime: two background sub-agents asking at
// once get two dialogs, the second only after the first is answered.
func TestSubAgentRequestsAreOneAtATime(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [
			{"name": "spawn_agent", "input": {"profile": "general", "prompt": "one", "run_in_background": true}},
			{"name": "spawn_agent", "input": {"profile": "general", "prompt": "two", "run_in_background": true}}]},
		{"text": "Started."},
		{"text": "Noted."},
		{"text": "Noted again."}
	], "agents": {"general": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo from a sub-agent"}}]},
		{"expect": "from a sub-agent", "text": "done"}
	]}}`
	m, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	held := heldModel{Model: m, open: make(chan struct{})} // both exist before either asks
	queued := &queuedAgents{changed: make(chan struct{})}
	h := start(t, "", acpserver.Config{Agent: agent.Config{Model: held}, Logger: slog.New(queuedLog{queued})})
	var mu sync.Mutex
	open, maxOpen := 0, 0
	var order []string
	overlap := make(chan struct{}) // closed when a second request is open at once
	h.client.choose = func(p acp.RequestPermissionRequest) acp.PermissionOptionId {
		mu.Lock()
		open++
		maxOpen = max(maxOpen, open)
		if open == 2 {
			close(overlap)
		}
		self, first := "", false
		if strings.HasPrefix(titleOf(p), "agent:") {
			self = strings.Fields(titleOf(p))[0]
			order = append(order, self)
			first = len(order) == 1
		}
		mu.Unlock()
		if first && !queued.awaitOther(self, overlap) { // hold it until the other sub-agent waits behind it
			t.Error("the other sub-agent's request was not queued behind the open one")
		}
		mu.Lock()
		open--
		mu.Unlock()
		return "allow_once"
	}
	id := h.session(t)
	h.prompt(t, id, "go")
	close(held.open)
	h.awaitAsked(t, 4)
	h.client.await(t, "both sub-agents' cards end", func(us []acp.SessionNotification) bool {
		n := 0
		for _, l := range lines(us, id) {
			if strings.HasPrefix(l, "tool_call_update completed Ran; its result went to agent:") {
				n++
			}
		}
		return n == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if maxOpen != 1 {
		t.Errorf("%d permission requests were open at once, want 1", maxOpen)
	}
	if len(order) != 2 || order[0] == order[1] {
		t.Errorf("sub-agents asked in order %q; want each once", order)
	}
}

// TestInvalidCallIsRefusedWithoutAsking: a spawn_agent whose arguments do
// not fit its schema is refused before the user is asked.
func TestInvalidCallIsRefusedWithoutAsking(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "general", "prompt": "list files", "bogus": 1}}]},
		{"expect": "spawn_agent has no parameter", "text": "I will fix that."}
	]}`
	h := start(t, script, acpserver.Config{})
	id := h.session(t)
	if got := h.prompt(t, id, "go"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s", got)
	}
	if got := h.client.titles(); len(got) != 0 {
		t.Errorf("asked about %q, want nothing", got)
	}
	if ls := h.lines(id); !has(ls, "tool_call_update failed spawn_agent has no parameter \"bogus\"") {
		t.Errorf("the refused call's card:\n%s", strings.Join(ls, "\n"))
	}
}

// TestAlwaysAllowScopes: "always" for a sub-agent covers that sub-agent
// only; "always" at the top level covers the session's sub-agents too.
func TestAlwaysAllowScopes(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "a", "prompt": "first"}}]},
		{"expect": "done", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "a", "prompt": "second"}}]},
		{"expect": "done", "tool_calls": [{"name": "bash", "input": {"command": "echo top"}}]},
		{"expect": "top", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "a", "prompt": "third"}}]},
		{"expect": "done", "text": "finished"}
	], "agents": {"a": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo one"}}]},
		{"expect": "one", "tool_calls": [{"name": "bash", "input": {"command": "echo two"}}]},
		{"expect": "two", "text": "done"}
	]}}`
	h := start(t, script, acpserver.Config{Agent: agent.Config{Profiles: []agent.Profile{{Name: "a", Description: "does things"}}}})
	h.client.choose = func(p acp.RequestPermissionRequest) acp.PermissionOptionId {
		switch titleOf(p) {
		case "agent:1 (a) wants to run: echo one":
			return "allow_always_agent"
		case "Run: echo top":
			return "allow_always"
		}
		return "allow_once"
	}
	id := h.session(t)
	if got := h.prompt(t, id, "go"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines(id), "\n"))
	}
	want := []string{
		"Sub-agent a: first",
		"agent:1 (a) wants to run: echo one", // always, for agent:1: its echo two is not asked about
		"Sub-agent a: second",
		"agent:4 (a) wants to run: echo one", // agent:1's grant is not agent:4's
		"agent:4 (a) wants to run: echo two",
		"Run: echo top", // always, in the session: agent:8's calls are not asked about
		"Sub-agent a: third",
	}
	if got := h.client.titles(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("asked:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestAlwaysForASubAgentCoversItsSubAgents: "always" given to a
// sub-agent covers the sub-agents it starts.
func TestAlwaysForASubAgentCoversItsSubAgents(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "lead", "prompt": "go"}}]},
		{"expect": "led", "text": "finished"}
	], "agents": {
		"lead": [
			{"tool_calls": [{"name": "bash", "input": {"command": "echo one"}}]},
			{"expect": "one", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "b", "prompt": "dig"}}]},
			{"expect": "dug", "text": "led"}
		],
		"b": [
			{"tool_calls": [{"name": "bash", "input": {"command": "echo deep"}}]},
			{"expect": "deep", "text": "dug"}
		]
	}}`
	h := start(t, script, acpserver.Config{Agent: agent.Config{Profiles: []agent.Profile{{Name: "lead", Description: "leads"}, {Name: "b", Description: "digs"}}}})
	h.client.choose = func(p acp.RequestPermissionRequest) acp.PermissionOptionId {
		if titleOf(p) == "agent:1 (lead) wants to run: echo one" {
			return "allow_always_agent"
		}
		return "allow_once"
	}
	id := h.session(t)
	if got := h.prompt(t, id, "go"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines(id), "\n"))
	}
	want := []string{
		"Sub-agent lead: go",
		"agent:1 (lead) wants to run: echo one",
		"agent:1 (lead) wants to start sub-agent b: dig", // another tool: asked
		// agent:3 (b), started by agent:1, runs bash unasked
	}
	if got := h.client.titles(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("asked:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
