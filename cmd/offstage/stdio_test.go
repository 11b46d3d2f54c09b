package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/rpcline/rpclinetest"
)

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// Issue 19: `printf '%s\n' '<initialize>' | offstage mcp` printed nothing:
// the SDK stops writing once stdin ends. Now what was read is answered
// first, and the journal does not claim to be behind.
func TestMCPAnswersWhatWasReadBeforeStdinEnds(t *testing.T) {
	cmd, mark := offstage(t, nil, "mcp")
	cmd.Stdin = strings.NewReader(mcpInitialize + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("offstage mcp: %v\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(string(out), `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Errorf("stdout = %q, want the reply to initialize", out)
	}
	if strings.Contains(stderr.String(), "behind") {
		t.Errorf("stderr: %s", stderr.String())
	}
	noSurvivors(t, mark)
}

// Issue 19: session/new read just before stdin ends got the reply, "the
// agent is shutting down" or nothing, and the journal said it was 8192
// records behind while it was closing.
func TestACPAnswersWhatWasReadBeforeStdinEnds(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": []}`), 0o644)
	for _, extra := range [][]string{{"--no-journal"}, nil} {
		args := append([]string{"acp", "--script", script}, extra...)
		for range 3 {
			cmd, mark := offstage(t, nil, args...)
			cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
				`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + t.TempDir() + `","mcpServers":[]}}` + "\n")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("offstage %s: %v\n%s", args, err, stderr.String())
			}
			if !strings.Contains(string(out), `{"jsonrpc":"2.0","id":1,"result":{`) || !strings.Contains(string(out), `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"`) {
				t.Errorf("offstage %s: stdout = %q, want replies to both", args, out)
			}
			if strings.Contains(stderr.String(), "journal is") {
				t.Errorf("offstage %s: stderr: %s", args, stderr.String())
			}
			noSurvivors(t, mark)
		}
	}
}

// Issue 19: each of these lines ended `offstage mcp` and cancelled its
// shells. Now each is answered and the session goes on.
func TestMCPSurvivesTheLinesOfIssue19(t *testing.T) {
	cmd, mark := offstage(t, nil, "mcp")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := rpclinetest.Start(in, out)
	p.Call(t, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	p.Send(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if reply, _ := p.Call(t, "tools/call", `{"name":"bash","arguments":{"command":"sleep 1000","run_in_background":true}}`); !bytes.Contains(reply, []byte(`shell:1`)) {
		t.Fatalf("bash = %s", reply)
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`[]`, `[1,2,3]`, `[{}]`,
		`[{"jsonrpc":"2.0","id":41,"method":"ping"}]`,
		strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
		`{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"task_list","arguments":{"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}}}`,
	} {
		p.Send(t, []byte(line))
		if reply, _ := p.Call(t, "tools/call", `{"name":"task_list","arguments":{}}`); !bytes.Contains(reply, []byte(`"status":"running"`)) {
			t.Fatalf("after %.40s: task_list = %s", line, reply)
		}
	}
	for _, id := range []string{`1.5`, `1e300`} {
		if reply := p.Expect(t, id, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`); !bytes.Contains(reply, []byte(`"code":-32600`)) {
			t.Errorf("ping with id %s = %s", id, reply)
		}
	}
	p.Close(t)
	if err := cmd.Wait(); err != nil {
		t.Errorf("offstage mcp: %v\n%s", err, stderr.String())
	}
	noSurvivors(t, mark)
}

// Finding F3: an editor's stdio MCP server, and a daemon it started in a
// session of its own, end when `offstage acp` is SIGKILLed: the server
// is contained as shells are, so the keeper ends it. (Before, both
// survived, re-parented to init.) The server is this offstage's own
// `offstage mcp`, started through a shell that first starts the daemon.
func TestACPsMCPServerEndsWhenTheAgentIsKilled(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": []}`), 0o644)
	cmd, mark := offstage(t, nil, "acp", "--no-journal", "--script", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := rpclinetest.Start(in, out)
	p.Call(t, "initialize", `{"protocolVersion":1}`)
	server, _ := json.Marshal(map[string]any{"name": "inner", "command": "/bin/sh", "env": []any{},
		"args": []string{"-c", `(setsid sleep 3600 &); exec "$0" mcp --no-journal`, os.Args[0]}})
	if reply, _ := p.Call(t, "session/new", `{"cwd":`+strconv.Quote(t.TempDir())+`,"mcpServers":[`+string(server)+`]}`); !bytes.Contains(reply, []byte(`"sessionId"`)) {
		t.Fatalf("session/new = %s\n%s", reply, stderr.String())
	}
	waitSurvivors(t, mark, 3) // offstage acp, offstage mcp, the daemon (and the keeper)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	noSurvivors(t, mark)
	if strings.Contains(stderr.String(), "not started") {
		t.Errorf("the MCP server did not start:\n%s", stderr.String())
	}
}

// Finding F10: a call whose message is longer than the line cap (16 MiB)
// was answered with a null id, so the MCP client's pending call waited
// for ever; now it gets its error, and the session goes on.
func TestMCPAnswersAnOverlongCallWithItsID(t *testing.T) {
	cmd, mark := offstage(t, nil, "mcp")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo " + strings.Repeat("x", 17<<20)}})
	if err == nil || !strings.Contains(err.Error(), "longer than 16777215 bytes") {
		t.Errorf("CallTool(17 MiB) = %v, want the guard's error", err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo after"}}); err != nil || res.IsError {
		t.Errorf("CallTool after = %+v, %v", res, err)
	}
	cs.Close()
	noSurvivors(t, mark)
}
