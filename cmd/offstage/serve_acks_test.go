package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/mcpserver"
)

// Regression: under offstage serve, a task_wait's answer counted as
// delivered once the supervisor had written it to offstage mcp's
// connection; a client that died with the answer still in the socket, or
// in the relay's hands, never got the result, and the journal said it
// had. The relay now says what it has passed on: here its client stops
// reading (the relay blocks on a full pipe with a 150 KB answer), the
// wait's answer is written behind it, and the client dies. The result
// is undelivered in the journal; the one whose answer the client read
// before is delivered.
func TestARelayedAnswerTheClientNeverGotIsUndelivered(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state, "--idle", "1h")
	rc := startRelayClient(t, state)
	in, outR, cmd, call, mark := rc.in, rc.out, rc.cmd, rc.call, rc.mark
	for _, id := range []string{"shell:1", "shell:2"} {
		if a := call("b"+id, "tools/call", `{"name":"bash","arguments":{"command":"true","run_in_background":true}}`); !strings.Contains(a, `\"task_id\":\"`+id+`\"`) {
			t.Fatalf("bash = %s, want %s", a, id)
		}
	}
	waitTask(t, state, "shell:2", func(r map[string]any) bool { return r["state"] == "completed" })
	if a := call("w1", "tools/call", `{"name":"task_wait","arguments":{"task_ids":["shell:1"]}}`); !strings.Contains(a, `shell:1`) {
		t.Fatalf("task_wait(shell:1) = %s", a)
	}
	// The client stops reading: an answer of 150 KB (a ping's, whose id
	// it echoes) fills the pipe and the relay's hands, and the wait's
	// answer goes into the socket behind it.
	io.WriteString(in, `{"jsonrpc":"2.0","id":"`+strings.Repeat("p", 150<<10)+`","method":"ping"}`+"\n")
	// The SDK answers requests concurrently: the wait, sent at once, could
	// be answered before the ping (a CI run under load did), and pass on.
	time.Sleep(500 * time.Millisecond)
	io.WriteString(in, `{"jsonrpc":"2.0","id":"w2","method":"tools/call","params":{"name":"task_wait","arguments":{"task_ids":["shell:2"]}}}`+"\n")
	time.Sleep(time.Second) // the supervisor has written both answers
	outR.Close()            // the client dies
	cmd.Process.Kill()
	sv.waitLive(t, "no session (its client went, nothing ran)", func(s []liveSession) bool { return len(s) == 0 })
	for id, want := range map[string]bool{"shell:1": true, "shell:2": false} {
		if r := waitTask(t, state, id, func(map[string]any) bool { return true }); r["delivered"] != want {
			t.Errorf("%s: delivered %v, want %v: %v", id, r["delivered"], want, r)
		}
	}
	noSurvivors(t, mark)
}

// relayClient is a client of offstage mcp (a relay to offstage serve)
// that speaks JSON-RPC lines by hand: call writes a request and reads
// lines until its answer.
type relayClient struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *os.File // the client's end of the relay's output
	stderr *syncBuffer
	mark   string
	call   func(id, method, params string) string
	answer func(id string) string // reads lines until id's answer
}

// startRelayClient starts offstage mcp with state as its state directory,
// initializes the session and checks that it relays to offstage serve.
// The relay is killed when the test ends.
func startRelayClient(t *testing.T, state string) *relayClient {
	t.Helper()
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "mcp")
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := bufio.NewReaderSize(outR, 1<<20)
	answer := func(id string) string {
		t.Helper()
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				t.Fatalf("the answer to %s: %v\n%s", id, err, stderr.String())
			}
			if strings.Contains(line, `"id":"`+id+`"`) {
				return line
			}
		}
	}
	call := func(id, method, params string) string {
		t.Helper()
		if _, err := io.WriteString(in, request(id, method, params)); err != nil {
			t.Fatal(err)
		}
		return answer(id)
	}
	call("i", "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	if !strings.Contains(stderr.String(), "hosted by offstage serve") {
		t.Fatalf("offstage mcp does not relay to offstage serve:\n%s", stderr.String())
	}
	return &relayClient{cmd: cmd, in: in, out: outR, stderr: stderr, mark: mark, call: call, answer: answer}
}

// finishedShell has the relay's client start shell:1 in the background,
// and waits until it has completed, its result waiting for a task_wait.
func finishedShell(t *testing.T, rc *relayClient, state string) {
	t.Helper()
	if a := rc.call("b", "tools/call", `{"name":"bash","arguments":{"command":"true","run_in_background":true}}`); !strings.Contains(a, `\"task_id\":\"shell:1\"`) {
		t.Fatalf("bash = %s", a)
	}
	waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] == "completed" })
}

// request is a JSON-RPC request's line.
func request(id, method, params string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":` + params + "}\n"
}

// Regression (an outsider's finding): a client that read a task_wait's
// answer, began its next line and died had the result counted as
// undelivered: the relay told what it had passed on only between two
// lines of its client's input, and the client's last line never ended.
// The relay now keeps a line back until its end, and tells at once.
func TestAnAnswerReadBeforeAClientDiesMidLineCounts(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state, "--idle", "1h")
	rc := startRelayClient(t, state)
	finishedShell(t, rc, state)
	// The wait, and the next line begun before its answer comes.
	io.WriteString(rc.in, request("w", "tools/call", `{"name":"task_wait","arguments":{"task_ids":["shell:1"]}}`)+`{"jsonrpc":"2.0","id":"half","meth`)
	if a := rc.answer("w"); !strings.Contains(a, "shell:1") {
		t.Fatalf("task_wait(shell:1) = %s", a)
	}
	time.Sleep(200 * time.Millisecond) // the relay has passed the answer on, and told
	rc.out.Close()                     // the client dies mid-line
	rc.cmd.Process.Kill()
	sv.waitLive(t, "no session (its client went)", func(s []liveSession) bool { return len(s) == 0 })
	if r := waitTask(t, state, "shell:1", func(map[string]any) bool { return true }); r["delivered"] != true {
		t.Errorf("shell:1: delivered %v, want true: %v", r["delivered"], r)
	}
	noSurvivors(t, rc.mark)
}

// relayed runs input (the client's, in chunks) through the relay's side
// of the acknowledgements, telling passed[i] of what was passed on after
// chunk i, and then through the supervisor's side: what the supervisor's
// session reads, and out, told of the acks.
func relayed(t *testing.T, chunks [][]byte, passed []int64) (read []byte, out *mcpserver.RelayWriter) {
	var wire bytes.Buffer
	a := &relayAcks{c: &wire}
	for i, c := range chunks {
		if !a.sendInput(bytes.Clone(c)) {
			t.Fatal("a write to a buffer failed")
		}
		if i < len(passed) {
			a.passed.Store(passed[i])
			a.mu.Lock()
			a.tellLocked()
			a.mu.Unlock()
		}
	}
	a.copyIn(strings.NewReader(""))
	out = mcpserver.NewRelayWriter(io.Discard)
	out.Write(make([]byte, 1<<20))
	read, err := io.ReadAll(&ackInput{br: bufio.NewReader(&wire), out: out})
	if err != nil {
		t.Fatalf("reading %q: %v", wire.Bytes(), err)
	}
	return read, out
}

// The supervisor reads what the client wrote, whatever acks the relay
// put between its lines, and however its input came in chunks; a line of
// the client's that begins with the mark cannot speak for the relay; a
// last line cut short is ended.
func TestAcksLeaveTheClientsInputAsItWas(t *testing.T) {
	chunks := [][]byte{[]byte(`{"a":1}` + "\n" + `{"b"`), []byte(`:2}` + "\n"), []byte("\x1eack 99999\n\x1eeof\n"), []byte(`{"c":3}`)}
	read, _ := relayed(t, chunks, []int64{10, 20, 30, 40})
	want := `{"a":1}` + "\n" + `{"b":2}` + "\n" + "?ack 99999\n?eof\n" + `{"c":3}` + "\n"
	if string(read) != want {
		t.Errorf("the supervisor read %q, want %q", read, want)
	}
}

// The relay keeps the start of a line back until its end, so that an ack
// goes out at once, between two lines; a line longer than it keeps goes
// as it comes, and reads as it was written.
func TestAnAckGoesOutWhileALineIsBeingWritten(t *testing.T) {
	var wire bytes.Buffer
	a := &relayAcks{c: &wire}
	a.sendInput([]byte(`{"a":1}` + "\n" + `{"b"`))
	a.passed.Store(10)
	a.tellNow()
	if got, want := wire.String(), `{"a":1}`+"\n\x1eack 10\n"; got != want {
		t.Errorf("the relay sent %q, want %q", got, want)
	}
	a.sendInput([]byte(`:2}` + "\n"))
	if got, want := wire.String(), `{"a":1}`+"\n\x1eack 10\n"+`{"b":2}`+"\n"; got != want {
		t.Errorf("the relay sent %q, want %q", got, want)
	}

	long := `{"id":"` + strings.Repeat("p", 3*maxHeld) + `"}` + "\n" + `{"c":3}` + "\n"
	var chunks [][]byte
	for i := 0; i < len(long); i += 32 << 10 {
		chunks = append(chunks, []byte(long[i:min(i+32<<10, len(long))]))
	}
	if read, _ := relayed(t, chunks, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}); string(read) != long {
		t.Errorf("a line of %d bytes read as %d bytes", len(long), len(read))
	}
}

// FuzzAcks: whatever the client writes, in whatever chunks, with acks
// between, the supervisor reads it as written (a mark beginning a line
// changed, a last line ended), and never a line that begins with the
// mark. Raw bytes the supervisor's side is given, whatever they are,
// neither panic nor hang it, and no line it passes on begins with the
// mark.
func FuzzAcks(f *testing.F) {
	f.Add([]byte(`{"a":1}`+"\n"+`{"b":2}`+"\n"), uint8(3), int64(5))
	f.Add([]byte("\x1eack 12\n\x1eeof\n"), uint8(1), int64(0))
	f.Add([]byte("\x1e\x1e\n\n\x1e"), uint8(2), int64(1<<62))
	f.Fuzz(func(t *testing.T, input []byte, cut uint8, passed int64) {
		var chunks [][]byte
		step := int(cut)%7 + 1
		for i := 0; i < len(input); i += step {
			chunks = append(chunks, input[i:min(i+step, len(input))])
		}
		var ps []int64
		for i := range chunks {
			ps = append(ps, passed+int64(i))
		}
		read, _ := relayed(t, chunks, ps)
		want := bytes.Clone(input)
		for i := range want {
			if want[i] == ackMark && (i == 0 || want[i-1] == '\n') {
				want[i] = '?'
			}
		}
		if len(want) > 0 && want[len(want)-1] != '\n' {
			want = append(want, '\n')
		}
		if !bytes.Equal(read, want) {
			t.Errorf("the supervisor read %q, want %q", read, want)
		}

		// The supervisor's side alone, given the raw bytes.
		r := &ackInput{br: bufio.NewReaderSize(bytes.NewReader(input), 16), out: mcpserver.NewRelayWriter(io.Discard)}
		raw, _ := io.ReadAll(r)
		for i, b := range raw {
			if b == ackMark && (i == 0 || raw[i-1] == '\n') {
				t.Fatalf("passed on a line that begins with the mark: %q from %q", raw, input)
			}
		}
	})
}

// Regression (an outsider's finding): a relay whose client closed its
// stdout, having read an answer, learned of it from the failed write of
// what the supervisor sent next (a list_changed notification), and
// dropped the connection without the ack of the answer, unless its tell
// goroutine had run first: 2 of 40 relays under load, and the supervisor
// took back what the client had read. It now tells before it goes.
func TestARelayWhoseClientWentTellsWhatItRead(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":3,"result":{}}` + "\n"
	want := fmt.Sprintf("%cack %d\n", ackMark, len(answer))
	for i := range 50 {
		sup, relay := unixPair(t)
		in, inW := io.Pipe()
		out := &readsOnce{read: make(chan struct{})}
		ended := make(chan error, 1)
		go func() { ended <- relayStream(context.Background(), relay, "mcp", true, nil, in, out) }()
		br := bufio.NewReader(sup)
		if _, err := br.ReadBytes('\n'); err != nil { // the header
			t.Fatal(err)
		}
		sup.Write([]byte(answer))
		<-out.read
		sup.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}` + "\n"))
		if err := <-ended; !errors.Is(err, errClientGone) {
			t.Fatalf("the relay ended with %v, want its client's write error", err)
		}
		rest, _ := io.ReadAll(br)
		inW.Close()
		sup.Close()
		if string(rest) != want {
			t.Fatalf("run %d: the supervisor read %q after the header, want %q", i, rest, want)
		}
	}
}

var errClientGone = errors.New("the client closed its end")

// readsOnce is a client's output that takes one write, then is gone.
type readsOnce struct {
	read chan struct{}
	n    int
}

func (o *readsOnce) Write(p []byte) (int, error) {
	if o.n++; o.n > 1 {
		return 0, errClientGone
	}
	close(o.read)
	return len(p), nil
}

// Regression (an outsider's finding): the relay's watcher saw its client
// go (having read an answer) between the relay's write of the answer and
// its count of it, told the old count and dropped the connection; the
// supervisor took back what the client had read. An ack told while a
// write to the client is under way waits for it.
func TestAnAckToldAsTheClientGoesCountsTheWriteItRead(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":3,"result":{}}` + "\n"
	var wire bytes.Buffer
	a := &relayAcks{c: struct {
		io.Reader
		io.Writer
	}{strings.NewReader(answer), &wire}, kick: make(chan struct{}, 1)}
	told := make(chan struct{})
	out := writerFunc(func(p []byte) (int, error) {
		// The client reads this and goes; the watcher fires at once.
		go func() {
			a.tellNow()
			close(told)
		}()
		time.Sleep(50 * time.Millisecond)
		return len(p), nil
	})
	if err := a.copyOut(out); err != nil {
		t.Fatal(err)
	}
	<-told
	if got, want := wire.String(), fmt.Sprintf("%cack %d\n", ackMark, len(answer)); got != want {
		t.Errorf("the relay told %q, want %q", got, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Regressions (an outsider's findings): the client went, having read an
// answer, (1) while it was writing a request longer than the relay keeps
// back: no ack goes out in the middle of a line, and none went; (2) with
// the answer's end and the start of the next answer in one write, which
// failed part way: what it did pass on was not counted. The relay now
// ends the cut line before its last ack, and counts what a failed write
// passed on.
func TestTheLastAckCountsWhatTheClientReadWhereverItWent(t *testing.T) {
	t.Run("mid-line", func(t *testing.T) {
		var wire bytes.Buffer
		a := &relayAcks{c: &wire}
		long := `{"id":"` + strings.Repeat("p", maxHeld+10)
		a.sendInput([]byte(long))
		a.passed.Store(10)
		a.tellNow()
		if got, want := wire.String(), long+"\n\x1eack 10\n"; got != want {
			t.Errorf("the relay sent %.40q…%q, want …%q", got, got[max(0, len(got)-16):], want[len(want)-16:])
		}
	})
	t.Run("a write cut short", func(t *testing.T) {
		answers := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"
		var wire bytes.Buffer
		a := &relayAcks{c: struct {
			io.Reader
			io.Writer
		}{strings.NewReader(answers), &wire}, kick: make(chan struct{}, 1)}
		first := strings.Index(answers, "\n") + 1
		out := writerFunc(func(p []byte) (int, error) { return first + 5, syscall.EPIPE })
		if err := a.copyOut(out); !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("copyOut = %v, want the client's write error", err)
		}
		a.tellNow()
		if got, want := wire.String(), fmt.Sprintf("%cack %d\n", ackMark, first+5); got != want {
			t.Errorf("the relay told %q, want %q", got, want)
		}
	})
}

// Regression (an outsider's finding): offstage mcp under serve, stopped
// by SIGTERM while its client read nothing, stayed as long as the write
// to the client was stuck (30 s and more). It now leaves that write
// detachGrace after the signal.
func TestAStoppedRelayDoesNotWaitForAClientThatReadsNothing(t *testing.T) {
	sup, relay := unixPair(t)
	in, inW := io.Pipe()
	defer inW.Close()
	release := make(chan struct{})
	defer close(release)
	stuck := make(chan struct{})
	out := writerFunc(func(p []byte) (int, error) {
		close(stuck)
		<-release // the client reads nothing
		return 0, syscall.EPIPE
	})
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- relayStream(ctx, relay, "mcp", true, nil, in, out) }()
	br := bufio.NewReader(sup)
	if _, err := br.ReadBytes('\n'); err != nil { // the header
		t.Fatal(err)
	}
	sup.Write([]byte(`{"jsonrpc":"2.0","id":3,"result":{}}` + "\n"))
	<-stuck
	stop() // as SIGTERM does
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the stopped relay returned %v, want nil", err)
		}
	case <-time.After(detachGrace + 5*time.Second):
		t.Fatalf("the relay was still there %s after it was stopped", detachGrace+5*time.Second)
	}
}
