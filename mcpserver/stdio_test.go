package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
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

// stdioPeer drives one session of the real stdio server (the Service's
// server over mcpserver.Stdio) with raw lines, as a client process would.
type stdioPeer struct {
	in     *io.PipeWriter
	svc    *mcpserver.Service
	served chan error
	out    chan struct{} // closed when the server's output ends

	mu      sync.Mutex
	waiting map[string]chan json.RawMessage // guarded by mu: reply id → where its reply goes
	bad     []string                        // guarded by mu: output lines that are not JSON-RPC
	n       int                             // guarded by mu: ids used
}

func startStdio(tb testing.TB) *stdioPeer {
	tb.Helper()
	dir, err := os.MkdirTemp("", "mcpserver-stdio")
	if err != nil {
		tb.Fatal(err)
	}
	svc := mcpserver.New(context.Background(), mcpserver.Config{Tools: tools.Config{Process: proc.Config{
		Dir: dir, Shell: []string{os.Args[0]}, Env: append(os.Environ(), testShellEnv+"=1"),
	}}})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{in: inW, svc: svc, served: make(chan error, 1), out: make(chan struct{}), waiting: make(map[string]chan json.RawMessage)}
	go func() {
		p.served <- svc.Server().Run(context.Background(), mcpserver.Stdio(inR, outW))
		outW.Close()
	}()
	go p.read(outR)
	tb.Cleanup(func() {
		p.in.Close()
		select {
		case <-p.served:
		case <-time.After(30 * time.Second):
			tb.Error("the server did not end after its input did")
		}
		<-p.out
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			tb.Errorf("Close() = %v", err)
		}
		os.RemoveAll(dir)
	})
	p.call(tb, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	p.send(tb, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	res := p.call(tb, "tools/call", `{"name":"bash","arguments":{"command":"sleep-forever","run_in_background":true}}`)
	if !bytes.Contains(res, []byte(`"task_id":"shell:1"`)) {
		tb.Fatalf("bash = %s", res)
	}
	return p
}

// read files every line the server writes: replies to the peer's own
// calls go to their callers; a line that is not JSON is noted.
func (p *stdioPeer) read(out io.Reader) {
	defer close(p.out)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	for sc.Scan() {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		line := sc.Bytes()
		if !json.Valid(line) {
			p.mu.Lock()
			p.bad = append(p.bad, string(line))
			p.mu.Unlock()
			continue
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue // a batch's replies, a notification
		}
		p.mu.Lock()
		ch := p.waiting[string(m.ID)]
		delete(p.waiting, string(m.ID))
		p.mu.Unlock()
		if ch != nil {
			ch <- append(json.RawMessage(nil), line...)
		}
	}
	io.Copy(io.Discard, out)
}

// send writes b and ends its last line, or fails if the server stops
// reading.
func (p *stdioPeer) send(tb testing.TB, b []byte) {
	tb.Helper()
	written := make(chan error, 1)
	go func() { // unblocked by the cleanup's Close if the server stopped reading
		_, err := p.in.Write(append(b[:len(b):len(b)], '\n'))
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			tb.Fatalf("the server stopped reading: %v", err)
		}
	case <-p.out:
		tb.Fatalf("the server ended")
	case <-time.After(30 * time.Second):
		tb.Fatalf("the server has not read a line for 30s")
	}
}

// call sends a request and returns its reply, or fails after 30s.
func (p *stdioPeer) call(tb testing.TB, method, params string) json.RawMessage {
	tb.Helper()
	p.mu.Lock()
	p.n++
	id := fmt.Sprintf(`"peer-%d"`, p.n)
	ch := make(chan json.RawMessage, 1)
	p.waiting[id] = ch
	p.mu.Unlock()
	p.send(tb, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":`+params+`}`))
	select {
	case reply := <-ch:
		return reply
	case <-p.out:
		tb.Fatalf("the server ended before answering %s", method)
	case <-time.After(30 * time.Second):
		tb.Fatalf("no reply to %s within 30s", method)
	}
	return nil
}

// check: ping is answered, shell:1 still runs, and every line the server
// wrote was JSON.
func (p *stdioPeer) check(tb testing.TB) {
	tb.Helper()
	if reply := p.call(tb, "ping", `{}`); !bytes.Contains(reply, []byte(`"result":{}`)) {
		tb.Fatalf("ping = %s", reply)
	}
	var r struct {
		Result struct {
			StructuredContent tools.InspectOutput `json:"structuredContent"`
		} `json:"result"`
	}
	reply := p.call(tb, "tools/call", `{"name":"task_inspect","arguments":{"task_id":"shell:1"}}`)
	if err := json.Unmarshal(reply, &r); err != nil || r.Result.StructuredContent.Status != "running" {
		tb.Fatalf("task_inspect(shell:1) = %s, want it running", reply)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		tb.Fatalf("the server wrote lines that are not JSON: %q", p.bad)
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
		p.send(t, []byte(line))
		p.check(t)
	}
	// Ids the SDK would have mangled are answered as sent.
	for _, id := range []string{`1.5`, `1e300`, `9007199254740993`} {
		p.mu.Lock()
		ch := make(chan json.RawMessage, 1)
		p.waiting[id] = ch
		p.mu.Unlock()
		p.send(t, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`))
		select {
		case reply := <-ch:
			if !bytes.Contains(reply, []byte(`"error":{"code":-32600`)) {
				t.Errorf("ping with id %s = %s", id, reply)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no reply to a ping with id %s", id)
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
	p := startStdio(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		p.send(t, input)
		p.check(t)
	})
}
