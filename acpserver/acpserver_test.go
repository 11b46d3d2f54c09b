package acpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func TestMain(m *testing.M) {
	if os.Getenv(testShellEnv) != "" {
		testShell()
	}
	if os.Getenv(testMCPServerEnv) != "" {
		testMCPServer()
	}
	if os.Getenv(benchServeEnv) != "" {
		benchServe()
	}
	goleak.VerifyTestMain(m)
}

// client is an ACP client that records every update and answers
// permission requests with choose (allow once when nil).
type client struct {
	mu      sync.Mutex
	updates []acp.SessionNotification
	asked   []acp.RequestPermissionRequest
	changed chan struct{} // closed and replaced on every update
	choose  func(acp.RequestPermissionRequest) acp.PermissionOptionId
}

func newClient() *client { return &client{changed: make(chan struct{})} }

func (c *client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	close(c.changed)
	c.changed = make(chan struct{})
	return nil
}

func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.asked = append(c.asked, p)
	choose := c.choose
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	id := acp.PermissionOptionId("allow_once")
	if choose != nil {
		id = choose(p)
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(id)}, nil
}

func (c *client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound("fs/read_text_file")
}
func (c *client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound("fs/write_text_file")
}
func (c *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound("terminal/create")
}
func (c *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound("terminal/kill")
}
func (c *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound("terminal/output")
}
func (c *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound("terminal/release")
}
func (c *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound("terminal/wait_for_exit")
}

// await waits until cond holds for the updates so far, or fails. A
// permission request counts as a change too.
func (c *client) await(t *testing.T, what string, cond func([]acp.SessionNotification) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		ok, changed := cond(c.updates), c.changed
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting until %s; updates:\n%s", what, c.dump())
		}
	}
}

func (c *client) dump() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, u := range c.updates {
		j, _ := json.Marshal(u.Update)
		fmt.Fprintf(&b, "  %s %s\n", u.SessionId, j)
	}
	return b.String()
}

// rendered is one update as a line a test can match: the kind of update
// and its fields that matter.
func rendered(u acp.SessionUpdate) string {
	switch {
	case u.UserMessageChunk != nil:
		return "user " + textOf(u.UserMessageChunk.Content)
	case u.AgentMessageChunk != nil:
		return "message " + textOf(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		return "thought " + textOf(u.AgentThoughtChunk.Content)
	case u.ToolCall != nil:
		return fmt.Sprintf("tool_call %s %s %q", u.ToolCall.Status, u.ToolCall.Kind, u.ToolCall.Title)
	case u.ToolCallUpdate != nil:
		s := "tool_call_update"
		if u.ToolCallUpdate.Status != nil {
			s += " " + string(*u.ToolCallUpdate.Status)
		}
		for _, c := range u.ToolCallUpdate.Content {
			if c.Content != nil {
				s += " " + textOf(c.Content.Content)
			}
		}
		return s
	case u.AvailableCommandsUpdate != nil:
		var names []string
		for _, c := range u.AvailableCommandsUpdate.AvailableCommands {
			names = append(names, c.Name)
		}
		return "commands " + strings.Join(names, " ")
	case u.SessionInfoUpdate != nil:
		if u.SessionInfoUpdate.Meta[acpserver.IdleMeta] == true && u.SessionInfoUpdate.UpdatedAt != nil {
			return "session_info background_idle"
		}
		return "session_info"
	}
	return "other"
}

func textOf(c acp.ContentBlock) string {
	if c.Text != nil {
		return c.Text.Text
	}
	return ""
}

// lines renders a session's updates, message chunks joined.
func lines(us []acp.SessionNotification, id acp.SessionId) []string {
	var out []string
	for _, u := range us {
		if u.SessionId != id {
			continue
		}
		r := rendered(u.Update)
		if n := len(out); n > 0 {
			for _, kind := range []string{"message ", "thought "} {
				if strings.HasPrefix(r, kind) && strings.HasPrefix(out[n-1], kind) {
					out[n-1] += strings.TrimPrefix(r, kind)
					r = ""
				}
			}
		}
		if r != "" {
			out = append(out, r)
		}
	}
	return out
}

func has(ls []string, sub string) bool {
	for _, l := range ls {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// harness is an agent served over pipes and a client connected to it.
type harness struct {
	conn   *acp.ClientSideConnection
	client *client
	dir    string
	hangUp func() // the client closes its side and waits for Serve; idempotent
}

func start(t *testing.T, script string, cfg acpserver.Config) *harness {
	t.Helper()
	if cfg.Agent.Model == nil && script != noModelScript {
		m, err := scripted.Parse([]byte(script))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Agent.Model = m
	}
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), cfg, agentIn, agentOut)
		agentOut.Close()
	}()
	h := &harness{client: newClient(), dir: t.TempDir()}
	in := &gatedReader{r: clientIn, ready: make(chan struct{})}
	h.conn = acp.NewClientSideConnection(h.client, clientOut, in)
	h.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	close(in.ready) // the SDK reads its logger unlocked: set it before the first read
	var once sync.Once
	h.hangUp = func() {
		once.Do(func() {
			clientOut.Close() // every session closes
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve() = %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Serve did not return after the client hung up")
			}
			<-h.conn.Done()
		})
	}
	t.Cleanup(h.hangUp)
	if _, err := h.conn.Initialize(t.Context(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) session(t *testing.T) acp.SessionId {
	t.Helper()
	r, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return r.SessionId
}

func (h *harness) prompt(t *testing.T, id acp.SessionId, text string) acp.StopReason {
	t.Helper()
	r, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	return r.StopReason
}

func (h *harness) lines(id acp.SessionId) []string {
	h.client.mu.Lock()
	defer h.client.mu.Unlock()
	return lines(h.client.updates, id)
}

// TestBackgroundWorkReachesTheEditorWhileIdle: a prompt starts a
// background shell and ends; the shell's end and the autonomous turn it
// starts arrive as updates with no second prompt, and the card of the
// call that started it goes from pending to in_progress to completed.
func TestBackgroundWorkReachesTheEditorWhileIdle(t *testing.T) {
	script := `{"turns": [
		{"thinking": "Start it in the background.", "text": "Starting the build.", "tool_calls": [{"name": "bash", "input": {"command": "echo building; sleep 0.3; echo built", "run_in_background": true}}]},
		{"expect": "shell:1", "text": "It runs in the background."},
		{"expect": "background-result", "text": "The build finished."}
	]}`
	h := start(t, script, acpserver.Config{})
	id := h.session(t)
	if got := h.prompt(t, id, "build it"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s, want end_turn", got)
	}
	atPromptEnd := h.lines(id)
	h.client.await(t, "the autonomous turn's answer and background_idle arrive", func(us []acp.SessionNotification) bool {
		return has(lines(us, id), "The build finished.") && has(lines(us, id), "session_info background_idle")
	})
	got := h.lines(id)
	if len(got) > 0 && strings.HasPrefix(got[0], "commands ") {
		got = got[1:] // offered first thing in the first prompt, or before it
	}
	want := []string{
		"thought Start it in the background.",
		"message Starting the build.",
		`tool_call pending execute "Run: echo building; sleep 0.3; echo built (in the background)"`,
		"tool_call_update in_progress",
		"tool_call_update in_progress Running in the background as shell:1.",
		"message It runs in the background.",
	}
	for i, w := range want {
		if i >= len(got) || !strings.HasPrefix(got[i], w) {
			t.Fatalf("update %d = %q, want %q; all:\n%s", i, at(got, i), w, strings.Join(got, "\n"))
		}
	}
	if has(atPromptEnd, "shell:1 completed") {
		t.Errorf("the shell's end arrived before its prompt ended: %v", atPromptEnd)
	}
	for _, w := range []string{"tool_call_update completed shell:1 completed (exit 0)", "thought Background work finished (shell:1)", "message The build finished."} {
		if !has(got, w) {
			t.Errorf("no update %q while idle; all:\n%s", w, strings.Join(got, "\n"))
		}
	}
	idle := 0
	for _, l := range got {
		if l == "session_info background_idle" {
			idle++
		}
	}
	if idle != 1 {
		t.Errorf("%d background_idle updates after the one shell ended, want 1; all:\n%s", idle, strings.Join(got, "\n"))
	}
	if i, j := slices.Index(got, "session_info background_idle"), slices.IndexFunc(got, func(l string) bool { return strings.Contains(l, "shell:1 completed (exit 0)") }); i < j {
		t.Errorf("background_idle (update %d) came before the shell's end (update %d)", i, j)
	}
	if !has(h.lines(id), "commands tasks inspect output cancel wait") {
		t.Errorf("no available_commands_update; all:\n%s", strings.Join(got, "\n"))
	}
}

func at(ls []string, i int) string {
	if i < len(ls) {
		return ls[i]
	}
	return "(none)"
}

// TestCancelStopsTheTurnNotTheWork: session/cancel ends a prompt
// cancelled; its background shell goes on (and /tasks says so).
func TestCancelStopsTheTurnNotTheWork(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}}]},
		{"tool_calls": [{"name": "task_wait", "input": {"task_ids": ["shell:1"], "timeout_seconds": 60}}]}
	]}`
	h := start(t, script, acpserver.Config{AllowAll: true})
	id := h.session(t)
	stopped := make(chan acp.StopReason, 1)
	go func() {
		r, _ := h.conn.Prompt(context.Background(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
		stopped <- r.StopReason
	}()
	h.client.await(t, "the wait starts", func(us []acp.SessionNotification) bool { return has(lines(us, id), `"Wait for shell:1"`) })
	if err := h.conn.Cancel(t.Context(), acp.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-stopped:
		if r != acp.StopReasonCancelled {
			t.Errorf("stopReason = %s, want cancelled", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the prompt did not end after session/cancel")
	}
	h.prompt(t, id, "/tasks")
	if ls := h.lines(id); !has(ls, "shell:1    running") {
		t.Errorf("after cancel, /tasks shows:\n%s\nwant shell:1 running", strings.Join(ls, "\n"))
	}
}

// Issue 37 item 15: the card of a foreground command that session/cancel
// stopped ended "completed".
func TestACancelledCommandsCardFails(t *testing.T) {
	script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100"}}]}]}`
	h := start(t, script, acpserver.Config{AllowAll: true})
	id := h.session(t)
	stopped := make(chan struct{})
	go func() {
		h.conn.Prompt(context.Background(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
		close(stopped)
	}()
	h.client.await(t, "the command starts", func(us []acp.SessionNotification) bool { return has(lines(us, id), `"Run: sleep 100"`) })
	if err := h.conn.Cancel(t.Context(), acp.CancelNotification{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	<-stopped
	h.client.await(t, "the card ends", func(us []acp.SessionNotification) bool { return has(lines(us, id), "tool_call_update failed") })
	if ls := h.lines(id); has(ls, "tool_call_update completed") {
		t.Errorf("the cancelled command's card:\n%s", strings.Join(ls, "\n"))
	}
}

// TestClosingAnswersThePrompt: a prompt whose session is closed while its
// turn runs is answered, cancelled (it was an internal error), whether
// or not its turn's end reached the session's writer before the close:
// a prompt the reading goroutine handed to the turn straight away
// (prompt.go) has no goroutine of its own waiting to say so. Four
// sessions, since which comes first is the scheduler's choice.
func TestClosingAnswersThePrompt(t *testing.T) {
	script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100"}}]}, {"text": "done"}]}`
	h := start(t, script, acpserver.Config{AllowAll: true})
	for range 4 {
		id := h.session(t)
		h.prompt(t, id, "/help") // the commands announced: the next prompt goes straight to the turn
		answered := make(chan error, 1)
		go func() {
			resp, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
			if err == nil && resp.StopReason != acp.StopReasonCancelled {
				err = fmt.Errorf("stop reason %q", resp.StopReason)
			}
			answered <- err
		}()
		h.client.await(t, "the command starts", func(us []acp.SessionNotification) bool { return has(lines(us, id), `"Run: sleep 100"`) })
		if _, err := h.conn.CloseSession(t.Context(), acp.CloseSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-answered:
			if err != nil {
				t.Errorf("the prompt of a closed session = %v; want it cancelled", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the prompt of a closed session was never answered")
		}
	}
}

// TestCloseReapsEverything: session/close and hanging up both end every
// process of the session.
func TestCloseReapsEverything(t *testing.T) {
	for _, how := range []string{"session/close", "hang up"} {
		t.Run(how, func(t *testing.T) {
			marker := "OFFSTAGE_ACP_TEST=" + strings.ReplaceAll(t.Name(), "/", ".")
			script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 1000 & sleep 1000", "run_in_background": true}}]}, {"text": "started"}]}`
			cfg := acpserver.Config{AllowAll: true}
			cfg.Agent.Tools.Process.Env = append(os.Environ(), marker)
			ends := &endRecorder{}
			cfg.Agent.Tasks.Recorder = ends
			h := start(t, script, cfg)
			id := h.session(t)
			h.prompt(t, id, "start")
			waitProcs(t, marker, func(n int) bool { return n >= 2 })
			if how == "session/close" {
				if _, err := h.conn.CloseSession(t.Context(), acp.CloseSessionRequest{SessionId: id}); err != nil {
					t.Fatal(err)
				}
				if n := len(proctest.Marked(marker)); n != 0 {
					t.Errorf("%d processes alive after session/close returned", n)
				}
				if by, reason := ends.of("shell:1"); by != task.BySession || reason != "acp: session/close" {
					t.Errorf("shell:1 ended by %q (%q), want session (acp: session/close)", by, reason)
				}
				// Not "unknown session … (sessions do not survive a restart
				// of the agent)": nothing restarted (outsider 17).
				if _, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}}); err == nil || !strings.Contains(err.Error(), "was closed (by session/close)") || strings.Contains(err.Error(), "restart") {
					t.Errorf("prompt after close = %v, want it said the session was closed by session/close", err)
				}
				return
			}
			h.hangUp()
			if n := len(proctest.Marked(marker)); n != 0 {
				t.Errorf("%d processes alive after the client hung up", n)
			}
			if by, reason := ends.of("shell:1"); by != task.BySession || !strings.Contains(reason, "acp: the client went away") {
				t.Errorf("shell:1 ended by %q (%q), want session (acp: the client went away)", by, reason)
			}
		})
	}
}

// endRecorder keeps who ended each task (task.Change.EndedBy).
type endRecorder struct {
	mu   sync.Mutex
	ends map[string][2]string
}

func (r *endRecorder) Record(c *task.Change) {
	if c.Type != task.EventFinished {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends == nil {
		r.ends = map[string][2]string{}
	}
	r.ends[c.ID] = [2]string{c.EndedBy, c.EndReason}
}

func (r *endRecorder) of(id string) (by, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.ends[id]
	return e[0], e[1]
}

func waitProcs(t *testing.T, marker string, ok func(int) bool) {
	t.Helper()
	waitProcsOr(t, marker, ok, func() string { return "" })
}

// waitProcsOr is waitProcs that says why (what the thread showed, say)
// when it fails.
func waitProcsOr(t *testing.T, marker string, ok func(int) bool, why func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(len(proctest.Marked(marker))) {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes with %s\n%s", len(proctest.Marked(marker)), marker, why())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionsAreIndependent: two sessions on one connection see only
// their own tasks.
func TestSessionsAreIndependent(t *testing.T) {
	script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}}]}, {"text": "started"}]}`
	h := start(t, script, acpserver.Config{AllowAll: true})
	a, b := h.session(t), h.session(t)
	h.prompt(t, a, "start one")
	h.prompt(t, b, "/tasks")
	if ls := h.lines(b); !has(ls, "no tasks") {
		t.Errorf("session b's /tasks:\n%s\nwant no tasks", strings.Join(ls, "\n"))
	}
	h.prompt(t, a, "/tasks")
	if ls := h.lines(a); !has(ls, "shell:1") {
		t.Errorf("session a's /tasks:\n%s\nwant its shell", strings.Join(ls, "\n"))
	}
}

// TestPermission: execute calls are asked about; a rejection reaches the
// model as an error; "always" is remembered for the session; read-only
// calls are never asked about.
func TestPermission(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo rejected"}}]},
		{"expect": "rejected this call", "tool_calls": [{"name": "bash", "input": {"command": "echo first"}}]},
		{"expect": "first", "tool_calls": [{"name": "bash", "input": {"command": "echo second"}}, {"name": "task_list", "input": {}}]},
		{"expect": "", "text": "done"}
	]}`
	h := start(t, script, acpserver.Config{})
	var n int
	h.client.choose = func(p acp.RequestPermissionRequest) acp.PermissionOptionId {
		n++
		if n == 1 {
			return "reject"
		}
		return "allow_always"
	}
	id := h.session(t)
	if got := h.prompt(t, id, "go"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s", got)
	}
	h.client.mu.Lock()
	asked := h.client.asked
	h.client.mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("asked %d times, want 2 (reject, then allow always; the third bash and task_list not asked)", len(asked))
	}
	if tc := asked[0].ToolCall; tc.Title == nil || *tc.Title != "Run: echo rejected" || tc.Kind == nil || *tc.Kind != acp.ToolKindExecute || len(asked[0].Options) != 3 {
		t.Errorf("permission request = %+v", asked[0])
	}
	ls := h.lines(id)
	if !has(ls, "tool_call_update failed This call was not run: the user rejected this call") {
		t.Errorf("the rejected call's card:\n%s", strings.Join(ls, "\n"))
	}
	if !has(ls, "tool_call_update completed exit 0\nsecond") {
		t.Errorf("the always-allowed call did not run:\n%s", strings.Join(ls, "\n"))
	}
}

// TestStopReasons: a refusal is reported as one.
func TestStopReasons(t *testing.T) {
	h := start(t, `{"turns": [{"text": "I won't do that.", "stop": "refusal"}]}`, acpserver.Config{})
	if got := h.prompt(t, h.session(t), "do something bad"); got != acp.StopReasonRefusal {
		t.Errorf("stopReason = %s, want refusal", got)
	}
}

// TestBadInput: every kind of bad input gets a clear JSON-RPC error and
// the agent keeps serving.
func TestBadInput(t *testing.T) {
	h := start(t, `{"turns": [{"text": "hello"}]}`, acpserver.Config{})
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"relative cwd": func() error {
			_, err := h.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}})
			return err
		},
		"missing cwd": func() error {
			_, err := h.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: "/no/such/dir", McpServers: []acp.McpServer{}})
			return err
		},
		"unknown session": func() error {
			_, err := h.conn.Prompt(ctx, acp.PromptRequest{SessionId: "nope", Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
			return err
		},
		"image": func() error {
			_, err := h.conn.Prompt(ctx, acp.PromptRequest{SessionId: h.session(t), Prompt: []acp.ContentBlock{acp.ImageBlock("AAAA", "image/png")}})
			return err
		},
	} {
		err := call()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	if got := h.prompt(t, h.session(t), "still there?"); got != acp.StopReasonEndTurn {
		t.Errorf("after bad input, stopReason = %s", got)
	}
}

// TestMalformedLines: a line that is not JSON, or not an object, gets a
// JSON-RPC error; the connection goes on.
func TestMalformedLines(t *testing.T) {
	m, _ := scripted.Parse([]byte(`{"turns": []}`))
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: m}}, agentIn, agentOut)
		agentOut.Close()
	}()
	replies := bufio.NewReader(clientIn)
	for _, tc := range []struct{ send, want string }{
		{"this is not json", `"code":-32700`},
		{"[1, 2]", `"code":-32600`},
		{`{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}`, `"id":7,"result"`},
		{`{"jsonrpc": "2.0", "id": 8, "method": "no/such/method", "params": {}}`, `"code":-32601`},
	} {
		if _, err := io.WriteString(clientOut, tc.send+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := replies.ReadString('\n')
		if err != nil || !strings.Contains(line, tc.want) {
			t.Errorf("after %q the agent said %q (%v), want %s", tc.send, line, err, tc.want)
		}
	}
	clientOut.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v", err)
	}
	io.Copy(io.Discard, clientIn)
}

// TestCardsOfBackgroundTasks: cancelling a background shell (here with
// /cancel) ends its card; a background sub-agent's card shows one step
// line at a time, not its tool calls, then its answer.
func TestCardsOfBackgroundTasks(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}}]},
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "helper", "prompt": "look around", "run_in_background": true}}]},
		{"text": "Both started."},
		{"text": "Noted."},
		{"text": "Noted again."}
	], "agents": {"helper": [
		{"tool_calls": [{"name": "task_list", "input": {}}], "delay_ms": 100},
		{"text": "Nothing else is running here.", "delay_ms": 100}
	]}}`
	cfg := acpserver.Config{AllowAll: true, Agent: agent.Config{Profiles: []agent.Profile{{Name: "helper", Description: "looks", Tools: []string{"task_list"}}}}}
	h := start(t, script, cfg)
	id := h.session(t)
	h.prompt(t, id, "start both")
	h.client.await(t, "the sub-agent's card ends", func(us []acp.SessionNotification) bool {
		return has(lines(us, id), "tool_call_update completed agent:2 completed")
	})
	h.prompt(t, id, "/cancel shell:1")
	h.client.await(t, "the shell's card ends", func(us []acp.SessionNotification) bool {
		return has(lines(us, id), "tool_call_update failed shell:1 canceled")
	})
	ls := h.lines(id)
	if !has(ls, "agent:2, step 1: ") || !has(ls, "Nothing else is running here.") {
		t.Errorf("the sub-agent's card shows no step line or no answer:\n%s", strings.Join(ls, "\n"))
	}
	if has(ls, "List tasks") {
		t.Errorf("the sub-agent's own tool calls were streamed:\n%s", strings.Join(ls, "\n"))
	}
}

// TestPromptWaitsForAnAutonomousTurn: a prompt sent while finished
// background work has the agent busy runs after that turn, not instead
// of failing.
func TestPromptWaitsForAnAutonomousTurn(t *testing.T) {
	// sleep 1, not true: a result that comes before the turn's second
	// model call joins that call, and no autonomous turn follows.
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 1", "run_in_background": true}}]},
		{"text": "Started."},
		{"expect": "background-result", "text": "A slow look at the result.", "delay_ms": 500},
		{"expect": "and now", "text": "Here I am."}
	]}`
	h := start(t, script, acpserver.Config{AllowAll: true})
	id := h.session(t)
	h.prompt(t, id, "go")
	h.client.await(t, "the autonomous turn starts", func(us []acp.SessionNotification) bool {
		return has(lines(us, id), "thought Background work finished")
	})
	if got := h.prompt(t, id, "and now?"); got != acp.StopReasonEndTurn {
		t.Errorf("stopReason = %s", got)
	}
	ls := h.lines(id)
	if i, j := index(ls, "A slow look"), index(ls, "Here I am."); i < 0 || j < i {
		t.Errorf("the prompt did not run after the autonomous turn:\n%s", strings.Join(ls, "\n"))
	}
}

func index(ls []string, sub string) int {
	for i, l := range ls {
		if strings.Contains(l, sub) {
			return i
		}
	}
	return -1
}

// TestIterationCapStopsTheTurn: a model still calling tools at the cap
// ends the prompt with max_turn_requests.
func TestIterationCapStopsTheTurn(t *testing.T) {
	turns := strings.Repeat(`{"tool_calls": [{"name": "task_list", "input": {}}]},`, 25)
	h := start(t, `{"turns": [`+strings.TrimSuffix(turns, ",")+`]}`, acpserver.Config{})
	if got := h.prompt(t, h.session(t), "loop forever"); got != acp.StopReasonMaxTurnRequests {
		t.Errorf("stopReason = %s, want max_turn_requests", got)
	}
}

// gatedReader holds the first Read until ready is closed (see start).
type gatedReader struct {
	r     io.Reader
	ready chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.ready
	return g.r.Read(p)
}

// TestSessionsAreBounded: a connection cannot hold more sessions than the
// cap; closing one makes room.
func TestSessionsAreBounded(t *testing.T) {
	h := start(t, `{"turns": []}`, acpserver.Config{MaxSessions: 2})
	first := h.session(t)
	h.session(t)
	_, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: []acp.McpServer{}})
	if err == nil || !strings.Contains(err.Error(), "already holds 2 sessions") {
		t.Fatalf("a third session = %v, want it refused", err)
	}
	if _, err := h.conn.CloseSession(t.Context(), acp.CloseSessionRequest{SessionId: first}); err != nil {
		t.Fatal(err)
	}
	h.session(t)
}

// TestANoticeReachesTheEditorWhileIdle: a background shell that stops on
// a prompt updates its card, and the autonomous turn it starts says why.
func TestANoticeReachesTheEditorWhileIdle(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "printf 'Overwrite? [y/N] '; read a", "run_in_background": true, "interactive": true}}]},
		{"text": "It runs."},
		{"expect": "background-notice", "text": "It asks whether to overwrite.", "tool_calls": [{"name": "task_cancel", "input": {"task_id": "shell:1"}}]},
		{"text": "Cancelled it."},
		{"text": "Done."}
	]}`
	h := start(t, script, acpserver.Config{Agent: agent.Config{Tools: tools.Config{Process: proc.Config{PromptAfter: 200 * time.Millisecond}}, NoticeSettle: 100 * time.Millisecond}})
	id := h.session(t)
	h.prompt(t, id, "go")
	h.client.await(t, "the autonomous turn's answer arrives", func(us []acp.SessionNotification) bool {
		return has(lines(us, id), "message It asks whether to overwrite.")
	})
	got := h.lines(id)
	for _, w := range []string{
		`tool_call_update shell:1 notice, waiting_for_input: shell:1 seems to wait for input: "Overwrite? [y/N]"`,
		"thought Background work sent notices (shell:1); looking at them.",
	} {
		if !has(got, w) {
			t.Errorf("no update %q; all:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// recorded is a journal with one session to load.
type recorded struct{ cwd string }

func (r *recorded) List(_ context.Context, cwd string, _ int) ([]agent.SessionSummary, error) {
	all := []agent.SessionSummary{{ID: "old", Dir: r.cwd, Title: "build it"}, {ID: "elsewhere", Dir: "/elsewhere"}}
	var out []agent.SessionSummary
	for _, s := range all {
		if cwd == "" || s.Dir == cwd {
			out = append(out, s)
		}
	}
	return out, nil
}

func (r *recorded) Record(_ context.Context, info agent.SessionInfo, _ *agent.Config) (agent.Record, error) {
	return fakeRecord(info.ID), nil
}

// fakeRecord records nothing.
type fakeRecord string

func (f fakeRecord) ID() string        { return string(f) }
func (fakeRecord) Delivered(...string) {}
func (fakeRecord) End()                {}

func (r *recorded) Load(_ context.Context, id string) (*agent.Resume, error) {
	if id != "old" {
		return nil, fmt.Errorf("%w: %s", agent.ErrUnknownSession, id)
	}
	return &agent.Resume{ID: "old", FirstID: 4, Seq: 4,
		History: []provider.Message{
			{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "build it"}}},
			{Role: provider.Assistant, Content: []provider.Block{{Type: provider.ToolUse, ToolCallID: "c1", ToolName: "bash", Input: json.RawMessage(`{"command": "make", "run_in_background": true}`)}}},
			{Role: provider.User, Content: []provider.Block{{Type: provider.ToolResult, ToolCallID: "c1", Text: `{"task_id":"shell:4"}`}}},
			{Role: provider.Assistant, Content: []provider.Block{{Type: provider.Text, Text: "The build runs."}}},
		},
		Results: []task.Result{{Info: task.Info{ID: "shell:4", Label: "make", State: task.Completed}, Text: "exit status 0: built"}},
	}, nil
}

// TestLoadSessionReplaysAndContinues: session/list and session/load come
// from the recorded sessions; a loaded session replays its conversation,
// then goes on: its next prompt brings the result it never saw, and its
// task ids continue.
func TestLoadSessionReplaysAndContinues(t *testing.T) {
	script := `{"turns": [
		{"text": "unused: the recorded conversation already has two answers"},
		{"text": "unused"},
		{"expect": "(?s)what now.*background-result task_id=\"shell:4\".*built", "text": "It built; testing.", "tool_calls": [{"name": "bash", "input": {"command": "echo tested"}}]},
		{"expect": "shell:5", "text": "Tested."}
	]}`
	rec := &recorded{}
	h := start(t, script, acpserver.Config{Surface: agent.Surface{Journal: rec}})
	rec.cwd = h.dir
	list, err := h.conn.ListSessions(t.Context(), acp.ListSessionsRequest{Cwd: acp.Ptr(h.dir)})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].SessionId != "old" {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}
	if _, err := h.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: h.dir, SessionId: "nope", McpServers: []acp.McpServer{}}); err == nil || !strings.Contains(err.Error(), `unknown session \"nope\"`) {
		t.Errorf("loading an unknown session: %v", err)
	}
	if _, err := h.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: h.dir, SessionId: "old", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	replayed := h.lines("old")
	for _, w := range []string{"user build it", `tool_call in_progress execute "Run: make (in the background)"`, "tool_call_update completed", "message The build runs."} {
		if !has(replayed, w) {
			t.Errorf("replay lacks %q; all:\n%s", w, strings.Join(replayed, "\n"))
		}
	}
	if got := h.prompt(t, "old", "what now?"); got != acp.StopReasonEndTurn {
		t.Fatalf("prompt after load = %s", got)
	}
	if !has(h.lines("old"), "message Tested.") {
		t.Errorf("the loaded session did not go on:\n%s", strings.Join(h.lines("old"), "\n"))
	}
}

// TestSessionIDsAreRunsFormat pins issue 23 item 19: ACP's session ids
// were 24 random hex digits while run's (journal.NewID) are the time and
// a random part, in the same column of `offstage tasks`. Now both are
// agent.NewID's: sortable by when the session started.
func TestSessionIDsAreRunsFormat(t *testing.T) {
	h := start(t, `{"turns": []}`, acpserver.Config{})
	format := regexp.MustCompile(`^\d{8}-\d{6}-[0-9a-f]{6}$`)
	if id := agent.NewID(); !format.MatchString(id) {
		t.Fatalf("agent.NewID() = %q, want the form 20260102-150405-a1b2c3", id)
	}
	before := time.Now().UTC().Add(-time.Second).Format("20060102-150405")
	first, second := h.session(t), h.session(t)
	for _, id := range []acp.SessionId{first, second} {
		if !format.MatchString(string(id)) {
			t.Errorf("session id %q, want agent.NewID's form 20260102-150405-a1b2c3", id)
		}
		if string(id) < before {
			t.Errorf("session id %q sorts before the time it was made (%s)", id, before)
		}
	}
	if first == second {
		t.Errorf("two sessions got the same id %q", first)
	}
}

// TestParamErrorsSayWhatToSend pins issue 23 item 19: parameter errors
// exposed Go internals ("cannot unmarshal string into Go struct field
// Alias.protocolVersion", "…PromptRequest.prompt of type
// []acp.ContentBlock") and some put the reason only in data. Each now
// says in its message what is wrong and what to send, and the
// connection goes on.
func TestParamErrorsSayWhatToSend(t *testing.T) {
	m, _ := scripted.Parse([]byte(`{"turns": []}`))
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: m}}, agentIn, agentOut)
		agentOut.Close()
	}()
	replies := bufio.NewReader(clientIn)
	dir := t.TempDir()
	for _, tc := range []struct{ send, code, want string }{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1"}}`, "-32602",
			`Invalid params: protocolVersion must be an integer (the protocol version, 1), not a string; initialize takes params such as {"protocolVersion": 1, "clientCapabilities": {}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":"yes"}}}}`, "-32602",
			"clientCapabilities.fs.readTextFile must be a boolean, not a string"},
		{`{"jsonrpc":"2.0","id":3,"method":"initialize","params":[1]}`, "-32602", "params must be an object, not an array"},
		{`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}`, "", `"result"`},
		{`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"x","prompt":"hello"}}`, "-32602",
			`prompt must be an array of content blocks, such as [{"type": "text", "text": "…"}], not a string`},
		{`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"x","prompt":["hello"]}}`, "-32602", "prompt[0] is not a content block"},
		{`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"prompt":[{"type":"text","text":"hi"}]}}`, "-32602", "sessionId is required"},
		{`{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":5,"prompt":[]}}`, "-32602", "sessionId must be a string (the sessionId that session/new gave), not a number"},
		{`{"jsonrpc":"2.0","id":9,"method":"session/new","params":{"cwd":"` + dir + `"}}`, "-32602",
			`Invalid params: mcpServers is required; session/new takes params such as {"cwd": "/absolute/project/dir", "mcpServers": []}`},
		{`{"jsonrpc":"2.0","id":10,"method":"session/new","params":{"cwd":"` + dir + `","mcpServers":[{"name":"x","command":"node"}]}}`, "-32602",
			"mcpServers[0] (stdio) lacks args, an array of strings ([] for none)"},
		{`{"jsonrpc":"2.0","id":11,"method":"session/new","params":{"cwd":"` + dir + `","mcpServers":[{"type":"ws","name":"x"}]}}`, "-32602",
			`mcpServers[0] is of type "ws", which offstage does not connect`},
		{`{"jsonrpc":"2.0","id":12,"method":"session/new","params":{"cwd":"relative"}}`, "-32602", "mcpServers is required"},
		{`{"jsonrpc":"2.0","id":13,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}`, "-32602", `cwd "relative" is not an absolute path`},
		{`{"jsonrpc":"2.0","id":14,"method":"session/fork","params":{}}`, "-32601", `Method not found: offstage serves no method "session/fork"; it serves initialize, authenticate, session/new`},
		{`{"jsonrpc":"2.0","id":15,"method":"session/resume","params":{"sessionId":"x","cwd":"` + dir + `"}}`, "-32601", "session/resume is not offered: use session/load"},
		{`{"jsonrpc":"2.0","id":16,"method":"session/list","params":{}}`, "-32601", "session/list is not offered: this agent keeps no journal"},
	} {
		if _, err := io.WriteString(clientOut, tc.send+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := replies.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var reply struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(line), &reply)
		switch {
		case tc.code == "":
			if !strings.Contains(line, tc.want) {
				t.Errorf("after %s the agent said %s, want %s", tc.send, line, tc.want)
			}
		case reply.Error == nil || fmt.Sprint(reply.Error.Code) != tc.code || !strings.Contains(reply.Error.Message, tc.want):
			t.Errorf("after %s the agent said %s\nwant code %s and a message with %s", tc.send, line, tc.code, tc.want)
		case strings.Contains(reply.Error.Message, "Go ") || strings.Contains(reply.Error.Message, "acp.") || strings.Contains(reply.Error.Message, "Alias") || strings.Contains(reply.Error.Message, "unmarshal"):
			t.Errorf("the message shows Go internals: %s", reply.Error.Message)
		}
	}
	clientOut.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v", err)
	}
	io.Copy(io.Discard, clientIn)
}

// TestASecondPromptWaitsForTheFirstToEnd (a newcomer's trial): a client
// that sends a prompt while one runs, instead of session/cancel, has the
// first cancelled by the SDK; the second then runs, rather than being
// refused too and losing both.
func TestASecondPromptWaitsForTheFirstToEnd(t *testing.T) {
	h := start(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 30"}}]},
		{"expect": "second", "text": "The second one."},
		{"expect": "second", "text": "The second one."}
	]}`, acpserver.Config{})
	id := h.session(t)
	first := make(chan acp.StopReason, 1)
	go func() {
		r, _ := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("first")}})
		first <- r.StopReason
	}()
	h.client.await(t, "the first prompt's turn runs its command", func(us []acp.SessionNotification) bool {
		for _, l := range lines(us, id) {
			if strings.HasPrefix(l, "tool_call ") {
				return true
			}
		}
		return false
	})
	if got := h.prompt(t, id, "second"); got != acp.StopReasonEndTurn {
		t.Fatalf("the second prompt = %s", got)
	}
	if r := <-first; r != acp.StopReasonCancelled {
		t.Errorf("the first prompt = %q, want cancelled", r)
	}
	if !has(h.lines(id), "message The second one.") {
		t.Errorf("updates:\n%s", strings.Join(h.lines(id), "\n"))
	}
}

// TestKeeperListsAndClosesSessions: Keeper.Sessions lists a kept
// session, held by its connection, then detached; CloseSession ends a
// held one with its cause (its connection's next prompt is refused, and
// the keeper lets it go when the connection ends) and a detached one at
// once (offstage sessions close).
func TestKeeperListsAndClosesSessions(t *testing.T) {
	marker := "OFFSTAGE_ACP_TEST=" + t.Name()
	script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 1000", "run_in_background": true}}]}, {"text": "started"},
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 1000", "run_in_background": true}}]}, {"text": "started"}]}`
	keep := acpserver.NewKeeper(context.Background())
	cfg := acpserver.Config{AllowAll: true, Keep: keep}
	cfg.Agent.Tools.Process.Env = append(os.Environ(), marker)
	ends := &endRecorder{}
	cfg.Agent.Tasks.Recorder = ends
	h := start(t, script, cfg)
	held, detached := h.session(t), h.session(t)
	h.prompt(t, held, "start")
	h.prompt(t, detached, "start")
	waitProcs(t, marker, func(n int) bool { return n >= 2 })
	if ks := keep.Sessions(); len(ks) != 2 || !ks[0].Attached || !ks[1].Attached || len(ks[0].Tasks) != 1 {
		t.Fatalf("Sessions() = %+v; want two attached, each with its shell", ks)
	}
	cause := &task.EndError{By: task.ByUser, Reason: "offstage sessions close", Err: task.ErrClosed}
	if n, ok, err := keep.CloseSession(string(held), cause); n != 1 || !ok || err != nil {
		t.Errorf("CloseSession(held) = %d, %v, %v; want 1 task ended", n, ok, err)
	}
	if by, reason := ends.of("shell:1"); by != task.ByUser || reason != "offstage sessions close" {
		t.Errorf("the held session's shell ended by %q (%q); want user", by, reason)
	}
	if _, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: held, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}}); err == nil {
		t.Errorf("a prompt on the closed session succeeded")
	}
	if ks := keep.Sessions(); len(ks) != 1 || string(held) == ks[0].ID {
		t.Errorf("Sessions() after closing the held one = %+v; want only the other", ks)
	}
	h.hangUp() // the other detaches; the closed one is let go
	if ks := keep.Sessions(); len(ks) != 1 || ks[0].Attached || ks[0].Left.IsZero() || keep.Len() != 1 {
		t.Fatalf("Sessions() after the hang-up = %+v (Len %d); want one, detached", ks, keep.Len())
	}
	if n, ok, err := keep.CloseSession(string(detached), cause); n != 1 || !ok || err != nil {
		t.Errorf("CloseSession(detached) = %d, %v, %v; want 1 task ended", n, ok, err)
	}
	if n := len(proctest.Marked(marker)); n != 0 {
		t.Errorf("%d processes alive after both sessions closed", n)
	}
	if _, ok, _ := keep.CloseSession(string(detached), cause); ok || keep.Len() != 0 {
		t.Errorf("a second CloseSession found the session (Len %d)", keep.Len())
	}
}

// TestLoadingASessionClosedUnderItsConnection: offstage sessions close
// (Keeper.CloseSession) of a session a connection holds frees its id
// there: a prompt naming it is told it was closed, and why, and to load
// it (invalid params); a session/load on the same connection loads it, as
// after a restart, and it goes on. The load answered "already open", and
// the prompt an internal error (an outsider's finding).
func TestLoadingASessionClosedUnderItsConnection(t *testing.T) {
	keep := acpserver.NewKeeper(context.Background())
	defer keep.Close(task.ErrClosed)
	cfg := acpserver.Config{AllowAll: true, Keep: keep, Surface: agent.Surface{Journal: &reopened{}}}
	h := start(t, `{"turns": [{"text": "first"}, {"text": "second"}]}`, cfg)
	id := h.session(t)
	h.prompt(t, id, "hello")
	cause := &task.EndError{By: task.ByUser, Reason: "offstage sessions close (from pid 1)", Err: task.ErrClosed}
	if _, ok, err := keep.CloseSession(string(id), cause); !ok || err != nil {
		t.Fatalf("CloseSession = %v, %v", ok, err)
	}
	_, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("hi")}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, "was closed") || !strings.Contains(re.Message, "offstage sessions close") || !strings.Contains(re.Message, "session/load it") {
		t.Errorf("a prompt on the session closed under its connection: %v; want invalid params, saying it was closed and to load it", err)
	}
	if _, err := h.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: h.dir, SessionId: id, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("session/load of the session closed under its connection: %v", err)
	}
	if r := h.prompt(t, id, "again"); r != acp.StopReasonEndTurn {
		t.Errorf("a prompt on the loaded session = %q, want end_turn", r)
	}
}

// reopened is a journal that loads whatever session it is asked for,
// with no conversation.
type reopened struct{ recorded }

func (*reopened) Load(_ context.Context, id string) (*agent.Resume, error) {
	return &agent.Resume{ID: id, FirstID: 1, Seq: 1}, nil
}

// noModelScript starts an agent without a model (start).
const noModelScript = "(no model)"

// TestLoadingAHeldSessionSaysItIsHeld: an agent without a model that is
// asked to load a live session another connection holds says it is held
// (a live session has its own model); it said "no model" (an outsider's
// finding).
func TestLoadingAHeldSessionSaysItIsHeld(t *testing.T) {
	keep := acpserver.NewKeeper(context.Background())
	defer keep.Close(task.ErrClosed)
	cfg := acpserver.Config{Keep: keep, Surface: agent.Surface{Journal: &recorded{}}}
	first := start(t, `{"turns": []}`, cfg)
	id := first.session(t)
	cfg.NoModel = "offstage has no model: set OPENAI_API_KEY"
	second := start(t, noModelScript, cfg)
	_, err := second.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: second.dir, SessionId: id, McpServers: []acp.McpServer{}})
	if err == nil || !strings.Contains(err.Error(), "open on another connection") || strings.Contains(err.Error(), "no model") {
		t.Errorf("loading a session held by another connection, with no model: %v", err)
	}
}

// TestALiveLoadEndsTheCardsOfItsTasks: a session kept after its editor
// quit, loaded live by another connection, replays the card of a shell it
// started in the background as in progress, and ends that card when the
// shell ends, as the first connection would have. The card spun for good
// (an outsider's finding).
func TestALiveLoadEndsTheCardsOfItsTasks(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "go")
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e ` + gate + ` ]; do sleep 0.05; done; echo built", "run_in_background": true}}]},
		{"text": "started"},
		{"text": "it finished"}]}`
	keep := acpserver.NewKeeper(context.Background())
	defer keep.Close(task.ErrClosed)
	rec := &recorded{}
	cfg := acpserver.Config{AllowAll: true, Keep: keep, Surface: agent.Surface{Journal: rec}}
	first := start(t, script, cfg)
	id := first.session(t)
	first.prompt(t, id, "start")
	first.hangUp() // the editor quits: the session is kept, its shell runs
	second := start(t, script, cfg)
	if _, err := second.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: second.dir, SessionId: id, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if replayed := second.lines(id); !has(replayed, "tool_call in_progress") || has(replayed, "tool_call_update completed") {
		t.Errorf("the replay, the shell still running:\n%s", strings.Join(replayed, "\n"))
	}
	os.WriteFile(gate, nil, 0o644)
	second.client.await(t, "the shell's card ends on the connection that loaded it", func(us []acp.SessionNotification) bool {
		return has(lines(us, id), "tool_call_update completed")
	})
}

// TestAHangUpMidTurnEndsTheForegroundCommandBySession pins a leftover
// of the ACP review: an editor that died mid-turn left its foreground
// command recorded as ended by the user (the turn's cancel came before
// the session's close, and a plain cancel reads as the user's). It ended
// because its client went away: by the session, saying so; a kept
// session (offstage serve), which goes on, says so too.
func TestAHangUpMidTurnEndsTheForegroundCommandBySession(t *testing.T) {
	for _, kept := range []bool{false, true} {
		t.Run(fmt.Sprintf("kept=%v", kept), func(t *testing.T) {
			marker := "OFFSTAGE_ACP_TEST=" + strings.ReplaceAll(t.Name(), "/", ".")
			script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "sleep 1000"}}]}, {"text": "unreached"}]}`
			cfg := acpserver.Config{AllowAll: true}
			if kept {
				cfg.Keep = acpserver.NewKeeper(context.Background())
				defer cfg.Keep.Close(task.Closed("the test ended"))
			}
			cfg.Agent.Tools.Process.Env = append(os.Environ(), marker)
			ends := &endRecorder{}
			cfg.Agent.Tasks.Recorder = ends
			h := start(t, script, cfg)
			id := h.session(t)
			prompted := make(chan error, 1)
			go func() {
				_, err := h.conn.Prompt(t.Context(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("run it")}})
				prompted <- err
			}()
			waitProcs(t, marker, func(n int) bool { return n >= 1 })
			h.hangUp()
			<-prompted
			if n := len(proctest.Marked(marker)); n != 0 {
				t.Errorf("%d processes alive after the client hung up", n)
			}
			if by, reason := ends.of("shell:1"); by != task.BySession || !strings.Contains(reason, "acp: the client went away") {
				t.Errorf("shell:1 ended by %q (%q), want session (acp: the client went away)", by, reason)
			}
		})
	}
}
