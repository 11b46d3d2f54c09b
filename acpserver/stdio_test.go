package acpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline/rpclinetest"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/provider/scripted"
)

// testShellEnv makes the test binary a stand-in shell (see TestMain): it
// runs no command; "sleep-forever" sleeps until it is killed, anything
// else exits.
const testShellEnv = "ACPSERVER_TEST_SHELL"

func testShell() {
	if os.Args[len(os.Args)-1] == "sleep-forever" {
		time.Sleep(time.Hour)
	}
	os.Exit(0)
}

// acpPeer is a raw-line client of the real agent (Serve over pipes) with
// one session whose background shell runs.
type acpPeer struct {
	*rpclinetest.Peer
	session string
	shell   []int // the background shell's processes
}

func startACP(tb testing.TB) *acpPeer {
	tb.Helper()
	m, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep-forever", "run_in_background": true}}]},
		{"text": "started"}]}`))
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "acpserver-stdio")
	if err != nil {
		tb.Fatal(err)
	}
	marker := fmt.Sprintf("ACPSERVER_FUZZ=%d-%d", os.Getpid(), time.Now().UnixNano())
	cfg := acpserver.Config{Agent: agent.Config{Model: m}, AllowAll: true, Surface: agent.Surface{NoProjectInstructions: true}}
	cfg.Agent.Tools.Process.Shell = []string{os.Args[0]}
	cfg.Agent.Tools.Process.Env = append(os.Environ(), testShellEnv+"=1", marker)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), cfg, inR, outW)
		outW.Close()
	}()
	p := &acpPeer{Peer: rpclinetest.Start(inW, outR)}
	tb.Cleanup(func() {
		p.Close(tb)
		select {
		case err := <-served:
			if err != nil {
				tb.Errorf("Serve() = %v", err)
			}
		case <-time.After(rpclinetest.Timeout):
			tb.Error("Serve did not return after its input ended")
		}
		if n := len(proctest.Marked(marker)); n != 0 {
			tb.Errorf("%d processes alive after Serve returned", n)
		}
		os.RemoveAll(dir)
	})
	p.Call(tb, "initialize", `{"protocolVersion":1}`)
	reply, _ := p.Call(tb, "session/new", `{"cwd":"`+dir+`","mcpServers":[]}`)
	p.session = sessionOf(tb, reply)
	if reply, _ := p.Call(tb, "session/prompt", p.prompt("start")); !bytes.Contains(reply, []byte(`"stopReason":"end_turn"`)) {
		tb.Fatalf("session/prompt = %s", reply)
	}
	for deadline := time.Now().Add(rpclinetest.Timeout); len(p.shell) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // the shell starts as the turn goes on
			tb.Fatalf("the background shell did not start within %s", rpclinetest.Timeout)
		}
		p.shell = proctest.Marked(marker)
	}
	return p
}

func (p *acpPeer) prompt(text string) string {
	return `{"sessionId":"` + p.session + `","prompt":[{"type":"text","text":"` + text + `"}]}`
}

// check: a request is answered, the session lists its shell as running
// (/tasks), the shell's process lives, and every line was JSON.
func (p *acpPeer) check(tb testing.TB) {
	tb.Helper()
	if reply, _ := p.Call(tb, "initialize", `{"protocolVersion":1}`); !bytes.Contains(reply, []byte(`"result":{`)) {
		tb.Fatalf("initialize = %s", reply)
	}
	reply, meanwhile := p.Call(tb, "session/prompt", p.prompt("/tasks"))
	if !bytes.Contains(reply, []byte(`"stopReason":"end_turn"`)) || !strings.Contains(strings.Join(meanwhile, "\n"), "shell:1") {
		tb.Fatalf("/tasks = %s after\n%s", reply, strings.Join(meanwhile, "\n"))
	}
	for _, pid := range p.shell {
		if !proctest.Alive(pid) {
			tb.Fatalf("the background shell's process %d is gone", pid)
		}
	}
	if bad := p.Bad(); len(bad) > 0 {
		tb.Fatalf("the agent wrote lines that are not JSON: %q", bad)
	}
}

// issue19Lines ended an MCP stdio session; the agent must go on after
// each as well.
var issue19Lines = []string{
	`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize","params":{"protocolVersion":1}}`,
	`{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{"protocolVersion":1}}`,
	`{"jsonrpc":"2.0","id":true,"method":"initialize","params":{"protocolVersion":1}}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":1}}`,
	`{"jsonrpc":"2.0","id":1e300,"method":"initialize","params":{"protocolVersion":1}}`,
	`[]`,
	`[1,2,3]`,
	`[{}]`,
	`[{"jsonrpc":"2.0","id":41,"method":"initialize","params":{"protocolVersion":1}}]`,
	strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
	`{"jsonrpc":"2.0","id":43,"method":"session/prompt","params":{"sessionId":"x","prompt":[{"type":"text","text":"hi","x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}]}}`,
	`{"jsonrpc":"2.0","id":44,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}`,
	`{"jsonrpc":"2.0","id":45,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}`,
	`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":{"x":1}}}`,
	`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":[1]}}`,
	`{"jsonrpc":"2.0","id":46,"result":{"outcome":{"outcome":"cancelled"}}}`,
	`{"jsonrpc":"2.0","id":47,"error":{"code":"x"}}`,
}

// Issue 19: the lines that ended an MCP session are answered here too,
// and the session and its background shell go on.
func TestStdioSurvivesTheLinesOfIssue19(t *testing.T) {
	p := startACP(t)
	for _, line := range issue19Lines {
		p.Send(t, []byte(line))
		p.check(t)
	}
	for _, tc := range []struct{ id, replyID string }{{`1.5`, `1.5`}, {`{"x":1}`, `null`}} {
		reply := p.Expect(t, tc.replyID, `{"jsonrpc":"2.0","id":`+tc.id+`,"method":"initialize","params":{"protocolVersion":1}}`)
		if !bytes.Contains(reply, []byte(`"code":-32600`)) {
			t.Errorf("initialize with id %s = %s", tc.id, reply)
		}
	}
}

// Issue 19: a session/new read just before the input ends is answered
// (the SDK alone cancelled it: the reply, "the agent is shutting down" or
// nothing).
func TestStdioAnswersWhatWasReadBeforeEndOfInput(t *testing.T) {
	m, _ := scripted.Parse([]byte(`{"turns": []}`))
	for range 5 {
		in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + t.TempDir() + `","mcpServers":[]}}` + "\n"
		var out bytes.Buffer
		if err := acpserver.Serve(t.Context(), acpserver.Config{Agent: agent.Config{Model: m}}, strings.NewReader(in), &out); err != nil {
			t.Errorf("Serve() = %v", err)
		}
		if !strings.Contains(out.String(), `"id":1,"result":`) || !strings.Contains(out.String(), `"id":2,"result":{"sessionId":`) {
			t.Fatalf("replies:\n%s", out.String())
		}
	}
}

// FuzzStdio drives the real agent with a background shell running:
// whatever a line holds, a request is answered after it, the session
// still lists its shell, the shell's process lives, and the agent writes
// only JSON. Every input is the connection's next lines.
func FuzzStdio(f *testing.F) {
	for _, line := range issue19Lines {
		f.Add([]byte(line))
	}
	f.Add([]byte("not json\n{}\n\"x\"\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":4,"method":"session/close","params":{"sessionId":"x"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":5,"method":"session/close"}` + "\n" + `{"jsonrpc":"2.0","id":6,"method":"session/close","params":{"sessionId":null}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":5,"mcpServers":{}}}` + "\n" + `{"jsonrpc":"2.0","id":9,"method":"session/new"}`))
	p := startACP(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		p.Send(t, input)
		p.check(t)
	})
}

// stallingWriter passes writes on to lines until stall is called; then
// every write blocks until release is closed, as a pipe does to a client
// that is alive but reads nothing.
type stallingWriter struct {
	mu      sync.Mutex
	buf     []byte
	lines   chan string
	stalled chan struct{}
	release chan struct{}
}

func (w *stallingWriter) Write(b []byte) (int, error) {
	select {
	case <-w.stalled:
		<-w.release
		return 0, io.ErrClosedPipe
	default:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.lines <- string(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// stalledServe serves ACP, with the scripted model script, to a client
// whose writer stalls once its stalled channel is closed, and makes a
// session. call sends a request and returns its reply; stop is SIGTERM,
// and served has what Serve returned.
type stalledServe struct {
	t         *testing.T
	in        *io.PipeWriter
	out       *stallingWriter
	stop      context.CancelFunc
	served    chan error
	sessionID string
}

func startStalledServe(t *testing.T, script string) *stalledServe {
	m, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	inR, inW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	w := &stallingWriter{lines: make(chan string, 100), stalled: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { close(w.release) })
	s := &stalledServe{t: t, in: inW, out: w, stop: stop, served: make(chan error, 1)}
	go func() {
		s.served <- acpserver.Serve(ctx, acpserver.Config{Agent: agent.Config{Model: m}, Surface: agent.Surface{NoProjectInstructions: true}}, inR, w)
	}()
	s.call(1, "initialize", `{"protocolVersion":1}`)
	var reply struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	json.Unmarshal([]byte(s.call(2, "session/new", `{"cwd":"`+t.TempDir()+`","mcpServers":[]}`)), &reply)
	s.sessionID = reply.Result.SessionID
	return s
}

func (s *stalledServe) send(id int, method, params string) {
	fmt.Fprintf(s.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
}

func (s *stalledServe) call(id int, method, params string) string {
	s.send(id, method, params)
	for {
		select {
		case line := <-s.out.lines:
			if strings.Contains(line, fmt.Sprintf(`"id":%d,`, id)) {
				return line
			}
		case <-time.After(rpclinetest.Timeout):
			s.t.Fatalf("no reply to %s", method)
		}
	}
}

// stopAndWait stops the agent (SIGTERM) and fails with why unless Serve
// returns.
func (s *stalledServe) stopAndWait(why string) {
	s.stop()
	select {
	case <-s.served:
	case <-time.After(rpclinetest.Timeout):
		s.t.Fatal("Serve did not return: " + why)
	}
}

// TestStoppingWhileTheClientReadsNothing (issue 21, M2): a client that
// is alive but has stopped reading fills the session's queue of updates,
// and the turn waits on it; stopping the agent must still close the
// session and return, not wait forever for Run.
func TestStoppingWhileTheClientReadsNothing(t *testing.T) {
	s := startStalledServe(t, `{"turns": [{"text": "`+strings.Repeat("word ", 5000)+`"}]}`)
	close(s.out.stalled)
	s.send(3, "session/prompt", `{"sessionId":"`+s.sessionID+`","prompt":[{"type":"text","text":"talk"}]}`)
	time.Sleep(time.Second) // the turn streams 5,000 words into a queue of 1,024 that nobody empties
	s.stopAndWait("closing the session waits for a client that reads nothing")
}

// TestStoppingWhileTheClientReadsNothingAfterAPrompt: as
// TestStoppingWhileTheClientReadsNothing, with a prompt handed over to
// an idle session's turn (the second of the session), whose response the
// session owes when it closes: answering it must not wait for ever on the
// output the stalled write holds (it did: closing the session wrote the
// cancelled answer behind that write).
func TestStoppingWhileTheClientReadsNothingAfterAPrompt(t *testing.T) {
	s := startStalledServe(t, `{"turns": [{"text": "ready"}, {"text": "`+strings.Repeat("word ", 5000)+`"}]}`)
	prompt := `{"sessionId":"` + s.sessionID + `","prompt":[{"type":"text","text":"talk"}]}`
	s.call(3, "session/prompt", prompt)
	close(s.out.stalled)
	s.send(4, "session/prompt", prompt)
	time.Sleep(time.Second) // the turn streams 5,000 words to a client that reads none
	s.stopAndWait("closing the session waits to answer a prompt on an output a stalled write holds")
}

// TestCancelRequestStopsThePrompt: a client that gives up on a prompt
// with $/cancel_request naming its id (and no session/cancel) has the
// prompt answered cancelled at once, its foreground command stopped, as
// when the SDK answered session/prompt.
func TestCancelRequestStopsThePrompt(t *testing.T) {
	sleep := `{"tool_calls": [{"name": "bash", "input": {"command": "sleep-forever"}}]}`
	m, err := scripted.Parse([]byte(`{"turns": [` + sleep + `, ` + sleep + `, {"text": "stopped"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := acpserver.Config{Agent: agent.Config{Model: m}, AllowAll: true, Surface: agent.Surface{NoProjectInstructions: true}}
	cfg.Agent.Tools.Process.Shell = []string{os.Args[0]}
	marker := fmt.Sprintf("ACPSERVER_CANCEL=%d-%d", os.Getpid(), time.Now().UnixNano())
	cfg.Agent.Tools.Process.Env = append(os.Environ(), testShellEnv+"=1", marker)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), cfg, inR, outW)
		outW.Close()
	}()
	p := rpclinetest.Start(inW, outR)
	defer func() {
		p.Close(t)
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	}()
	p.Call(t, "initialize", `{"protocolVersion":1}`)
	reply, _ := p.Call(t, "session/new", `{"cwd":"`+t.TempDir()+`","mcpServers":[]}`)
	sid := sessionOf(t, reply)
	// Each prompt, to an idle session, is handed over to its turn and
	// answered by the turn's goroutine (prompt.go); the first came the
	// long way, on a goroutine of its own, while the commands were not
	// announced at once (TestANewSessionsCommandsFollowItsResponse). A
	// prompt that waits is given up on in TestASecondPromptWaitsForTheFirstToEnd.
	for _, id := range []string{"7", "8"} {
		prompt := `{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"run it"}]}}`
		cancelled := make(chan error, 1)
		go func() { // once the turn runs its command (a cancel that comes before the turn has started is lost, with or without the SDK)
			for deadline := time.Now().Add(rpclinetest.Timeout); len(proctest.Marked(marker)) == 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					cancelled <- errors.New("the command did not start")
					return
				}
			}
			_, err := inW.Write([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":` + id + `.0}}` + "\n"))
			cancelled <- err
		}()
		if reply := p.Expect(t, id, prompt); !bytes.Contains(reply, []byte(`"stopReason":"cancelled"`)) {
			t.Errorf("prompt %s, given up on = %s, want stopReason cancelled", id, reply)
		}
		if err := <-cancelled; err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(rpclinetest.Timeout); len(proctest.Marked(marker)) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the command of prompt %s is still running: %v", id, proctest.Marked(marker))
			}
		}
	}
}

// sessionOf returns the sessionId of session/new's reply, or fails tb
// saying what the reply was.
func sessionOf(tb testing.TB, reply []byte) string {
	tb.Helper()
	var r struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if json.Unmarshal(reply, &r) != nil || r.Result.SessionID == "" {
		tb.Fatalf("session/new = %s, want a session", reply)
	}
	return r.Result.SessionID
}

// servePipes serves cfg over in-memory pipes, its model played from
// script unless cfg has one, and no AGENTS.md read: the client writes to
// in and reads out. The test's cleanup ends the input, reads what is
// left, and fails the test if Serve did.
func servePipes(t *testing.T, script string, cfg acpserver.Config) (in *io.PipeWriter, out *io.PipeReader) {
	t.Helper()
	if cfg.Agent.Model == nil {
		m, err := scripted.Parse([]byte(script))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Agent.Model = m
	}
	cfg.Surface.NoProjectInstructions = true
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), cfg, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		io.Copy(io.Discard, outR)
		if err := <-served; err != nil {
			t.Errorf("Serve() = %v", err)
		}
	})
	return inW, outR
}

// servePeer is servePipes with a raw-line client (rpclinetest) on the
// pipes; in is there to write a line beside the client's calls.
func servePeer(t *testing.T, script string, cfg acpserver.Config) (p *rpclinetest.Peer, in *io.PipeWriter) {
	t.Helper()
	in, out := servePipes(t, script, cfg)
	p = rpclinetest.Start(in, out)
	t.Cleanup(func() { p.Close(t) })
	return p, in
}

// TestANewSessionsCommandsFollowItsResponse: session/new's response and
// the session's slash commands go out in one write, the response first,
// so the prompt an editor sends at once finds them announced and is
// handed straight to the turn (a timer announced them 100 ms later, and
// that first prompt cost twice the next). On io.Pipe a read never spans
// two writes: both lines in one read were one write.
func TestANewSessionsCommandsFollowItsResponse(t *testing.T) {
	inW, outR := servePipes(t, `{"turns": [{"text": "hi"}]}`, acpserver.Config{})
	reads := make(chan []byte)
	go func() {
		defer close(reads)
		for {
			b := make([]byte, 1<<20)
			n, err := outR.Read(b)
			if n > 0 {
				reads <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	await := func(id string) []byte {
		t.Helper()
		timeout := time.After(rpclinetest.Timeout)
		for {
			select {
			case b, ok := <-reads:
				if !ok {
					t.Fatalf("the output ended before the response to %s", id)
				}
				if bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","id":`+id+`,`)) {
					return b
				}
			case <-timeout:
				t.Fatalf("no response to %s", id)
			}
		}
	}
	write := func(line string) {
		t.Helper()
		if _, err := inW.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	await("1")
	write(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + t.TempDir() + `","mcpServers":[]}}`)
	got := await("2")
	lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], `"sessionId"`) || !strings.Contains(lines[1], `"sessionUpdate":"available_commands_update"`) {
		t.Errorf("the write with session/new's response = %q, want the response, then the available commands", got)
	}
}

// TestTheEndOfInputEndsASessionNewUnderWay: a session/new still starting
// an editor's MCP server (one that never answers) when the client's input
// ends is over by the time Serve returns: its server's processes are
// reaped, not left to a goroutine that outlives Serve.
func TestTheEndOfInputEndsASessionNewUnderWay(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [{"text": "hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("ACPSERVER_NEW_UNDER_WAY=%d-%d", os.Getpid(), time.Now().UnixNano())
	name, value, _ := strings.Cut(marker, "=")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go io.Copy(io.Discard, outR)
	var logged syncBuffer
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: m}, Surface: agent.Surface{NoProjectInstructions: true}, Logger: slog.New(slog.NewTextHandler(&logged, nil))}, inR, outW)
		outW.Close()
	}()
	lines := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"` + t.TempDir() + `","mcpServers":[{"name":"silent","command":"/bin/sh","args":["-c","sleep 1000 & sleep 1000"],"env":[{"name":"` + name + `","value":"` + value + `"}]}]}}` + "\n"
	if _, err := inW.Write([]byte(lines)); err != nil {
		t.Fatal(err)
	}
	var started []int
	for deadline := time.Now().Add(rpclinetest.Timeout); len(started) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the MCP server did not start")
		}
		started = proctest.Marked(marker)
	}
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve() = %v", err)
		}
	case <-time.After(2 * acpserver.DrainGrace):
		t.Fatalf("Serve did not return within %s of the end of its input", 2*acpserver.DrainGrace)
	}
	// The session/new was over when Serve returned: it had said its MCP
	// server did not start (it said so after, from a goroutine that
	// outlived Serve, before the fix).
	if got := logged.String(); !strings.Contains(got, `msg="MCP server not started" server=silent`) {
		t.Errorf("when Serve returned, the session/new under way had not ended; the log:\n%s", got)
	}
	if left := proctest.Marked(marker); len(left) > 0 {
		t.Errorf("processes of the MCP server a session/new was starting alive after Serve returned: %v", left)
	}
}

// syncBuffer is a bytes.Buffer for a logger that writes from several
// goroutines.
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

// TestWhatFollowsASessionCloseFindsItClosed: requests on a connection are
// taken in the order sent. A prompt sent right after session/close of its
// session is refused, saying the session was closed, and a session/new
// sent right after a close at the cap of sessions has the place the close
// freed (an outsider's findings: the close ran on a goroutine of its own,
// so the prompt ran in the closing session, its tools too, and the
// session/new found no place, at random).
func TestWhatFollowsASessionCloseFindsItClosed(t *testing.T) {
	p, _ := servePeer(t, `{"turns": [{"tool_calls": [{"name": "task_list", "input": {}}]}, {"text": "ran"}]}`, acpserver.Config{AllowAll: true, MaxSessions: 2})
	p.Call(t, "initialize", `{"protocolVersion":1}`)
	dir := t.TempDir()
	open := func() string {
		t.Helper()
		reply, _ := p.Call(t, "session/new", `{"cwd":"`+dir+`","mcpServers":[]}`)
		return sessionOf(t, reply)
	}
	held := open()
	for i := range 20 {
		sid := open() // the second of two: the connection is full
		// Each pair in one write, as an editor sends them.
		reply := p.Expect(t, `"new-`+fmt.Sprint(i)+`"`, `{"jsonrpc":"2.0","id":"close-held-`+fmt.Sprint(i)+`","method":"session/close","params":{"sessionId":"`+held+`"}}`+"\n"+`{"jsonrpc":"2.0","id":"new-`+fmt.Sprint(i)+`","method":"session/new","params":{"cwd":"`+dir+`","mcpServers":[]}}`)
		held = sessionOf(t, reply) // the close before it freed its place
		reply = p.Expect(t, `"prompt-`+fmt.Sprint(i)+`"`, `{"jsonrpc":"2.0","id":"close-`+fmt.Sprint(i)+`","method":"session/close","params":{"sessionId":"`+sid+`"}}`+"\n"+`{"jsonrpc":"2.0","id":"prompt-`+fmt.Sprint(i)+`","method":"session/prompt","params":{"sessionId":"`+sid+`","prompt":[{"type":"text","text":"go"}]}}`)
		if !bytes.Contains(reply, []byte(`-32602`)) || !bytes.Contains(reply, []byte(`was closed (by session/close)`)) {
			t.Fatalf("a prompt sent after session/close of its session = %s, want it refused, the session closed", reply)
		}
	}
}

// TestABurstOfSessionNewStartsNoMoreThanTheCap: session/new requests sent
// at once count toward MaxSessions while they open, so those past the cap
// are refused before they start anything (an outsider's finding: 150 at
// once started 150 MCP servers for 64 places).
func TestABurstOfSessionNewStartsNoMoreThanTheCap(t *testing.T) {
	starts := filepath.Join(t.TempDir(), "starts")
	inW, outR := servePipes(t, `{"turns": []}`, acpserver.Config{MaxSessions: 2, MCPTimeout: 200 * time.Millisecond})
	replies := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":"n`) {
				replies <- sc.Text()
			}
		}
	}()
	lines := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}` + "\n"
	for i := range 8 {
		lines += `{"jsonrpc":"2.0","id":"n` + fmt.Sprint(i) + `","method":"session/new","params":{"cwd":"` + t.TempDir() + `","mcpServers":[{"name":"slow","command":"/bin/sh","args":["-c","echo started >> ` + starts + `; sleep 8"],"env":[]}]}}` + "\n"
	}
	if _, err := inW.Write([]byte(lines)); err != nil {
		t.Fatal(err)
	}
	opened, refused := 0, 0
	for range 8 {
		select {
		case r := <-replies:
			switch {
			case strings.Contains(r, `"sessionId"`):
				opened++
			case strings.Contains(r, "already holds 2 sessions"):
				refused++
			default:
				t.Errorf("session/new = %s", r)
			}
		case <-time.After(rpclinetest.Timeout):
			t.Fatal("not every session/new was answered")
		}
	}
	b, _ := os.ReadFile(starts)
	if n := strings.Count(string(b), "started"); opened != 2 || refused != 6 || n != 2 {
		t.Errorf("%d sessions opened, %d refused, %d MCP servers started; want 2, 6 and 2", opened, refused, n)
	}
}

// TestARequestSentAsANotificationIsDropped: session/new (or any request
// but session/cancel) sent without an id is dropped, saying why in the
// log: the SDK made a session of it that no client knew of, which held a
// place (an outsider's finding).
func TestARequestSentAsANotificationIsDropped(t *testing.T) {
	var logged syncBuffer
	p, _ := servePeer(t, `{"turns": []}`, acpserver.Config{MaxSessions: 1, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	p.Call(t, "initialize", `{"protocolVersion":1}`)
	dir := t.TempDir()
	p.Send(t, []byte(`{"jsonrpc":"2.0","method":"session/new","params":{"cwd":"`+dir+`","mcpServers":[]}}`))
	reply, _ := p.Call(t, "session/new", `{"cwd":"`+dir+`","mcpServers":[]}`)
	if !bytes.Contains(reply, []byte(`"sessionId"`)) {
		t.Errorf("session/new after one sent as a notification = %s, want a session (the connection holds 1)", reply)
	}
	if got := logged.String(); !strings.Contains(got, "session/new came without an id") {
		t.Errorf("the log does not say the notification was dropped:\n%s", got)
	}
	if n := strings.Count(logged.String(), `msg="session started"`); n != 1 {
		t.Errorf("%d sessions started, want 1", n)
	}
}

// TestCancelRequestStopsASessionNew: $/cancel_request naming a session/new
// that waits on an editor's MCP server (one that never answers) stops it
// at once: answered cancelled (-32800), its server reaped, no session
// left (it waited for the MCP timeout, 30 s, under the SDK too).
func TestCancelRequestStopsASessionNew(t *testing.T) {
	marker := fmt.Sprintf("ACPSERVER_NEW_CANCEL=%d-%d", os.Getpid(), time.Now().UnixNano())
	name, value, _ := strings.Cut(marker, "=")
	p, inW := servePeer(t, `{"turns": []}`, acpserver.Config{MaxSessions: 1})
	p.Call(t, "initialize", `{"protocolVersion":1}`)
	cancelled := make(chan error, 1)
	go func() {
		for deadline := time.Now().Add(rpclinetest.Timeout); len(proctest.Marked(marker)) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				cancelled <- errors.New("the MCP server did not start")
				return
			}
		}
		_, err := inW.Write([]byte(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"new-1"}}` + "\n"))
		cancelled <- err
	}()
	start := time.Now()
	reply := p.Expect(t, `"new-1"`, `{"jsonrpc":"2.0","id":"new-1","method":"session/new","params":{"cwd":"`+t.TempDir()+`","mcpServers":[{"name":"slow","command":"/bin/sh","args":["-c","sleep 1000"],"env":[{"name":"`+name+`","value":"`+value+`"}]}]}}`)
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(reply, []byte(`"code":-32800`)) || time.Since(start) > 15*time.Second {
		t.Errorf("a cancelled session/new = %s after %s, want -32800 before the MCP timeout", reply, time.Since(start))
	}
	if left := proctest.Marked(marker); len(left) > 0 {
		t.Errorf("the MCP server of a cancelled session/new is alive: %v", left)
	}
	if reply, _ := p.Call(t, "session/new", `{"cwd":"`+t.TempDir()+`","mcpServers":[]}`); !bytes.Contains(reply, []byte(`"sessionId"`)) {
		t.Errorf("session/new after a cancelled one = %s, want a session: the connection holds 1, and the cancelled one must not keep it", reply)
	}
}

// TestACwdIsQuotedShort: a session/new's cwd that is refused is quoted to
// a bounded length (one of 5 MB came back twice, 10 MB), and a path
// longer than the system takes is said to be that, not missing.
func TestACwdIsQuotedShort(t *testing.T) {
	p := startACP(t)
	long := "/" + strings.Repeat("a", 1<<20)
	reply, _ := p.Call(t, "session/new", `{"cwd":"`+long+`","mcpServers":[]}`)
	if len(reply) > 4<<10 || !bytes.Contains(reply, []byte("longer than this system takes for a path")) {
		t.Errorf("session/new with a 1 MiB cwd = %.300s… (%d bytes), want a short refusal saying the path is too long", reply, len(reply))
	}
	reply, _ = p.Call(t, "session/new", `{"cwd":"`+long[1:]+`","mcpServers":[]}`)
	if len(reply) > 4<<10 || !bytes.Contains(reply, []byte("is not an absolute path")) {
		t.Errorf("session/new with a 1 MiB relative cwd = %.300s… (%d bytes), want a short refusal", reply, len(reply))
	}
}
