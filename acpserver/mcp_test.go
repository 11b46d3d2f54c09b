package acpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc/proctest"
)

// requireNodeEnv makes a missing node a failure of the tests that need
// it instead of a skip (.ci/run sets it; cmd/offstage's tests use it too).
const requireNodeEnv = "OFFSTAGE_REQUIRE_NODE"

// nodeMCPServer returns node and the path of a small MCP server built on
// the TypeScript SDK (cmd/offstage/testdata/node/mcp-server.mjs, beside
// the other TypeScript peers and their package.json), installing the npm
// packages first if they are missing, as .ci/run does. Without node it
// skips, or fails under OFFSTAGE_REQUIRE_NODE=1.
func nodeMCPServer(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	switch {
	case err != nil && os.Getenv(requireNodeEnv) != "":
		t.Fatalf("node is not installed and %s=1 requires the TypeScript MCP server test: install Node.js and npm", requireNodeEnv)
	case err != nil:
		t.Skipf("node is not installed: the TypeScript MCP server test needs it (%s=1 makes this a failure)", requireNodeEnv)
	}
	dir, _ := filepath.Abs(filepath.Join("..", "cmd", "offstage", "testdata", "node"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		npm := exec.Command("npm", "install", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error")
		npm.Dir = dir
		if out, err := npm.CombinedOutput(); err != nil {
			t.Fatalf("installing the TypeScript MCP SDK (as .ci/run does) failed: %v\n%s", err, out)
		}
	}
	return node, filepath.Join(dir, "mcp-server.mjs")
}

// TestEditorsMCPServer: an MCP server the editor passes in session/new (a
// real one, on the TypeScript SDK) is started with the editor's
// environment; its tools reach the model as mcp__NAME__TOOL; calls run
// with a card each, the read-only ones unasked and the others asked;
// results reach the model, capped with a note when long, and a failing
// tool is an error result. Closing the session ends the server and what
// it started.
func TestEditorsMCPServer(t *testing.T) {
	node, script := nodeMCPServer(t)
	marker := fmt.Sprintf("OFFSTAGE_ACP_MCP_TEST=%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano()) // unique: another run of the tests has its own
	model := `{"turns": [
		{"tool_calls": [{"name": "mcp__notes__echo", "input": {"text": "hi"}}]},
		{"expect": "from the editor: hi", "tool_calls": [{"name": "mcp__notes__write_note", "input": {"note": "n1"}}]},
		{"expect": "noted: n1", "tool_calls": [{"name": "mcp__notes__big", "input": {"n": 100000}}]},
		{"expect": "more bytes.*cut to fit", "tool_calls": [{"name": "mcp__notes__fail", "input": {}}]},
		{"expect": "it broke on purpose", "text": "done"}
	]}`
	h := start(t, model, acpserver.Config{})
	name, value, _ := strings.Cut(marker, "=")
	r, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: []acp.McpServer{{Stdio: &acp.McpServerStdio{
		Name: "notes", Command: node, Args: []string{script},
		Env: []acp.EnvVariable{{Name: "ECHO_PREFIX", Value: "from the editor: "}, {Name: name, Value: value}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := r.SessionId
	waitProcsOr(t, marker, func(n int) bool { return n >= 2 }, func() string { return strings.Join(h.lines(r.SessionId), "\n") }) // node and the sleep it started
	if got := h.prompt(t, id, "use the notes server"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s, want end_turn; updates:\n%s", got, strings.Join(h.lines(id), "\n"))
	}
	got := h.lines(id)
	for _, want := range []string{
		`tool_call pending read "notes: Echo"`,
		"tool_call_update completed from the editor: hi",
		`tool_call pending other "notes: write_note"`,
		"tool_call_update completed noted: n1",
		"tool_call_update failed fail (of the MCP server \"notes\") failed: it broke on purpose",
		"message done",
	} {
		if !has(got, want) {
			t.Errorf("no update %q; all:\n%s", want, strings.Join(got, "\n"))
		}
	}
	if asked := h.client.titles(); len(asked) != 1 || asked[0] != "notes: write_note" {
		t.Errorf("permission asked for %q; want write_note only (the others are read-only; it says it is not destructive, which is no reason not to ask)", asked)
	}
	if _, err := h.conn.CloseSession(t.Context(), acp.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	if n := len(proctest.Marked(marker)); n != 0 {
		t.Errorf("%d processes of the MCP server alive after session/close returned", n)
	}
}

// TestMCPServerThatFailsIsReported: a server that cannot start, or exits
// at once, is said to the user in the session (an agent message, with
// what it wrote to stderr), not only logged; the session works without
// it.
func TestMCPServerThatFailsIsReported(t *testing.T) {
	h := start(t, `{"turns": [{"text": "still here"}]}`, acpserver.Config{MCPTimeout: 300 * time.Millisecond})
	marker := fmt.Sprintf("OFFSTAGE_ACP_MCP_TEST=%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano()) // unique: another run of the tests has its own
	name, value, _ := strings.Cut(marker, "=")
	r, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: []acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "missing", Command: "/no/such/mcp-server", Args: []string{}, Env: []acp.EnvVariable{}}},
		{Stdio: &acp.McpServerStdio{Name: "dies", Command: "/bin/sh", Args: []string{"-c", "echo 'no config file' >&2; exit 3"}, Env: []acp.EnvVariable{}}},
		// Never answers, ignores the end of its input and starts another
		// process: it is stopped and its whole group reaped.
		{Stdio: &acp.McpServerStdio{Name: "silent", Command: "/bin/sh", Args: []string{"-c", "sleep 1000 & sleep 1000"}, Env: []acp.EnvVariable{{Name: name, Value: value}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(proctest.Marked(marker)); n != 0 {
		t.Errorf("%d processes of the server that never answered alive after session/new returned", n)
	}
	id := r.SessionId
	h.client.await(t, "the failures are told", func(us []acp.SessionNotification) bool {
		ls := lines(us, id)
		return has(ls, `The MCP server "missing" was not started`) && has(ls, `The MCP server "dies" was not started`) && has(ls, `The MCP server "silent" was not started`)
	})
	got := strings.Join(h.lines(id), "\n")
	for _, want := range []string{"/no/such/mcp-server", "no config file", "did not answer within the time allowed", "Its tools are not available in this session."} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if got := h.prompt(t, id, "hello"); got != acp.StopReasonEndTurn {
		t.Errorf("stopReason = %s, want end_turn", got)
	}
}

// greetServer serves an MCP server over HTTP with one read-only tool,
// greet, to clients that send the header Authorization: Bearer
// editor-key, until the test ends.
func greetServer(t *testing.T) string {
	server := mcp.NewServer(&mcp.Implementation{Name: "web", Version: "1"}, nil)
	type in struct {
		Name string `json:"name"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "Greets.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello, " + in.Name}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer editor-key" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(web.Close) // after the harness's hang-up, which closes the sessions' connections
	return web.URL
}

func httpServer(url string) []acp.McpServer {
	return []acp.McpServer{{Http: &acp.McpServerHttpInline{
		Type: "http", Name: "web", Url: url, Headers: []acp.HttpHeader{{Name: "Authorization", Value: "Bearer editor-key"}},
	}}}
}

// TestEditorsMCPServerOverHTTP: an HTTP server (advertised in
// mcpCapabilities) gets the editor's headers, and its tool's result
// reaches the model.
func TestEditorsMCPServerOverHTTP(t *testing.T) {
	url := greetServer(t)
	h := start(t, `{"turns": [
		{"tool_calls": [{"name": "mcp__web__greet", "input": {"name": "editor"}}]},
		{"expect": "hello, editor", "text": "greeted"}
	]}`, acpserver.Config{})
	init, err := h.conn.Initialize(t.Context(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil || !init.AgentCapabilities.McpCapabilities.Http {
		t.Fatalf("initialize = %+v, %v; want mcpCapabilities.http", init.AgentCapabilities.McpCapabilities, err)
	}
	r, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: httpServer(url)})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.prompt(t, r.SessionId, "greet"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines(r.SessionId), "\n"))
	}
	if got := h.lines(r.SessionId); !has(got, "tool_call_update completed hello, editor") {
		t.Errorf("no completed card with the greeting; all:\n%s", strings.Join(got, "\n"))
	}
}

// TestLoadedSessionConnectsTheEditorsMCPServers: session/load's
// mcpServers are connected as session/new's are.
func TestLoadedSessionConnectsTheEditorsMCPServers(t *testing.T) {
	url := greetServer(t)
	rec := &recorded{}
	h := start(t, `{"turns": [
		{"text": "unused: the recorded conversation already has two answers"},
		{"text": "unused"},
		{"expect": "greet", "tool_calls": [{"name": "mcp__web__greet", "input": {"name": "loader"}}]},
		{"expect": "hello, loader", "text": "greeted"}
	]}`, acpserver.Config{Surface: agent.Surface{Journal: rec}})
	rec.cwd = h.dir
	if _, err := h.conn.LoadSession(t.Context(), acp.LoadSessionRequest{Cwd: h.dir, SessionId: "old", McpServers: httpServer(url)}); err != nil {
		t.Fatal(err)
	}
	if got := h.prompt(t, "old", "greet"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines("old"), "\n"))
	}
}

// testMCPServerEnv makes the test binary a stdio MCP server (see
// TestMain) with one read-only tool, ping, that first starts a daemon: a
// sleep in a session of its own, out of the server's process group,
// as a language server or npx's node may be.
const testMCPServerEnv = "ACPSERVER_TEST_MCP_SERVER"

func testMCPServer() {
	daemon := exec.Command("sleep", "3600")
	daemon.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := daemon.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "no daemon:", err)
		os.Exit(1)
	}
	daemon.Process.Release()
	server := mcp.NewServer(&mcp.Implementation{Name: "daemonizing", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ping", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil, nil
		})
	if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if os.Getenv(ignoreEOFEnv) != "" { // a server that outlives its input, and SIGTERM
		signal.Ignore(syscall.SIGTERM)
		select {}
	}
	os.Exit(0)
}

// ignoreEOFEnv makes testMCPServer go on after its input ends, ignoring
// SIGTERM.
const ignoreEOFEnv = "ACPSERVER_TEST_MCP_IGNORE_EOF"

// TestAnMCPServerThatIgnoresEOFEndsWithTheSession pins issue 34's tenth
// item: a stdio server that neither exits when its input ends nor on
// SIGTERM is killed, with its daemon, by the time session/close returns.
func TestAnMCPServerThatIgnoresEOFEndsWithTheSession(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("OFFSTAGE_ACP_MCP_TEST=%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano())
	name, value, _ := strings.Cut(marker, "=")
	h := start(t, `{"turns": [
		{"tool_calls": [{"name": "mcp__stubborn__ping", "input": {}}]},
		{"expect": "pong", "text": "pinged"}
	]}`, acpserver.Config{})
	r, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: []acp.McpServer{{Stdio: &acp.McpServerStdio{
		Name: "stubborn", Command: exe, Args: []string{},
		Env: []acp.EnvVariable{{Name: testMCPServerEnv, Value: "1"}, {Name: ignoreEOFEnv, Value: "1"}, {Name: name, Value: value}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	waitProcsOr(t, marker, func(n int) bool { return n >= 2 }, func() string { return strings.Join(h.lines(r.SessionId), "\n") })
	if got := h.prompt(t, r.SessionId, "ping"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines(r.SessionId), "\n"))
	}
	if _, err := h.conn.CloseSession(t.Context(), acp.CloseSessionRequest{SessionId: r.SessionId}); err != nil {
		t.Fatal(err)
	}
	if pids := proctest.Marked(marker); len(pids) != 0 {
		t.Errorf("processes %v of an MCP server that ignores EOF and SIGTERM alive after session/close returned", pids)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestMCPServersDaemonEndsWithTheSession: a stdio server is contained as
// shells are (a cgroup or marks, not its process group alone), so what it
// started in a session of its own (setsid) ends when the session closes,
// not only the server (finding F3).
func TestMCPServersDaemonEndsWithTheSession(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("OFFSTAGE_ACP_MCP_TEST=%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano()) // unique: another run of the tests has its own
	name, value, _ := strings.Cut(marker, "=")
	h := start(t, `{"turns": [
		{"tool_calls": [{"name": "mcp__daemonizing__ping", "input": {}}]},
		{"expect": "pong", "text": "pinged"}
	]}`, acpserver.Config{})
	r, err := h.conn.NewSession(t.Context(), acp.NewSessionRequest{Cwd: h.dir, McpServers: []acp.McpServer{{Stdio: &acp.McpServerStdio{
		Name: "daemonizing", Command: exe, Args: []string{},
		Env: []acp.EnvVariable{{Name: testMCPServerEnv, Value: "1"}, {Name: name, Value: value}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	waitProcsOr(t, marker, func(n int) bool { return n >= 2 }, func() string { return strings.Join(h.lines(r.SessionId), "\n") }) // the server and its daemon
	if got := h.prompt(t, r.SessionId, "ping"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines(r.SessionId), "\n"))
	}
	if _, err := h.conn.CloseSession(t.Context(), acp.CloseSessionRequest{SessionId: r.SessionId}); err != nil {
		t.Fatal(err)
	}
	if pids := proctest.Marked(marker); len(pids) != 0 {
		t.Errorf("processes %v of the MCP server alive after session/close returned (its setsid'd daemon must end too)", pids)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
