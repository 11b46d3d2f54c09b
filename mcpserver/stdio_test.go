package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline"
	"github.com/offstage/offstage/internal/rpcline/rpclinetest"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// testShellEnv makes the test binary a stand-in shell (see TestMain): it
// runs no command, so whatever a fuzz input asks bash to run is harmless;
// the command "sleep-forever" sleeps until it is killed, any other exits.
const testShellEnv = "MCPSERVER_TEST_SHELL"

func testShell() {
	if os.Args[len(os.Args)-1] == "sleep-forever" {
		time.Sleep(time.Hour)
	}
	os.Exit(0)
}

// stdioPeer is a raw-line client of one session of the real stdio
// server (the Service's server over mcpserver.Stdio) with a background
// shell running.
type stdioPeer struct {
	*rpclinetest.Peer
}

func startStdio(tb testing.TB) *stdioPeer {
	tb.Helper()
	dir, err := os.MkdirTemp("", "mcpserver-stdio")
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := mcpserver.New(context.Background(), mcpserver.Config{Agent: agent.Config{Tools: tools.Config{Process: proc.Config{
		Dir: dir, Shell: []string{os.Args[0]}, Env: append(os.Environ(), testShellEnv+"=1"),
	}}}})
	if err != nil {
		tb.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- svc.Server().Run(context.Background(), mcpserver.Stdio(inR, outW))
		outW.Close()
	}()
	p := &stdioPeer{rpclinetest.Start(inW, outR)}
	tb.Cleanup(func() {
		p.Close(tb)
		select {
		case <-served:
		case <-time.After(rpclinetest.Timeout):
			tb.Error("the server did not end after its input did")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			tb.Errorf("Close() = %v", err)
		}
		os.RemoveAll(dir)
	})
	p.Call(tb, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	p.Send(tb, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	res, _ := p.Call(tb, "tools/call", `{"name":"bash","arguments":{"command":"sleep-forever","run_in_background":true}}`)
	if !bytes.Contains(res, []byte(`"task_id":"shell:1"`)) {
		tb.Fatalf("bash = %s", res)
	}
	return p
}

// check: ping is answered, shell:1 still runs, and every line the server
// wrote was JSON.
func (p *stdioPeer) check(tb testing.TB) {
	tb.Helper()
	if reply, _ := p.Call(tb, "ping", `{}`); !bytes.Contains(reply, []byte(`"result":{}`)) {
		tb.Fatalf("ping = %s", reply)
	}
	var r struct {
		Result struct {
			StructuredContent tools.InspectOutput `json:"structuredContent"`
		} `json:"result"`
	}
	reply, _ := p.Call(tb, "tools/call", `{"name":"task_inspect","arguments":{"task_id":"shell:1"}}`)
	if err := json.Unmarshal(reply, &r); err != nil || r.Result.StructuredContent.Status != "running" {
		tb.Fatalf("task_inspect(shell:1) = %s, want it running", reply)
	}
	if bad := p.Bad(); len(bad) > 0 {
		tb.Fatalf("the server wrote lines that are not JSON: %q", bad)
	}
}

// issue19Lines ended an MCP stdio session, and with it its tasks, before
// rpcline answered them.
var issue19Lines = []string{
	`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1e300,"method":"ping"}`,
	`[]`,
	`[1,2,3]`,
	`[{}]`,
	`[{"jsonrpc":"2.0","id":41,"method":"ping"}]`,
	`[{"jsonrpc":"2.0","id":42,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
	strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
	`{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"task_list","arguments":{"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}}}`,
	`{"JSONRPC":"2.0","id":44,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":45,"method":"ping","params":7}`,
	`{"jsonrpc":"2.0","id":46,"error":"x"}`,
	`{"jsonrpc":"2.0","id":47,"result":{},"error":{"code":1.5}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"x":1}}}`,
	`{"jsonrpc":"2.0","id":48,"method":"tools/call","params":[]}`,
	`{"jsonrpc":"2.0","id":49,"method":"initialize","params":{}}`,
}

// Issue 19: each of these lines gets an error (the guard's, or the SDK's
// for a well-formed request it refuses), and the session and its
// background shell go on.
func TestStdioSurvivesTheLinesOfIssue19(t *testing.T) {
	p := startStdio(t)
	for _, line := range issue19Lines {
		p.Send(t, []byte(line))
		p.check(t)
	}
	// Ids the SDK would have mangled are answered as sent.
	for _, id := range []string{`1.5`, `1e300`, `9007199254740993`} {
		if reply := p.Expect(t, id, `{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`); !bytes.Contains(reply, []byte(`"error":{"code":-32600`)) {
			t.Errorf("ping with id %s = %s", id, reply)
		}
	}
}

// Issue 19: a request read just before stdin ends is answered; the SDK
// alone stops writing at end of input, so initialize got no reply.
func TestStdioAnswersWhatWasReadBeforeEndOfInput(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 0.2; echo done"}}}` + "\n"
	var out bytes.Buffer
	if err := svc.Server().Run(t.Context(), mcpserver.Stdio(strings.NewReader(in), &out)); err != nil {
		t.Logf("Run() = %v", err)
	}
	if !strings.Contains(out.String(), `{"jsonrpc":"2.0","id":1,"result":`) || !strings.Contains(out.String(), `"id":2,"result":{"content":[{"type":"text","text":"{\"task_id\":\"shell:1\"`) {
		t.Errorf("replies:\n%s", out.String())
	}
}

// FuzzStdio drives the real stdio server with a background shell
// running: whatever a line holds, ping is answered after it, the shell
// still runs, and the server writes only JSON. Every input is one
// session's next lines (the session lives as long as the fuzz worker).
func FuzzStdio(f *testing.F) {
	for _, line := range issue19Lines {
		f.Add([]byte(line))
	}
	f.Add([]byte("not json\n{}\n\"x\"\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"task_output","arguments":{"task_id":"shell:1"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"offstage://task/shell:1/output"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"task_wait","arguments":{"task_ids":["shell:1"],"timeout_seconds":0},"_meta":{"progressToken":1}}}`))
	// The Tasks extension's methods and a task-augmented call (issue 40).
	f.Add([]byte(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"x-shell:1","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":8,"method":"tasks/update","params":{"taskId":"x","inputResponses":{"input-1":[]},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":7}}}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":9,"method":"tasks/cancel","params":null}`))
	p := startStdio(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		p.Send(t, input)
		p.check(t)
	})
}

// TestStdioNamesAParamOfTheWrongType: a field of the wrong JSON type in a
// request's params is refused naming the field and what to send, in JSON
// words: the SDK alone answered in Go's ("into a *mcpserver.taskParams:
// … Go struct field … of type string") and quoted the whole params back,
// a 5 MB argument included (an outsider's trial).
func TestStdioNamesAParamOfTheWrongType(t *testing.T) {
	svc := newService(t, mcpserver.Config{})
	big := strings.Repeat("x", 1<<20)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":5,"arguments":{"command":"` + big + `"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":12}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":5}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":"ls"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":[1]}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"bash\",\"arguments\":{\"command\":\"rm \xc3\x28\"}}}",
	}
	var out bytes.Buffer
	if err := svc.Server().Run(t.Context(), mcpserver.Stdio(strings.NewReader(strings.Join(lines, "\n")+"\n"), &out)); err != nil {
		t.Logf("Run() = %v", err)
	}
	replies := map[float64]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m struct {
			ID    float64
			Error *struct {
				Code    int
				Message string
			}
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Error != nil {
			replies[m.ID] = m.Error.Message
			if m.Error.Code != -32602 {
				t.Errorf("id %v: code %d, want -32602", m.ID, m.Error.Code)
			}
			if len(l) > 4096 {
				t.Errorf("id %v: an error of %d bytes: the params are quoted back", m.ID, len(l))
			}
		}
	}
	for id, want := range map[float64]string{
		2: "tools/call: name must be a string", 3: "tasks/get: taskId must be a string (the task's id", 4: "cursor must be a string",
		5: "arguments must be an object", 6: "params must be an object, not an array",
		8: "the arguments hold bytes that are not UTF-8",
	} {
		if got := replies[id]; !strings.Contains(got, want) || strings.Contains(got, "Go ") || strings.Contains(got, "mcpserver.") {
			t.Errorf("id %v: %q, want %q in JSON words", id, got, want)
		}
	}
	if _, refused := replies[7]; refused {
		t.Errorf("a good tools/list was refused: %q", replies[7])
	}
}

// TestAClientGoneMidCallEndsTheForegroundCommandBySession: as an ACP
// editor dying mid-turn, an MCP client whose input ends while a
// foreground bash call runs ends that command because the client went
// away (by the session), never as a user's cancel: the call's request
// context ends with the connection, and a plain cancel reads as a user's.
func TestAClientGoneMidCallEndsTheForegroundCommandBySession(t *testing.T) {
	ends := &endRecorder{}
	svc := newService(t, mcpserver.Config{Agent: agent.Config{Tasks: task.Options{Recorder: ends}}})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- svc.Server().Run(context.Background(), mcpserver.Stdio(inR, outW))
		outW.Close()
	}()
	p := rpclinetest.Start(inW, outR)
	p.Call(t, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	p.Send(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	p.Send(t, []byte(`{"jsonrpc":"2.0","id":"fg","method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 1000","yield_after_seconds":600}}}`))
	waitFor(t, "shell:1 runs", func() bool {
		reply, _ := p.Call(t, "tools/call", `{"name":"task_inspect","arguments":{"task_id":"shell:1"}}`)
		return bytes.Contains(reply, []byte(`pid `))
	})
	p.Close(t)
	select {
	case <-served:
	case <-time.After(rpclinetest.Timeout):
		t.Fatal("the server did not end after its input did")
	}
	waitFor(t, "shell:1 ends", func() bool { by, _ := ends.of("shell:1"); return by != "" })
	if by, reason := ends.of("shell:1"); by != task.BySession || !strings.Contains(reason, "mcp: the client went away") {
		t.Errorf("shell:1 ended by %q (%q), want session (mcp: the client went away)", by, reason)
	}
}

// A RelayWriter lets the transport see through it whether the output's
// reader is gone (the relay's end of the connection closed): the end of
// input then waits no grace for answers nobody would read, as it does
// on the output itself (rpcline's TestEndOfInputWithTheReaderGone).
func TestTheRelaysReaderGoneIsSeenThroughTheRelayWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		pr.Close()
		inR, inW := io.Pipe()
		r, _ := rpcline.New(inR, mcpserver.NewRelayWriter(pw), rpcline.Options{MaxLine: 1 << 10, Drain: time.Minute})
		eof := make(chan struct{})
		go func() {
			io.ReadAll(r)
			close(eof)
		}()
		inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"))
		synctest.Wait()
		start := time.Now()
		inW.Close()
		<-eof
		if waited, most := time.Since(start), 100*time.Millisecond; waited > most {
			t.Errorf("end of input %s after the relay went; want at most %s", waited, most)
		}
	})
}
