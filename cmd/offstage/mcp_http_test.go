package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/tools"
)

// startHTTP starts offstage mcp --http on a free loopback port with env,
// and returns it, its mark, its endpoint, and its stderr so far (a
// function: it grows).
func startHTTP(t *testing.T, env []string, args ...string) (cmd *exec.Cmd, mark, endpoint string, stderr func() string) {
	t.Helper()
	c, mark := offstage(t, env, append([]string{"mcp", "--no-journal", "--http", "127.0.0.1:0"}, args...)...)
	pipe, err := c.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var got []string
	ch := lines(t, pipe)
	stderr = func() string {
		for {
			select {
			case l, ok := <-ch:
				if !ok {
					return strings.Join(got, "\n")
				}
				got = append(got, l)
				continue
			default:
			}
			return strings.Join(got, "\n")
		}
	}
	listening := regexp.MustCompile(`listening on (http://\S+/mcp)`)
	deadline := time.After(30 * time.Second)
	for endpoint == "" {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("offstage mcp --http ended: %s", strings.Join(got, "\n"))
			}
			got = append(got, l)
			if m := listening.FindStringSubmatch(l); m != nil {
				endpoint = m[1]
			}
		case <-deadline:
			t.Fatalf("offstage mcp --http is not listening: %s", strings.Join(got, "\n"))
		}
	}
	// The token line follows the address.
	for !strings.Contains(strings.Join(got, "\n"), "Authorization") {
		l, ok := <-ch
		if !ok {
			break
		}
		got = append(got, l)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c, mark, endpoint, stderr
}

// TestMCPHTTPPrintsOnlyATokenItMade (issue 19, item 7): a token given in
// OFFSTAGE_MCP_TOKEN is not printed (before, stderr showed it); one it
// generates is, and works.
func TestMCPHTTPPrintsOnlyATokenItMade(t *testing.T) {
	const given = "given-secret-7f3a9c"
	_, _, _, stderr := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=" + given})
	if out := stderr(); strings.Contains(out, given) || !strings.Contains(out, "$OFFSTAGE_MCP_TOKEN") {
		t.Errorf("with OFFSTAGE_MCP_TOKEN set, stderr:\n%s", out)
	}

	// A short one is taken, with a warning (found by an outsider's trial).
	_, _, _, stderr = startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=short"})
	if out := stderr(); strings.Contains(out, "short") || !strings.Contains(out, "is only 5 characters") {
		t.Errorf("with a 5-character OFFSTAGE_MCP_TOKEN, stderr:\n%s", out)
	}

	// One no client could send back (a newline $(cat file) kept) is
	// refused, without a word of it: every request got 401 before.
	for _, tok := range []string{"secret-with-a-newline\n", " secret", "two-line\nsecret"} {
		cmd, _ := offstage(t, []string{"OFFSTAGE_MCP_TOKEN=" + tok}, "mcp", "--http", "127.0.0.1:0")
		var errs bytes.Buffer
		cmd.Stderr = &errs
		if code := exitOf(t, cmd.Run()); code != 2 || !strings.Contains(errs.String(), "OFFSTAGE_MCP_TOKEN") || !strings.Contains(errs.String(), "no HTTP") || strings.Contains(errs.String(), "secret") {
			t.Errorf("OFFSTAGE_MCP_TOKEN=%q: exit %d: %s", tok, code, errs.String())
		}
	}

	_, _, endpoint, stderr := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN="})
	m := regexp.MustCompile(`Bearer ([0-9a-f]{48})`).FindStringSubmatch(stderr())
	if m == nil {
		t.Fatalf("no generated token printed:\n%s", stderr())
	}
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenAuth(m[1])}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatalf("the printed token does not work: %v", err)
	}
	cs.Close()
}

type tokenAuth string

func (b tokenAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPHTTPStopsAtOnceOnSIGTERM (issue 19, item 8): with a session open
// (its GET stream too) and a background loop running, SIGTERM stops the
// loop, closes the session and exits as soon as that is done, saying so in
// one line: at once for a loop that ends on SIGTERM, after the tasks'
// grace (3s) and SIGKILL for one that ignores it. Before, it took 20-25 s
// either way and logged closing err="context deadline exceeded".
func TestMCPHTTPStopsAtOnceOnSIGTERM(t *testing.T) {
	for _, c := range []struct {
		name, command string
		least, most   time.Duration
	}{
		{"a loop that ends on SIGTERM", "while true; do sleep 1; done", 0, 5 * time.Second},
		{"a loop that ignores SIGTERM", "trap '' TERM; while true; do sleep 1; done", procGrace - 500*time.Millisecond, procGrace + 7*time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			took := stopWithATask(t, c.command)
			if took < c.least || took > c.most {
				t.Errorf("offstage mcp took %v to exit after SIGTERM, want %v to %v", took, c.least, c.most)
			}
		})
	}
}

// stopWithATask runs offstage mcp --http with a session running command
// in the background, sends SIGTERM, checks that it exits with nothing
// left and says so in one line, and returns how long it took.
func stopWithATask(t *testing.T, command string) time.Duration {
	const token = "stop-test-token"
	cmd, mark, endpoint, stderr := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=" + token})
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenAuth(token)}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "run_in_background": true}})
	if err != nil || res.IsError {
		t.Fatalf("bash = %+v, %v", res, err)
	}
	var running []string
	waitUntil(t, "the loop runs", func() bool {
		running = survivors(t, mark)
		return len(running) >= 3 // offstage, sh and a sleep
	})
	t.Logf("running: %q", running)

	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("offstage mcp after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("offstage mcp still runs 20s after SIGTERM:\n%s", stderr())
	}
	took := time.Since(start)
	t.Logf("SIGTERM at %s, exit %v later\n%s", start.UTC().Format("15:04:05.000"), took, stderr())
	noSurvivors(t, mark)
	out := stderr()
	if n := strings.Count(out, "stopped serving HTTP: every task stopped, every session closed"); n != 1 || strings.Contains(out, "deadline exceeded") || !strings.Contains(out, "sessions=1") {
		t.Errorf("stderr after SIGTERM (want one line saying it stopped):\n%s", out)
	}
	return took
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procGrace is proc.Config.Grace's documented default.
const procGrace = 3 * time.Second

// TestMCPOverHTTPWithTheTypeScriptSDK (issue 23, item 17) walks the way
// the README gives to try the background flow by hand: a client that
// keeps one session over HTTP and sends the bearer token (the Inspector's
// web UI with the header; here the TypeScript SDK, which the Inspector is
// built on) starts a background shell, sees its output listed as a
// resource, reads it in later calls and waits for it. A wrong token is
// refused. Every structured result fits the tool's output schema (the
// SDK checks).
func TestMCPOverHTTPWithTheTypeScriptSDK(t *testing.T) {
	node := nodeBinary(t, "the TypeScript MCP SDK peer test")
	dir := nodePeer(t, "@modelcontextprotocol/sdk")
	const token = "node-http-test-token-8c1f"
	server, mark, endpoint, stderr := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=" + token})
	cmd := exec.Command(node, filepath.Join(dir, "http-client.mjs"), endpoint, token)
	var stdout, nodeErr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &nodeErr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the node client failed: %v\n%s\noffstage:\n%s", err, nodeErr.String(), stderr())
	}
	var got struct {
		WrongToken          string
		Tools               []string
		WithoutOutputSchema []string
		Started             tools.BashOutput
		Structured          bool
		Listed              []string
		First               string
		Waited              []string
		Result              string
		ListChanged         int
		ListedAfter         []string
		Read                string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("node printed %q: %v", stdout.String(), err)
	}
	const uri = "offstage://task/shell:1/output"
	switch {
	case !strings.Contains(got.WrongToken, "401"):
		t.Errorf("a wrong token: %q, want 401", got.WrongToken)
	case len(got.Tools) != 7 || len(got.WithoutOutputSchema) != 0:
		t.Errorf("tools %v, without an output schema %v", got.Tools, got.WithoutOutputSchema)
	case got.Started.TaskID != "shell:1" || got.Started.Status != "running" || !got.Structured:
		t.Errorf("started = %+v (structured %v)", got.Started, got.Structured)
	case !slices.Equal(got.Listed, []string{uri}) || len(got.ListedAfter) != 0 || got.ListChanged < 2:
		t.Errorf("listed %v while it ran, %v after, %d list_changed", got.Listed, got.ListedAfter, got.ListChanged)
	case !strings.HasPrefix(got.First, "tick 1\n"):
		t.Errorf("a later call read %q", got.First)
	case !slices.Equal(got.Waited, []string{"completed"}) || !strings.Contains(got.Result, "tick 4") || !strings.HasSuffix(got.Read, "tick 4\n"):
		t.Errorf("waited %v, result %q, resource %q", got.Waited, got.Result, got.Read)
	}
	server.Process.Signal(syscall.SIGTERM)
	server.Wait()
	noSurvivors(t, mark)
}

// Finding F9: offstage mcp --http --max-sessions 1 serves one session; a
// second client is refused with 503 naming the bound and the flag, and
// gets its place once the first ends.
func TestMCPHTTPMaxSessions(t *testing.T) {
	const token = "max-sessions-token-5c1e"
	_, _, endpoint, _ := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=" + token}, "--max-sessions", "1")
	connect := func() (*mcp.ClientSession, error) {
		transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenAuth(token)}}
		return mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), transport, nil)
	}
	first, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	if cs, err := connect(); err == nil {
		cs.Close()
		t.Fatal("a second session was opened with --max-sessions 1")
	}
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "at most 1 MCP session at once") || !strings.Contains(string(body), "--max-sessions") {
		t.Errorf("a second session: %d %s", res.StatusCode, body)
	}
	first.Close() // DELETE: its place is free once its stream has ended too
	deadline := time.Now().Add(10 * time.Second)
	for {
		second, err := connect()
		if err == nil {
			second.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMCPHTTPSIGTERMNamesTheEnd: a task that SIGTERM stops ends with the
// face's reason, as the journal keeps it ("mcp: the server was shut
// down"), as every other end of an MCP session names its face and why;
// it said only "the session's context was cancelled" (an outsider's
// finding).
func TestMCPHTTPSIGTERMNamesTheEnd(t *testing.T) {
	const token = "stop-test-token"
	state := t.TempDir()
	cmd, mark, endpoint, stderr := startHTTP(t, []string{"OFFSTAGE_MCP_TOKEN=" + token, "XDG_STATE_HOME=" + state}, "--no-journal=false")
	transport := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenAuth(token)}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sleep 100", "run_in_background": true}})
	if err != nil || res.IsError {
		t.Fatalf("bash = %+v, %v", res, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("offstage mcp after SIGTERM: %v\n%s", err, stderr())
	}
	noSurvivors(t, mark)
	show, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "tasks", "show", "shell:1", "--json")
	out, err := show.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ended_by":"session"`) || !strings.Contains(string(out), `"end_reason":"mcp: the server was shut down"`) {
		t.Errorf("offstage tasks show shell:1 after SIGTERM (%v):\n%s", err, out)
	}
}
