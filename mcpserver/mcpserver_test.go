package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline/rpclinetest"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func TestMain(m *testing.M) {
	if os.Getenv(testShellEnv) != "" {
		testShell()
	}
	if os.Getenv(guessEnv) != "" {
		guessTokens()
	}
	goleak.VerifyTestMain(m)
}

func newService(t testing.TB, cfg mcpserver.Config) *mcpserver.Service {
	t.Helper()
	if cfg.Agent.Tools.Process.Dir == "" {
		cfg.Agent.Tools.Process.Dir = t.TempDir()
	}
	cfg.UpdateInterval, cfg.ProgressInterval = 100*time.Millisecond, 200*time.Millisecond
	svc, err := mcpserver.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return svc
}

// client connects a go-sdk client to a new session over in-memory
// transports.
func client(t *testing.T, svc *mcpserver.Service, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := svc.Server().Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its text into out; it returns isError.
func call(t *testing.T, cs *mcp.ClientSession, name, args string, out any) bool {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s(%s): protocol error %v", name, args, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s(%s) = %q: %v", name, args, text, err)
		}
	}
	return res.IsError
}

func TestToolsAreTheToolsPackagesOwn(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*tools.Tool{}
	for _, tl := range tools.New(tools.Config{NoPush: true}).Tools() { // MCP's face (issue 23, item 13)
		want[tl.Name] = tl
	}
	if len(list.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(list.Tools), len(want))
	}
	for _, tl := range list.Tools {
		w := want[tl.Name]
		if w == nil {
			t.Errorf("unexpected tool %s", tl.Name)
			continue
		}
		var a, b any
		got, _ := json.Marshal(tl.InputSchema)
		schema, _ := json.Marshal(w.InputSchema)
		json.Unmarshal(got, &a)
		json.Unmarshal(schema, &b)
		if tl.Description != w.Description || !equalJSON(a, b) {
			t.Errorf("tool %s differs from the tools package's in description or schema", tl.Name)
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestEveryToolOverMCP(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, nil)

	var bg tools.BashOutput
	if call(t, cs, "bash", `{"command": "echo one; sleep 0.3; echo two", "run_in_background": true}`, &bg) || bg.TaskID != "shell:1" {
		t.Fatalf("bash = %+v", bg)
	}
	var list tools.ListOutput
	call(t, cs, "task_list", `{}`, &list)
	if list.Count != 1 {
		t.Errorf("task_list = %+v", list)
	}
	var wait tools.WaitOutput
	call(t, cs, "task_wait", `{"task_ids": ["shell:1"], "timeout_seconds": 10}`, &wait)
	if len(wait.Done) != 1 || !strings.Contains(wait.Done[0].Result, "one\ntwo\n") {
		t.Errorf("task_wait = %+v", wait)
	}
	var out tools.TaskOutputResult
	call(t, cs, "task_output", `{"task_id": "1", "since": 0}`, &out)
	if out.Output != "one\ntwo\n" {
		t.Errorf("task_output = %+v", out)
	}
	var inspect tools.InspectOutput
	call(t, cs, "task_inspect", `{"task_id": "shell:1"}`, &inspect)
	if inspect.Status != "completed" {
		t.Errorf("task_inspect = %+v", inspect)
	}
	var fg tools.BashOutput
	call(t, cs, "bash", `{"command": "read x; echo got $x", "interactive": true, "run_in_background": true}`, &fg)
	var in tools.TaskInputResult
	if call(t, cs, "task_input", `{"task_id": "shell:2", "text": "it\n"}`, &in) || in.BytesWritten != 3 {
		t.Errorf("task_input = %+v", in)
	}
	call(t, cs, "task_wait", `{"task_ids": ["shell:2"], "timeout_seconds": 10}`, &wait)
	if len(wait.Done) != 1 || !strings.Contains(wait.Done[0].Result, "got it") {
		t.Errorf("interactive result = %+v", wait)
	}
	call(t, cs, "bash", `{"command": "sleep 100", "run_in_background": true}`, nil)
	var cancel tools.CancelOutput
	if call(t, cs, "task_cancel", `{"task_id": "shell:3"}`, &cancel) || cancel.AlreadyFinished {
		t.Errorf("task_cancel = %+v", cancel)
	}
	// Mistakes are tool errors, and the server keeps serving.
	var e tools.ErrorOutput
	if !call(t, cs, "task_output", `{"task_id": 7.5}`, &e) || e.Error == "" {
		t.Errorf("a bad id = %+v", e)
	}
	if !call(t, cs, "bash", `{"command": 42}`, &e) || !strings.Contains(e.Error, "command must be a JSON string") {
		t.Errorf("a bad argument type = %+v", e)
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
		t.Error("an unknown tool = nil error")
	}
	call(t, cs, "task_list", `{}`, &list)
	if list.Count != 3 {
		t.Errorf("still serving: task_list = %+v", list)
	}
}

func TestSessionsSeeOnlyTheirOwnTasks(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	a, b := client(t, svc, nil), client(t, svc, nil)
	call(t, a, "bash", `{"command": "echo secret; sleep 100", "run_in_background": true}`, nil)
	var list tools.ListOutput
	call(t, b, "task_list", `{}`, &list)
	if list.Count != 0 {
		t.Errorf("session b sees %d tasks of session a", list.Count)
	}
	var e tools.ErrorOutput
	for _, tool := range []string{"task_output", "task_cancel", "task_inspect"} {
		if !call(t, b, tool, `{"task_id": "shell:1"}`, &e) {
			t.Errorf("session b reached session a's shell:1 with %s", tool)
		}
	}
	if _, err := b.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "offstage://task/shell:1/output"}); err == nil {
		t.Error("session b read session a's output resource")
	}
	call(t, a, "task_list", `{}`, &list)
	if list.Count != 1 || list.Tasks[0].Status != "running" {
		t.Errorf("session a's task after b's attempts = %+v", list)
	}
}

// pidOf returns the pid of a shell task, from its activity line.
func pidOf(t *testing.T, cs *mcp.ClientSession, id string) int {
	t.Helper()
	var inspect tools.InspectOutput
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		call(t, cs, "task_inspect", `{"task_id": "`+id+`"}`, &inspect)
		if m := regexp.MustCompile(`pid (\d+)`).FindStringSubmatch(inspect.Activity); m != nil {
			pid, _ := strconv.Atoi(m[1])
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no pid for %s: %+v", id, inspect)
	return 0
}

// groupAlive reports whether a live process of group pgid remains.
func groupAlive(pgid int) bool {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 2 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDisconnectReapsEverything(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, nil)
	// One sleeper daemonizes (a session of its own) and says its pid.
	pidFile := filepath.Join(t.TempDir(), "daemon.pid")
	cmd := "setsid -f sh -c 'echo $$ > " + pidFile + "; exec sleep 100'; sleep 100 & sleep 100 & wait"
	args, _ := json.Marshal(map[string]any{"command": cmd, "run_in_background": true})
	call(t, cs, "bash", string(args), nil)
	pgid := pidOf(t, cs, "shell:1")
	var daemon int
	waitFor(t, "the sleepers run", func() bool {
		b, _ := os.ReadFile(pidFile)
		daemon, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return groupAlive(pgid) && daemon > 0 && sleeping(daemon)
	})
	t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGKILL) })
	cs.Close()
	waitFor(t, "the session's tasks are reaped", func() bool { return svc.Sessions() == 0 && !groupAlive(pgid) })
	if sleeping(daemon) {
		t.Errorf("the daemonized sleeper %d outlived its session", daemon)
	}
}

// sleeping says whether pid is a live sleep process.
func sleeping(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
		return false
	}
	stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

func TestKeepOnDisconnect(t *testing.T) {
	svc := newService(t, mcpserver.Config{KeepOnDisconnect: true})
	cs := client(t, svc, nil)
	// The model is told its work outlives the connection, not that it
	// ends with the session (an outsider's finding).
	if got := cs.InitializeResult().Instructions; !strings.Contains(got, "go on to their end") || strings.Contains(got, "end when this session ends") {
		t.Errorf("the instructions of a kept session: %q", got)
	}
	call(t, cs, "bash", `{"command": "sleep 100", "run_in_background": true}`, nil)
	pgid := pidOf(t, cs, "shell:1")
	cs.Close()
	time.Sleep(300 * time.Millisecond)
	if !groupAlive(pgid) {
		t.Fatal("the task died with its session despite KeepOnDisconnect")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if groupAlive(pgid) {
		t.Error("Close left the task running")
	}
}

// The client gives up once the second progress notification came (it
// gave up after a fixed 900 ms, and a busy machine sent fewer than two by
// then); the wait's own 60 s timeout is the deadline.
func TestWaitSendsProgressAndStopsWhenCancelled(t *testing.T) {
	var (
		mu        sync.Mutex
		progress  []string
		cancelled time.Time
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, req.Params.Message)
		if len(progress) == 2 {
			cancelled = time.Now()
			cancel() // the client gives up: notifications/cancelled
		}
	}})
	call(t, cs, "bash", `{"command": "sleep 100", "run_in_background": true}`, nil)
	params := &mcp.CallToolParams{Name: "task_wait", Arguments: json.RawMessage(`{"task_ids": ["shell:1"], "timeout_seconds": 60}`)}
	params.SetProgressToken("wait-1")
	_, err := cs.CallTool(ctx, params)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool() = %v, want context.Canceled", err)
	}
	mu.Lock()
	at := cancelled
	mu.Unlock()
	if d := time.Since(at); d > 5*time.Second {
		t.Errorf("the cancelled wait took %v to end", d)
	}
	mu.Lock()
	got := slices(progress)
	mu.Unlock()
	if len(got) < 2 || !strings.Contains(got[0], "still running: shell:1") {
		t.Errorf("progress = %q, want notifications naming shell:1", got)
	}
	var list tools.ListOutput
	call(t, cs, "task_list", `{}`, &list)
	if list.Tasks[0].Status != "running" {
		t.Errorf("cancelling the wait cancelled the task: %+v", list.Tasks[0])
	}
}

func slices(s []string) []string { return append([]string(nil), s...) }

func TestOutputResourcesAndSubscriptions(t *testing.T) {
	updates := make(chan string, 100)
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updates <- req.Params.URI
	}})
	call(t, cs, "bash", `{"command": "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done", "run_in_background": true}`, nil)
	const uri = "offstage://task/shell:1/output"
	pidOf(t, cs, "shell:1") // started
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-updates:
		if got != uri {
			t.Errorf("update for %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no resource update as output arrived")
	}
	var wait tools.WaitOutput
	call(t, cs, "task_wait", `{"task_ids": ["shell:1"], "timeout_seconds": 10}`, &wait)
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Contents[0].Text; !strings.HasSuffix(text, "line 5\n") {
		t.Errorf("resource = %q", text)
	}
	// (Subscribing to a task that does not exist is refused by the server,
	// but with the newest protocol the go-sdk client's Subscribe returns
	// before the server answers, so the refusal cannot be seen here.)
	if _, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "offstage://task/shell:9/output"}); err == nil {
		t.Error("reading the output of a task that does not exist = nil error")
	}
	if n := len(updates); n > 15 {
		t.Errorf("%d updates for 5 lines over a second: not rate-limited", n)
	}
}

func TestHTTPNeedsTheTokenAndALocalOrigin(t *testing.T) {
	svc := newService(t, mcpserver.Config{Agent: agent.Config{Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}})
	srv := httptest.NewServer(svc.HTTPHandler("s3cret", nil))
	defer srv.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	post := func(auth, origin string) int {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if id := res.Header.Get("Mcp-Session-Id"); id != "" { // end it, as a client does
			del, _ := http.NewRequest("DELETE", srv.URL, nil)
			del.Header.Set("Authorization", auth)
			del.Header.Set("Mcp-Session-Id", id)
			if r, err := http.DefaultClient.Do(del); err == nil {
				r.Body.Close()
			}
		}
		return res.StatusCode
	}
	for _, tc := range []struct {
		auth, origin string
		want         int
	}{
		{"", "", 401},
		{"Bearer wrong", "", 401},
		{"s3cret", "", 401},
		{"Bearer s3cret", "http://evil.example", 403},
		{"Bearer s3cret", "http://localhost:3000", 200},
		{"Bearer s3cret", "", 200},
		{"bearer s3cret", "", 200}, // the scheme is case-insensitive
		{"BEARER  s3cret", "", 200},
		{"Bearer s3cre", "", 401},
		{"Bearer s3crett", "", 401},
		{"Basic s3cret", "", 401},
		{"Bearer", "", 401},
	} {
		if got := post(tc.auth, tc.origin); got != tc.want {
			t.Errorf("auth %q origin %q: status %d, want %d", tc.auth, tc.origin, got, tc.want)
		}
	}
	// A real client over HTTP with the token works end to end.
	transport := &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{"s3cret"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out tools.BashOutput
	call(t, cs, "bash", `{"command": "echo over http"}`, &out)
	if out.Output != "over http\n" {
		t.Errorf("bash over HTTP = %+v", out)
	}
	cs.Close()
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSpawnAgentWhenAModelIsConfigured(t *testing.T) {
	model, err := scripted.Parse([]byte(`{"turns": [], "agents": {"general": [{"text": "the sub-agent's report"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	svc := newService(t, mcpserver.Config{Agent: agent.Config{Model: model}})
	cs := client(t, svc, nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "spawn_agent") {
		t.Fatalf("tools = %v, want spawn_agent with a model", names)
	}
	var out struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
		Answer string `json:"answer"`
	}
	if call(t, cs, "spawn_agent", `{"profile": "general", "prompt": "report"}`, &out) || out.Answer != "the sub-agent's report" || out.Status != "completed" {
		t.Errorf("spawn_agent = %+v", out)
	}
}

// TestToolAnnotations pins what tools/list tells a client about each tool,
// so it can decide whether to ask its user before a call.
func TestToolAnnotations(t *testing.T) {
	model, err := scripted.Parse([]byte(`{"turns": []}`))
	if err != nil {
		t.Fatal(err)
	}
	cs := client(t, newService(t, mcpserver.Config{Agent: agent.Config{Model: model}}), nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type hints struct {
		Title                                     string
		ReadOnly, Destructive, Idempotent, OpenWd bool
	}
	got := map[string]hints{}
	for _, tl := range list.Tools {
		a := tl.Annotations
		if a == nil || a.DestructiveHint == nil || a.OpenWorldHint == nil || tl.Title != a.Title {
			t.Errorf("%s: annotations %+v, title %q; want every hint set and the title in both places", tl.Name, a, tl.Title)
			continue
		}
		got[tl.Name] = hints{a.Title, a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, *a.OpenWorldHint}
	}
	want := map[string]hints{
		"bash":         {"Run a shell command", false, true, false, true},
		"task_list":    {"List background tasks", true, false, true, false},
		"task_inspect": {"Inspect a task", true, false, false, false},
		"task_output":  {"Read a shell's output", true, false, false, false},
		"task_wait":    {"Wait for tasks", true, false, false, false},
		"task_cancel":  {"Cancel a task", false, true, true, false},
		"task_input":   {"Send input to a shell", false, true, false, true},
		"spawn_agent":  {"Start a sub-agent", false, true, false, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool annotations (-want +got):\n%s", diff)
	}
}

func TestNoticesReachTheServersLog(t *testing.T) {
	var logged syncBuffer
	svc := newService(t, mcpserver.Config{Agent: agent.Config{Tools: tools.Config{Process: proc.Config{PromptAfter: 200 * time.Millisecond}}},
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	cs := client(t, svc, nil)
	call(t, cs, "bash", `{"command": "printf 'Overwrite? [y/N] '; read a; echo got $a", "run_in_background": true, "interactive": true}`, nil)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged.String(), "task notice") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := logged.String(); !strings.Contains(got, "task_id=shell:1 kind=waiting_for_input") || !strings.Contains(got, "Overwrite? [y/N]") {
		t.Fatalf("the server's log: %s", got)
	}
	// The model still gets the notice from task_wait, which it ends.
	var wait tools.WaitOutput
	call(t, cs, "task_wait", `{"task_ids": ["shell:1"], "timeout_seconds": 30}`, &wait)
	if len(wait.Notices) != 1 || len(wait.Running) != 1 || wait.Running[0].WaitingForInput != "Overwrite? [y/N]" {
		t.Errorf("task_wait = %+v", wait)
	}
	call(t, cs, "task_input", `{"task_id": "shell:1", "text": "y\n"}`, nil)
	call(t, cs, "task_wait", `{"task_ids": ["shell:1"], "timeout_seconds": 30}`, &wait)
	if len(wait.Done) != 1 || !strings.Contains(wait.Done[0].Result, "got y") {
		t.Errorf("after the answer: %+v", wait)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestABadProfileIsAnError (issue 21, E3): a configuration no session can
// run is New's error, not a server that silently lacks spawn_agent.
func TestABadProfileIsAnError(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": []}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcpserver.New(context.Background(), mcpserver.Config{Agent: agent.Config{Model: m, Profiles: []agent.Profile{{Name: "review"}, {Name: "review"}}}})
	if err == nil || !strings.Contains(err.Error(), `repeated name "review"`) {
		t.Errorf("New with a repeated profile = %v, want an error naming it", err)
	}
}

// TestANotificationWithoutAStreamIsNotAWarning: the SDK's word that a
// client has no stream for a notification is logged at debug level, not
// as a warning at every shell's start and end; so is its word that one
// was not sent as the session ended.
func TestANotificationWithoutAStreamIsNotAWarning(t *testing.T) {
	var b strings.Builder
	l := mcpserver.SDKLogger(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l.Warn("calling notifications/resources/list_changed: rejected by transport: undelivered message")
	l.Warn("calling notifications/resources/list_changed: client is closing: EOF")
	l.Warn("something else")
	if strings.Contains(b.String(), "calling notifications") || !strings.Contains(b.String(), "something else") {
		t.Errorf("logged:\n%s", b.String())
	}
}

// TestWaitReturnsWhenTheClientsAreGone: Wait blocks while a session holds
// tasks and returns once its client went away and it closed itself (the
// CLI's TestMCPOverStdioWithTheGoSDK checks what its task then records).
func TestWaitReturnsWhenTheClientsAreGone(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	cs := client(t, svc, nil)
	var out tools.BashOutput
	if call(t, cs, "bash", `{"command": "sleep 100", "run_in_background": true}`, &out) {
		t.Fatalf("bash: %+v", out)
	}
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := svc.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a client connected = %v, want the deadline", err)
	}
	cs.Close()
	if err := svc.Wait(t.Context()); err != nil {
		t.Fatalf("Wait after the client went away = %v", err)
	}
	if n := svc.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after Wait", n)
	}
}

// keeper records what Config.Keep is told.
type keeper struct {
	mu       sync.Mutex
	opened   []*agent.Session
	detached chan *agent.Session
}

func (k *keeper) Opened(s *agent.Session) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.opened = append(k.opened, s)
	return nil
}

func (k *keeper) Detached(s *agent.Session) { k.detached <- s }

// waitDetached returns the session the keeper is told of next, and fails
// the test if none comes within rpclinetest.Timeout.
func (k *keeper) waitDetached(t *testing.T) *agent.Session {
	t.Helper()
	select {
	case s := <-k.detached:
		return s
	case <-time.After(rpclinetest.Timeout):
		t.Fatal("the session was not detached after its client went")
		return nil
	}
}

// TestKeepDetachesASessionWhoseClientWent: with Config.Keep, a session
// whose client goes is handed to the keeper, still open: its shell goes
// on, Service.Close leaves it, and closing it is the keeper's, with the
// cause the keeper gives (offstage serve's sessions).
func TestKeepDetachesASessionWhoseClientWent(t *testing.T) {
	k := &keeper{detached: make(chan *agent.Session, 1)}
	svc, err := mcpserver.New(context.Background(), mcpserver.Config{Keep: k, Agent: agent.Config{Tools: tools.Config{Process: proc.Config{Dir: t.TempDir()}}}})
	if err != nil {
		t.Fatal(err)
	}
	cs := client(t, svc, nil)
	if got := cs.InitializeResult().Instructions; !strings.Contains(got, "go on to their end") {
		t.Errorf("the instructions of a kept session: %q", got)
	}
	call(t, cs, "bash", `{"command": "sleep 100", "run_in_background": true}`, nil)
	pgid := pidOf(t, cs, "shell:1")
	cs.Close()
	s := k.waitDetached(t)
	k.mu.Lock()
	if len(k.opened) != 1 || k.opened[0] != s {
		t.Errorf("the keeper was told of %d sessions opening; want the one detached", len(k.opened))
	}
	k.mu.Unlock()
	if err := svc.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !groupAlive(pgid) {
		t.Fatal("the shell died with its client, or with Service.Close; want it kept")
	}
	s.CloseCause(context.Background(), &task.EndError{By: task.ByUser, Reason: "the keeper closed it", Err: task.ErrClosed})
	if groupAlive(pgid) {
		t.Error("closing the kept session left its shell running")
	}
	if i, err := s.Table().Info("shell:1"); err != nil || i.EndedBy != task.ByUser {
		t.Errorf("shell:1 = %+v, %v; want ended_by user", i, err)
	}
}
