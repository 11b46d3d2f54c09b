package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// mcpClient connects the Go MCP SDK's client to offstage mcp (with args)
// on state, over its stdio. The session is closed at the end of the test.
func mcpClient(t *testing.T, state string, args ...string) (cs *mcp.ClientSession, cmd *exec.Cmd, mark string, stderr *syncBuffer) {
	t.Helper()
	cmd, mark = offstage(t, []string{"XDG_STATE_HOME=" + state}, append([]string{"mcp"}, args...)...)
	stderr = new(syncBuffer)
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to offstage mcp: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cmd, mark, stderr
}

// startShell calls bash in the background and returns the task's id.
func startShell(t *testing.T, cs *mcp.ClientSession, command string) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command, "run_in_background": true}})
	if err != nil || res.IsError {
		t.Fatalf("bash = %+v, %v", res, err)
	}
	var out tools.BashOutput
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &out)
	if out.TaskID == "" {
		t.Fatalf("bash = %s", res.Content[0].(*mcp.TextContent).Text)
	}
	return out.TaskID
}

// waitLive polls the supervisor until its live sessions satisfy ok, and
// returns them.
func (sv *served) waitLive(t *testing.T, what string, ok func([]liveSession) bool) []liveSession {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := sv.live(t)
		if ok(st.Sessions) {
			return st.Sessions
		}
		if time.Now().After(deadline) {
			t.Fatalf("offstage serve's sessions never came to %s: %+v\n%s", what, st.Sessions, sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// detachedMCP says whether sessions hold exactly one, of face mcp, with
// no client.
func detachedMCP(s []liveSession) bool {
	return len(s) == 1 && s[0].Face == "mcp" && !s[0].Attached && !s[0].Left.IsZero()
}

// TestMCPSessionOutlivesItsClientUnderServe: offstage mcp on stdio relays
// to offstage serve; the Go SDK's client starts a background shell and
// is SIGKILLed; the session detaches and the shell goes on; offstage
// sessions and offstage tasks show it; its result is recorded when it
// ends, and the session closes then (issue 38 items 2, 4): no client can
// come back to it, and it stayed for --idle (an outsider's finding).
func TestMCPSessionOutlivesItsClientUnderServe(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state, "--idle", "1h")
	cs, cmd, mark, stderr := mcpClient(t, state)
	gate := filepath.Join(t.TempDir(), "go")
	id := startShell(t, cs, "while [ ! -e "+gate+" ]; do sleep 0.05; done; echo shell-finished")
	if !strings.Contains(stderr.String(), "the MCP session is hosted by offstage serve") {
		t.Errorf("offstage mcp does not say it relays to offstage serve:\n%s", stderr.String())
	}
	sv.waitLive(t, "one attached MCP session", func(s []liveSession) bool { return len(s) == 1 && s[0].Face == "mcp" && s[0].Attached })
	waitSurvivors(t, mark, 2) // offstage mcp and the shell
	cmd.Process.Kill()

	s := sv.waitLive(t, "a detached MCP session", detachedMCP)[0]
	if len(survivors(t, mark)) == 0 {
		o, e, _, _ := runIn(t, state, nil, "tasks", "show", "--session", s.ID, id)
		t.Fatalf("the shell died with its client: %s%s\n%s", o, e, sv.stderr.String())
	}
	out, errOut, code, _ := runIn(t, state, nil, "sessions")
	if code != 0 || !strings.Contains(out, s.ID+"  mcp") || !strings.Contains(out, "detached") || !strings.Contains(out, id+" running") {
		t.Errorf("offstage sessions: exit %d; want %s, mcp, detached, %s running:\n%s%s", code, s.ID, id, out, errOut)
	}
	// --json names a task's fields as tasks --json does (it gave Go's
	// field names and a state number: an outsider's finding).
	if js, errOut, code, _ := runIn(t, state, nil, "sessions", "--json"); code != 0 || !strings.Contains(js, `"task_id":"`+id+`"`) || !strings.Contains(js, `"state":"running"`) || strings.Contains(js, `"ID"`) {
		t.Errorf("offstage sessions --json: exit %d:\n%s%s", code, js, errOut)
	}
	_, errOut, code, _ = runIn(t, state, nil, "tasks")
	if code != 0 || !strings.Contains(errOut, s.ID+" (mcp, no client for") || !strings.Contains(errOut, "running: "+id+" running") {
		t.Errorf("offstage tasks: exit %d; want the MCP session, no client, %s running:\n%s", code, id, errOut)
	}
	// The session waits for its work to end.
	sv.waitLive(t, "detached for two seconds", func(s []liveSession) bool {
		return detachedMCP(s) && time.Since(s[0].Left) > 2*time.Second
	})
	if len(survivors(t, mark)) == 0 {
		t.Fatalf("the shell did not outlive its client")
	}
	os.WriteFile(gate, nil, 0o644)
	r := waitTask(t, state, id, func(r map[string]any) bool { return r["state"] != "running" })
	if r["state"] != "completed" || r["ended_by"] != "self" {
		t.Errorf("%s after its client was SIGKILLed: %v; want completed, ended_by self", id, r)
	}
	sv.waitLive(t, "none (its work ended)", func(s []liveSession) bool { return len(s) == 0 })
	if want := "closed session " + s.ID + " (mcp: the client went away, and the session's last task has ended)"; !strings.Contains(sv.stderr.String(), want) {
		t.Errorf("offstage serve does not say %q:\n%s", want, sv.stderr.String())
	}
	sessions, _ := journalOf(t, state)
	if len(sessions) != 1 || sessions[0].ID != s.ID || sessions[0].Surface != "mcp" || sessions[0].Ended.IsZero() {
		t.Errorf("the journal's sessions: %+v; want %s, mcp, ended", sessions, s.ID)
	}
	noSurvivors(t, mark)
}

// TestSessionsCloseEndsADetachedMCPSession: a client starts a shell and
// closes its stdin; the session detaches; offstage sessions close ends
// its shell with ended_by user, and nothing of its group survives. An
// unknown id, and no supervisor, get a clear error (item 4).
func TestSessionsCloseEndsADetachedMCPSession(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	cs, _, mark, _ := mcpClient(t, state)
	id := startShell(t, cs, "sleep 300 & sleep 300 & wait")
	waitSurvivors(t, mark, 3) // sh and two sleeps
	cs.Close()                // end of its stdin
	s := sv.waitLive(t, "a detached MCP session", detachedMCP)[0]

	_, errOut, code, _ := runIn(t, state, nil, "sessions", "close", "nosuch")
	if code != 2 || !strings.Contains(errOut, `no live session "nosuch" under offstage serve`) {
		t.Errorf("sessions close of an unknown id: exit %d: %s", code, errOut)
	}
	// The id is echoed quoted, its control characters escaped, bounded.
	_, errOut, code, _ = runIn(t, state, nil, "sessions", "close", "no\x1b[2J"+strings.Repeat("x", 500))
	if want := `no live session "no\x1b[2J` + strings.Repeat("x", 73) + `…" under`; code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("sessions close of an id with an escape: exit %d: %s, want %s", code, errOut, want)
	}
	out, errOut, code, _ := runIn(t, state, nil, "sessions", "close", s.ID[:len(s.ID)-2])
	if code != 0 || !strings.Contains(out, "closed session "+s.ID+": 1 unfinished task ended") {
		t.Errorf("sessions close: exit %d:\n%s%s", code, out, errOut)
	}
	noSurvivors(t, mark)
	r := waitTask(t, state, id, func(r map[string]any) bool { return r["state"] != "running" })
	if r["ended_by"] != "user" || !strings.Contains(r["end_reason"].(string), "offstage sessions close") {
		t.Errorf("%s after offstage sessions close: ended_by %v, end_reason %q; want user, offstage sessions close", id, r["ended_by"], r["end_reason"])
	}
	if n := len(sv.live(t).Sessions); n != 0 {
		t.Errorf("offstage serve still hosts %d sessions", n)
	}
	out, errOut, code, _ = runIn(t, state, nil, "sessions")
	if code != 0 || !strings.Contains(out, "hosts no live session") {
		t.Errorf("offstage sessions after the close: exit %d:\n%s%s", code, out, errOut)
	}

	none := serveState(t)
	for _, args := range [][]string{{"sessions"}, {"sessions", "close", s.ID}} {
		_, errOut, code, _ := runIn(t, none, nil, args...)
		if code != 2 || !strings.Contains(errOut, "no offstage serve runs for") {
			t.Errorf("offstage %s with no supervisor: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestMCPClientsUnderServe: a session with nothing running when its
// client goes (SIGTERM of offstage mcp) closes at once; --no-serve keeps
// the session in the client's process, whose work ends with it; stopping
// offstage serve ends a detached session's shell with ended_by
// supervisor.
func TestMCPClientsUnderServe(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)

	// A mistake in the client's settings is said by the client itself,
	// not only in the supervisor's log.
	_, errOut, code, _ := runIn(t, state, nil, "mcp", "--dir", "/nonexistent/dir")
	if code != 2 || !strings.Contains(errOut, `--dir "/nonexistent/dir" is not a directory`) || strings.Contains(errOut, "hosted by offstage serve") {
		t.Errorf("offstage mcp --dir /nonexistent/dir under serve: exit %d: %s", code, errOut)
	}

	cs, cmd, _, _ := mcpClient(t, state)
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "task_list", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	sv.waitLive(t, "one attached MCP session", func(s []liveSession) bool { return len(s) == 1 && s[0].Attached })
	cmd.Process.Signal(syscall.SIGTERM)
	sv.waitLive(t, "none (nothing ran)", func(s []liveSession) bool { return len(s) == 0 })

	// offstage sessions close of a session whose client is attached ends
	// its work and disconnects the client.
	cs, mcpCmd, mark, mcpErr := mcpClient(t, state)
	id := startShell(t, cs, "sleep 300")
	waitSurvivors(t, mark, 2)
	s := sv.waitLive(t, "one attached MCP session", func(s []liveSession) bool { return len(s) == 1 && s[0].Attached })[0]
	if out, errOut, code, _ := runIn(t, state, nil, "sessions", "close", s.ID); code != 0 || !strings.Contains(out, "1 unfinished task ended") {
		t.Errorf("sessions close of an attached MCP session: exit %d:\n%s%s", code, out, errOut)
	}
	waited := make(chan error, 1)
	go func() { waited <- cs.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the MCP client of a closed session is still connected")
	}
	// offstage mcp says why its connection ended, and fails: it exited 0
	// saying nothing (an outsider's finding).
	if mcpCmd.ProcessState == nil || mcpCmd.ProcessState.ExitCode() != 1 || !strings.Contains(mcpErr.String(), "closed the mcp connection while its client was still there") {
		t.Errorf("offstage mcp whose session was closed under it: %v\n%s", mcpCmd.ProcessState, mcpErr.String())
	}
	if r := waitTask(t, state, id, func(r map[string]any) bool { return r["state"] != "running" }); r["ended_by"] != "user" {
		t.Errorf("%s of the attached session closed: %v; want ended_by user", id, r)
	}
	noSurvivors(t, mark)

	cs, _, mark, stderr := mcpClient(t, state, "--no-serve")
	startShell(t, cs, "sleep 300")
	waitSurvivors(t, mark, 1)
	if strings.Contains(stderr.String(), "offstage serve") || len(sv.live(t).Sessions) != 0 {
		t.Errorf("offstage mcp --no-serve went to offstage serve: %+v\n%s", sv.live(t), stderr.String())
	}
	cs.Close()
	noSurvivors(t, mark)

	cs, _, mark, _ = mcpClient(t, state)
	id = startShell(t, cs, "sleep 300")
	waitSurvivors(t, mark, 1)
	cs.Close()
	s = sv.waitLive(t, "a detached MCP session", detachedMCP)[0]
	if _, errOut, code, _ := runIn(t, state, nil, "serve", "stop"); code != 0 {
		t.Fatalf("serve stop: exit %d: %s", code, errOut)
	}
	sv.wait(t)
	noSurvivors(t, mark)
	var r map[string]any
	for _, x := range journalTasks(t, state) {
		if x["session"] == s.ID && x["task_id"] == id {
			r = x
		}
	}
	if r == nil || r["ended_by"] != "supervisor" {
		t.Errorf("%s of the detached MCP session after serve stop: %v; want ended_by supervisor", id, r)
	}
}

// TestSessionsCloseEndsADetachedACPSession: offstage sessions lists an
// ACP session whose editor quit (the TypeScript ACP SDK client), and
// offstage sessions close ends its shell with ended_by user.
func TestSessionsCloseEndsADetachedACPSession(t *testing.T) {
	node := nodeBinary(t, "the TypeScript ACP SDK peer test")
	dir := nodePeer(t, "@agentclientprotocol/sdk")
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 300", "run_in_background": true}}]},
		{"text": "It runs in the background."}]}`)
	quit, mark := offstage(t, []string{"XDG_STATE_HOME=" + state})
	quit.Path, quit.Args = node, []string{node, filepath.Join(dir, "acp-quit.mjs"), t.TempDir(), "start it", os.Args[0], "acp", "--script", script, "--yolo"}
	if out, err := quit.CombinedOutput(); err != nil {
		t.Fatalf("the node client failed: %v\n%s", err, out)
	}
	waitSurvivors(t, mark, 1)
	s := sv.waitLive(t, "a detached ACP session", func(s []liveSession) bool {
		return len(s) == 1 && s[0].Face == "acp" && !s[0].Attached && !s[0].Left.IsZero()
	})[0]
	out, errOut, code, _ := runIn(t, state, nil, "sessions")
	if code != 0 || !strings.Contains(out, s.ID+"  acp") || !strings.Contains(out, "shell:1 running") {
		t.Errorf("offstage sessions: exit %d; want %s, acp, shell:1 running:\n%s%s", code, s.ID, out, errOut)
	}
	out, errOut, code, _ = runIn(t, state, nil, "sessions", "close", s.ID)
	if code != 0 || !strings.Contains(out, "closed session "+s.ID+": 1 unfinished task ended") {
		t.Errorf("sessions close: exit %d:\n%s%s", code, out, errOut)
	}
	noSurvivors(t, mark)
	if n := sv.liveACP(t); n != 0 {
		t.Errorf("offstage serve keeps %d ACP sessions after the close", n)
	}
	r := waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] != "running" })
	if r["ended_by"] != "user" || !strings.Contains(r["end_reason"].(string), "offstage sessions close") {
		t.Errorf("shell:1 after offstage sessions close: ended_by %v, end_reason %q; want user", r["ended_by"], r["end_reason"])
	}
}

// TestServeStopAnswersTheCallsInFlight: offstage serve stop while an MCP
// client's task_wait waits on a running shell, and while an editor's
// session/prompt waits in task_wait too: each gets its answer (the shell
// ended by the supervisor; the prompt cancelled) before its connection
// ends, and its relay exits 1. The answers were dropped, the MCP one
// while the journal marked its result delivered (an outsider's finding).
func TestServeStopAnswersTheCallsInFlight(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)

	progressed := make(chan struct{}, 1)
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "mcp")
	mcpErr := new(syncBuffer)
	cmd.Stderr = mcpErr
	client := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		}})
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to offstage mcp: %v\n%s", err, mcpErr.String())
	}
	defer cs.Close()
	id := startShell(t, cs, "sleep 301")
	waitSurvivors(t, mark, 2)
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	waited := make(chan answer, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "task_wait", Arguments: map[string]any{"task_ids": []string{id}, "timeout_seconds": 300}}
		p.SetProgressToken("wait")
		res, err := cs.CallTool(t.Context(), p)
		waited <- answer{res, err}
	}()
	<-progressed // the wait is in flight

	acp := acpLines(t, state, "--yolo", "--script", writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 300", "run_in_background": true}}]},
		{"tool_calls": [{"name": "task_wait", "input": {"task_ids": ["shell:1"], "timeout_seconds": 300}}]},
		{"text": "unreached"}]}`))
	acp.call(t, 1, "initialize", `{"protocolVersion": 1, "clientCapabilities": {}}`)
	var created struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(acp.call(t, 2, "session/new", `{"cwd": "/", "mcpServers": []}`), &created)
	acp.send(t, 3, "session/prompt", `{"sessionId": "`+created.SessionID+`", "prompt": [{"type": "text", "text": "go"}]}`)
	acp.until(t, `"title":"Wait for shell:1"`)

	sv.stop(t)
	a := <-waited
	if a.err != nil || a.res.IsError || !strings.Contains(a.res.Content[0].(*mcp.TextContent).Text, `"ended_by":"supervisor"`) {
		t.Errorf("task_wait in flight when offstage serve stopped = %+v, %v; want the shell's result, ended_by supervisor", a.res, a.err)
	}
	mcpShell := func(r map[string]any) bool { return r["label"] == "sleep 301" && r["state"] != "running" }
	if r := waitTask(t, state, id, mcpShell); r["delivered"] != true {
		t.Errorf("%s after its task_wait answered: %v; want delivered", id, r)
	}
	if line := acp.until(t, `"id":3`); !strings.Contains(line, `"stopReason":"cancelled"`) {
		t.Errorf("session/prompt in flight when offstage serve stopped = %s; want stopReason cancelled", line)
	}
	cs.Wait()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(mcpErr.String(), "it was stopped") {
		t.Errorf("offstage mcp cut off by the stop: %v\n%s", cmd.ProcessState, mcpErr.String())
	}
	if code := acp.wait(t); code != 1 {
		t.Errorf("offstage acp cut off by the stop: exit %d", code)
	}
	noSurvivors(t, mark)
}

// lineClient is a raw JSON-RPC peer of offstage acp over its stdio.
type lineClient struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  *bufio.Scanner
	stderr *syncBuffer
}

// acpLines starts offstage acp with args on state.
func acpLines(t *testing.T, state string, args ...string) *lineClient {
	t.Helper()
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, append([]string{"acp"}, args...)...)
	c := &lineClient{cmd: cmd, stderr: new(syncBuffer)}
	cmd.Stderr = c.stderr
	var err error
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.lines = bufio.NewScanner(out)
	c.lines.Buffer(nil, 1<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c
}

func (c *lineClient) send(t *testing.T, id int, method, params string) {
	t.Helper()
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc": "2.0", "id": %d, "method": %q, "params": %s}`+"\n", id, method, params); err != nil {
		t.Fatal(err)
	}
}

// until reads lines until one holds want, and returns it.
func (c *lineClient) until(t *testing.T, want string) string {
	t.Helper()
	for c.lines.Scan() {
		if line := c.lines.Text(); strings.Contains(line, want) {
			return line
		}
	}
	t.Fatalf("offstage acp ended its output (%v) before a line with %s:\n%s", c.lines.Err(), want, c.stderr.String())
	return ""
}

// call sends a request and returns its result.
func (c *lineClient) call(t *testing.T, id int, method, params string) json.RawMessage {
	t.Helper()
	c.send(t, id, method, params)
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	line := c.until(t, fmt.Sprintf(`"id":%d`, id))
	if json.Unmarshal([]byte(line), &r); r.Result == nil {
		t.Fatalf("%s = %s", method, line)
	}
	return r.Result
}

// wait closes the input and returns the exit code.
func (c *lineClient) wait(t *testing.T) int {
	t.Helper()
	c.in.Close()
	for c.lines.Scan() {
	}
	c.cmd.Wait()
	return c.cmd.ProcessState.ExitCode()
}

// TestAnEndedConnectionAnswersTheCallInFlight pins the mechanism behind
// TestServeStopAnswersTheCallsInFlight, whose order is a race: the
// supervisor ends an MCP client's connection while a task_wait waits,
// and only then closes its session. The wait's answer, the shell the
// close ended, still reaches the client: the SDK used to be told to
// close the connection, which drops every answer written after it.
func TestAnEndedConnectionAnswersTheCallInFlight(t *testing.T) {
	sup := newSupervisor(nil, nil, time.Hour, slog.New(slog.DiscardHandler), func(error) {})
	c0, c1 := unixPair(t)
	conns := []*net.UnixConn{c0, c1}
	home := t.TempDir()
	h := serveHeader{Face: "mcp", Dir: home, Env: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}}
	served := make(chan struct{})
	go func() {
		defer close(served)
		sup.serveStream(conns[0], bufio.NewReader(conns[0]), h, mcpFace)
		conns[0].Close()
	}()

	progressed := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case progressed <- struct{}{}:
			default:
			}
		}})
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: conns[1], Writer: conns[1]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := startShell(t, cs, "sleep 300")
	waited := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "task_wait", Arguments: map[string]any{"task_ids": []string{id}, "timeout_seconds": 300}}
		p.SetProgressToken("wait")
		res, err := cs.CallTool(t.Context(), p)
		if err != nil {
			t.Errorf("task_wait: %v", err)
		}
		waited <- res
	}()
	<-progressed // the wait is in flight

	sup.endFaces()
	sup.mu.Lock()
	var hs []*hosted
	for _, h := range sup.sessions {
		hs = append(hs, h)
	}
	sup.mu.Unlock()
	if len(hs) != 1 {
		t.Fatalf("the supervisor hosts %d sessions; want the MCP client's", len(hs))
	}
	sup.close(hs[0], &task.EndError{By: task.BySupervisor, Reason: "a test", Err: task.ErrClosed})
	if res := <-waited; res == nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"ended_by":"supervisor"`) {
		t.Errorf("task_wait in flight when its connection ended = %+v; want the shell's result, ended_by supervisor", res)
	}
	<-served
}

// TestRelaySaysTheSupervisorDied (an outsider's finding): a relayed
// offstage mcp whose supervisor was SIGKILLed said it "was stopped, or
// offstage sessions close ended the session", neither of which happened:
// a death is named among the causes (the relay cannot tell it from a
// stop: both close the connection as the supervisor exits).
func TestRelaySaysTheSupervisorDied(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "mcp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut := new(syncBuffer)
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: %q, %v\n%s", line, err, errOut.String())
	}
	sv.cmd.Process.Kill()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(errOut.String(), "or it died") {
		t.Errorf("the relay after its supervisor was killed: exit %d:\n%s", code, errOut.String())
	}
}

// TestAttachToAnMCPSessionSaysWhatItIs (an outsider's finding): run
// --attach of a live MCP (or ACP) session said there was no live session
// of that id, and sent the user to --resume, which refuses a live one.
func TestAttachToAnMCPSessionSaysWhatItIs(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	defer sv.stop(t)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "mcp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_list","arguments":{}}}`+"\n")
	if line, err := out.ReadString('\n'); err != nil || !strings.Contains(line, `"id":2`) {
		t.Fatalf("task_list: %q, %v", line, err)
	}
	st := sv.live(t)
	if len(st.Sessions) != 1 || st.Sessions[0].Face != "mcp" {
		t.Fatalf("live sessions: %+v", st.Sessions)
	}
	id := st.Sessions[0].ID
	_, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach", id)
	if code != 2 || !strings.Contains(errOut, "is an mcp session") || strings.Contains(errOut, "--resume") {
		t.Errorf("run --attach %s of an MCP session: exit %d: %s", id, code, errOut)
	}
}

// unixPair returns the two ends of a connected Unix socket, closed when
// the test ends.
func unixPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		syscall.CloseOnExec(fd)
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// A relayed session that offstage serve ended, or whose client went, is
// logged at info, saying which; one that ended on another error stays an
// error.
func TestARelayedSessionsOrdinaryEndIsNoError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string // "" for the SDK's own record
	}{
		{errInputCut, `level=INFO msg="server session ended: offstage serve ended it"`},
		{fmt.Errorf("read unix serve.sock: %w", &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}), `level=INFO msg="server session ended: its client went"`},
		{fmt.Errorf("calling notifications/resources/list_changed: %w", syscall.EPIPE), `level=INFO msg="server session ended: its client went"`},
		{io.ErrUnexpectedEOF, `level=ERROR msg="server session ended with error"`},
	} {
		var b strings.Builder
		l := endsQuietly(slog.New(slog.NewTextHandler(&b, nil)).With("face", "mcp"))
		l.Error(sessionEndedWithError, "error", c.err)
		if !strings.Contains(b.String(), c.want) || !strings.Contains(b.String(), "face=mcp") {
			t.Errorf("%v logged %q, want %q", c.err, b.String(), c.want)
		}
		b.Reset()
		warn := endsQuietly(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelWarn})))
		warn.Error(sessionEndedWithError, "error", c.err)
		if quiet := strings.Contains(c.want, "INFO"); quiet != (b.Len() == 0) {
			t.Errorf("%v at level warn logged %q", c.err, b.String())
		}
	}
}
