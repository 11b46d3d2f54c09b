package acpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/pollfd"
	"github.com/offstage/offstage/provider/scripted"
)

// turnsScript is a script of n prompts, each one tool call (task_list)
// and an answer: a scripted turn plays by the number of answers so far.
// A script that does not parse is a bug of the benchmarks: it panics.
func turnsScript(n int) *scripted.Model {
	var turns []string
	for range n {
		turns = append(turns, `{"tool_calls": [{"name": "task_list", "input": {}}]}`, `{"text": "Nothing is running."}`)
	}
	m, err := scripted.Parse([]byte(`{"turns": [` + strings.Join(turns, ",") + `]}`))
	if err != nil {
		panic(err)
	}
	return m
}

// The prompt benchmarks measure one prompt on a short conversation: each
// iteration gets a new session, made, warmed up with one prompt and closed
// with the timer stopped, as BenchmarkTurnOverhead (agent) resets its
// history, so the figure does not depend on b.N. (It did: on one
// ever-growing conversation a prompt cost 183 µs at 200 iterations and
// 1,038 µs at 2,000.) The untimed first prompt takes what a session does
// once (over ACP, announcing the slash commands). The LongSession pair
// measure a conversation of a fixed length instead: after the warm-up,
// longSession prompts, and prompt-ns is the mean cost of one of them.

// Each reports prompt-cpu-ns besides prompt-ns: the CPU time of the whole
// process (every goroutine: the client's, offstage's, the runtime's) per
// prompt, which a prompt costs whether or not its goroutines' hand-offs
// wait for a core; prompt-ns, the wall time, counts those waits too,
// which a machine shared with other work lengthens.

// The Warm variants leave the benchmark's timer running through each
// session's setup, and time the prompts with their own clocks alone:
// testing.B's StopTimer and StartTimer stop the world to read the memory
// statistics, which costs a pipeline of goroutines (the client's, the
// connection's reader, the turn's) its running threads just before the
// prompt (a conversation of 20 prompts, each between a StopTimer and a
// StartTimer, cost 58 µs of CPU a prompt against 31 µs without), and a
// single goroutine, the direct yardstick's, next to nothing. Their ns/op
// and allocations count the setup too: prompt-ns and prompt-cpu-ns are
// their figures.

// cpuClock adds up the process's CPU time, and the wall time, over a
// benchmark's timed parts.
type cpuClock struct {
	total, from time.Duration
	wall        time.Duration
	wallFrom    time.Time
}

func (c *cpuClock) start() { c.from, c.wallFrom = processCPU(), time.Now() }
func (c *cpuClock) stop() {
	c.total += processCPU() - c.from
	c.wall += time.Since(c.wallFrom)
}

// report reports the CPU time per prompt, of b.N iterations of n prompts.
func (c *cpuClock) report(b *testing.B, n int) {
	b.ReportMetric(float64(c.total.Nanoseconds())/float64(b.N*n), "prompt-cpu-ns")
}

// pause stops the benchmark's timer, unless warm.
func pause(b *testing.B, warm bool) {
	if !warm {
		b.StopTimer()
	}
}

// resume starts it again, unless warm.
func resume(b *testing.B, warm bool) {
	if !warm {
		b.StartTimer()
	}
}

// processCPU is the CPU time the process used so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// longSession is the number of prompts in a LongSession iteration.
const longSession = 100

// directSessions runs b.N sessions of n prompts each on agent.Session,
// with a sink that does nothing, timing only the prompts.
func directSessions(b *testing.B, n int, warm bool) {
	model := turnsScript(1 + n)
	ctx := context.Background()
	var cpu cpuClock
	if !warm {
		b.ReportAllocs()
	}
	for b.Loop() {
		pause(b, warm)
		s, err := agent.New(ctx, agent.Config{Model: model})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Turn(ctx, "what runs?", agent.Discard); err != nil {
			b.Fatal(err)
		}
		resume(b, warm)
		cpu.start()
		for range n {
			if _, err := s.Turn(ctx, "what runs?", agent.Discard); err != nil {
				b.Fatal(err)
			}
		}
		cpu.stop()
		pause(b, warm)
		if err := s.Close(ctx); err != nil {
			b.Fatal(err)
		}
		resume(b, warm)
	}
	b.ReportMetric(float64(cpu.wall.Nanoseconds())/float64(b.N*n), "prompt-ns")
	cpu.report(b, n)
}

// BenchmarkACPPromptOverheadDirect is the yardstick: the same turn run on
// agent.Session, with a sink that does nothing.
func BenchmarkACPPromptOverheadDirect(b *testing.B) { directSessions(b, 1, false) }

// BenchmarkACPPromptOverheadDirectWarm: BenchmarkACPPromptOverheadDirect
// with the benchmark's timer running through the setup (see Warm above).
func BenchmarkACPPromptOverheadDirectWarm(b *testing.B) { directSessions(b, 1, true) }

// BenchmarkACPPromptOverheadDirectLongSession: the yardstick for a
// conversation of longSession prompts.
func BenchmarkACPPromptOverheadDirectLongSession(b *testing.B) {
	directSessions(b, longSession, false)
}

// acpSessions runs b.N sessions of n prompts each end to end over ACP on
// in-memory pipes, with the Go SDK's client, timing only the prompts:
// session/prompt, the streamed updates (two message chunks, a tool call
// and its two updates), the response.
func acpSessions(b *testing.B, n int) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: turnsScript(1 + n)}, AllowAll: true}, agentIn, agentOut)
		agentOut.Close()
	}()
	c := newClient()
	in := &gatedReader{r: clientIn, ready: make(chan struct{})}
	conn := acp.NewClientSideConnection(c, clientOut, in)
	conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	close(in.ready)
	ctx := context.Background()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	var cpu cpuClock
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		sess, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
		if err != nil {
			b.Fatal(err)
		}
		prompt := func() {
			r, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: sess.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("what runs?")}})
			if err != nil || r.StopReason != acp.StopReasonEndTurn {
				b.Fatal(fmt.Sprint(r.StopReason, err))
			}
		}
		prompt() // the warm-up
		b.StartTimer()
		cpu.start()
		for range n {
			prompt()
		}
		cpu.stop()
		b.StopTimer()
		if _, err := conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: sess.SessionId}); err != nil {
			b.Fatal(err)
		}
		c.mu.Lock()
		c.updates = nil // the client's record, not the agent's, would grow
		c.mu.Unlock()
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.wall.Nanoseconds())/float64(b.N*n), "prompt-ns")
	cpu.report(b, n)
	b.StopTimer()
	clientOut.Close()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	<-conn.Done()
}

// BenchmarkACPPromptOverheadSDKClient: one prompt on a fresh session over
// ACP, the Go SDK's client included. Most of its time is that client's:
// it decodes each update into a map, then again into its type.
func BenchmarkACPPromptOverheadSDKClient(b *testing.B) { acpSessions(b, 1) }

// BenchmarkACPPromptOverheadSDKClientLongSession: a conversation of
// longSession prompts over ACP with the Go SDK's client.
func BenchmarkACPPromptOverheadSDKClientLongSession(b *testing.B) { acpSessions(b, longSession) }

// lineSessions is acpSessions with a client that costs next to nothing:
// it writes each request as a line and reads lines until the one that
// answers it, as an editor's transport does before its own decoding. What
// remains is offstage's cost of a prompt over ACP: the line guard, the
// SDK's agent side, the turn, the updates encoded and written.
func lineSessions(b *testing.B, n int, warm bool) { linesOver(b, n, warm, memPipe) }

// memPipe is an in-memory pipe (io.Pipe): a write returns once the other
// side has read it all.
func memPipe(b *testing.B) (io.ReadCloser, io.WriteCloser) { return io.Pipe() }

// osPipe is a pipe of the system's, as an editor runs offstage acp over
// stdio: a write returns once the kernel has it.
func osPipe(b *testing.B) (io.ReadCloser, io.WriteCloser) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	return r, w
}

// linesOver is lineSessions over pipes made by pipe.
func linesOver(b *testing.B, n int, warm bool, pipe func(*testing.B) (io.ReadCloser, io.WriteCloser)) {
	call, dir, stop := lineServe(b, n, pipe)
	var cpu cpuClock
	if !warm {
		b.ReportAllocs()
	}
	for b.Loop() {
		pause(b, warm)
		sid, prompt := openSession(b, call, dir)
		resume(b, warm)
		cpu.start()
		for range n {
			call("session/prompt", prompt)
		}
		cpu.stop()
		pause(b, warm)
		call("session/close", `{"sessionId":`+sid+`}`)
		resume(b, warm)
	}
	b.ReportMetric(float64(cpu.wall.Nanoseconds())/float64(b.N*n), "prompt-ns")
	cpu.report(b, n)
	stop()
}

// lineServe serves a script of n prompts a session (after a warm-up's)
// over pipes made by pipe, to lineCaller's client, initialized: call
// calls, dir is a directory for sessions (JSON). stop stops the timer,
// ends the input and fails b if Serve did.
func lineServe(b *testing.B, n int, pipe func(*testing.B) (io.ReadCloser, io.WriteCloser)) (call func(method, params string) []byte, dir []byte, stop func()) {
	agentIn, clientOut := pipe(b)
	clientIn, agentOut := pipe(b)
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: turnsScript(1 + n)}, AllowAll: true}, agentIn, agentOut)
		agentOut.Close()
	}()
	call = lineCaller(b, clientOut, clientIn)
	call("initialize", `{"protocolVersion":1}`)
	dir, _ = json.Marshal(b.TempDir())
	return call, dir, func() {
		b.StopTimer()
		clientOut.Close()
		err := <-served
		agentIn.Close()
		clientIn.Close()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// openSession opens a session in dir (JSON) through call and sends it a
// prompt to warm it up; it returns the session's id (JSON) and the
// prompt's params.
func openSession(b *testing.B, call func(method, params string) []byte, dir []byte) (sid, prompt string) {
	var sess struct {
		Result struct{ SessionID string }
	}
	if err := json.Unmarshal(call("session/new", `{"cwd":`+string(dir)+`,"mcpServers":[]}`), &sess); err != nil {
		b.Fatal(err)
	}
	id, _ := json.Marshal(sess.Result.SessionID)
	prompt = `{"sessionId":` + string(id) + `,"prompt":[{"type":"text","text":"what runs?"}]}`
	call("session/prompt", prompt) // the warm-up
	return string(id), prompt
}

// lineCaller returns call, which writes a request as a line to w and
// reads lines from r until the one that answers it, which it returns:
// the benchmarks' client, as an editor's transport reads before its own
// decoding. An answer that is no result fails b.
//
// It costs next to nothing, so that what is timed is offstage's: it
// builds each request in one reused buffer, skips a notification by its
// first bytes, and looks for the id only in the other lines. (Formatting
// with fmt and searching every update line for the id cost about 1 µs a
// prompt on one core, 7% of BenchmarkACPPromptOverheadLongSession.)
func lineCaller(b *testing.B, w io.Writer, r io.Reader) (call func(method, params string) []byte) {
	lines := bufio.NewReader(r)
	notification := []byte(`{"jsonrpc":"2.0","method":`)
	var req, answer []byte
	id := int64(0)
	return func(method, params string) []byte {
		id++
		req = append(req[:0], `{"jsonrpc":"2.0","id":`...)
		req = strconv.AppendInt(req, id, 10)
		req = append(req, `,"method":`...)
		req = strconv.AppendQuote(req, method)
		req = append(req, `,"params":`...)
		req = append(req, params...)
		req = append(req, "}\n"...)
		if _, err := w.Write(req); err != nil {
			b.Fatal(err)
		}
		answer = append(strconv.AppendInt(append(answer[:0], `"id":`...), id, 10), ',')
		for {
			line, err := lines.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.HasPrefix(line, notification) {
				continue
			}
			if bytes.Contains(line, answer) {
				if !bytes.Contains(line, []byte(`"result"`)) {
					b.Fatalf("%s: %s", method, line)
				}
				return line
			}
		}
	}
}

// BenchmarkACPPromptOverhead: one prompt on a fresh session over ACP,
// offstage's side of it (lineSessions).
func BenchmarkACPPromptOverhead(b *testing.B) { lineSessions(b, 1, false) }

// BenchmarkACPPromptOverheadWarm: BenchmarkACPPromptOverhead with the
// benchmark's timer running through the setup (see Warm above); its
// yardstick is BenchmarkACPPromptOverheadDirectWarm.
func BenchmarkACPPromptOverheadWarm(b *testing.B) { lineSessions(b, 1, true) }

// BenchmarkACPPromptOverheadLongSession: a conversation of longSession
// prompts over ACP, offstage's side of it.
func BenchmarkACPPromptOverheadLongSession(b *testing.B) { lineSessions(b, longSession, false) }

// BenchmarkACPPromptOverheadWarmOSPipe: BenchmarkACPPromptOverheadWarm
// over the system's pipes, as an editor runs offstage acp on stdio
// (where a write does not wait for the reader, as io.Pipe's does).
func BenchmarkACPPromptOverheadWarmOSPipe(b *testing.B) { linesOver(b, 1, true, osPipe) }

// BenchmarkACPPromptOverheadLongSessionOSPipe:
// BenchmarkACPPromptOverheadLongSession over the system's pipes.
func BenchmarkACPPromptOverheadLongSessionOSPipe(b *testing.B) {
	linesOver(b, longSession, false, osPipe)
}

// BenchmarkACPFirstPrompt: a new session's first prompt over ACP,
// offstage's side of it (lineCaller), timed with its own clock (as the
// Warm variants are): session/new and session/close around it are not
// in prompt-ns. Its yardstick is BenchmarkACPFirstPromptDirect.
func BenchmarkACPFirstPrompt(b *testing.B) {
	call, dir, stop := lineServe(b, 0, memPipe)
	var cpu cpuClock
	for b.Loop() {
		var sess struct {
			Result struct{ SessionID string }
		}
		if err := json.Unmarshal(call("session/new", `{"cwd":`+string(dir)+`,"mcpServers":[]}`), &sess); err != nil {
			b.Fatal(err)
		}
		sid, _ := json.Marshal(sess.Result.SessionID)
		cpu.start()
		call("session/prompt", `{"sessionId":`+string(sid)+`,"prompt":[{"type":"text","text":"what runs?"}]}`)
		cpu.stop()
		call("session/close", `{"sessionId":`+string(sid)+`}`)
	}
	b.ReportMetric(float64(cpu.wall.Nanoseconds())/float64(b.N), "prompt-ns")
	cpu.report(b, 1)
	stop()
}

// BenchmarkACPFirstPromptDirect: a new agent.Session's first turn, the
// yardstick of BenchmarkACPFirstPrompt.
func BenchmarkACPFirstPromptDirect(b *testing.B) {
	model := turnsScript(1)
	ctx := context.Background()
	var cpu cpuClock
	for b.Loop() {
		s, err := agent.New(ctx, agent.Config{Model: model})
		if err != nil {
			b.Fatal(err)
		}
		cpu.start()
		if _, err := s.Turn(ctx, "what runs?", agent.Discard); err != nil {
			b.Fatal(err)
		}
		cpu.stop()
		if err := s.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpu.wall.Nanoseconds())/float64(b.N), "prompt-ns")
	cpu.report(b, 1)
}

// BenchmarkACPNewSession: what opening and closing a session costs over
// ACP (session/new, the slash commands announced, session/close), with
// no prompt; sessions are made per prompt in BenchmarkACPPromptOverhead,
// and what they leave (garbage to collect) is paid during its prompts.
func BenchmarkACPNewSession(b *testing.B) {
	call, dir, stop := lineServe(b, 0, memPipe)
	var cpu cpuClock
	b.ReportAllocs()
	cpu.start()
	for b.Loop() {
		var sess struct {
			Result struct{ SessionID string }
		}
		if err := json.Unmarshal(call("session/new", `{"cwd":`+string(dir)+`,"mcpServers":[]}`), &sess); err != nil {
			b.Fatal(err)
		}
		sid, _ := json.Marshal(sess.Result.SessionID)
		call("session/close", `{"sessionId":`+string(sid)+`}`)
	}
	cpu.stop()
	b.ReportMetric(float64(cpu.total.Nanoseconds())/float64(b.N), "session-cpu-ns")
	stop()
}

// BenchmarkACPNewSessionDirect: agent.New and Close, the part of
// BenchmarkACPNewSession that is not ACP's.
func BenchmarkACPNewSessionDirect(b *testing.B) {
	model := turnsScript(1)
	ctx := context.Background()
	var cpu cpuClock
	b.ReportAllocs()
	cpu.start()
	for b.Loop() {
		s, err := agent.New(ctx, agent.Config{Model: model})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cpu.stop()
	b.ReportMetric(float64(cpu.total.Nanoseconds())/float64(b.N), "session-cpu-ns")
}

// benchServeEnv makes the test binary offstage's side of the Process
// benchmarks (see TestMain): Serve on its stdin and stdout, with a script
// of that many prompts a session.
const benchServeEnv = "ACPSERVER_BENCH_SERVE"

// benchServe is the test binary as offstage acp, for processSessions.
func benchServe() {
	n, err := strconv.Atoi(os.Getenv(benchServeEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in, out, restore := pollfd.Stdio(os.Stdin, os.Stdout) // as offstage acp does
	err = acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: turnsScript(1 + n)}, AllowAll: true}, in, out)
	restore()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// BenchmarkACPTransportFloor: what a prompt's round trip costs over the
// pipes alone, the floor under BenchmarkACPPromptOverheadLongSession that
// no agent on the other side of a pipe goes below. Its server is no
// agent: it reads a prompt's line and writes back, in one write, the
// bytes offstage answers a prompt with (the updates and the response,
// recorded from a real session, with the prompt's id put in), on
// goroutines of its own, as Serve's reading and turn goroutines are.
func BenchmarkACPTransportFloor(b *testing.B) { floorOver(b, memPipe) }

// BenchmarkACPTransportFloorOSPipe: BenchmarkACPTransportFloor over the
// system's pipes, as offstage acp runs on stdio.
func BenchmarkACPTransportFloorOSPipe(b *testing.B) { floorOver(b, osPipe) }

func floorOver(b *testing.B, pipe func(*testing.B) (io.ReadCloser, io.WriteCloser)) {
	before, after := promptAnswer(b)
	agentIn, clientOut := pipe(b)
	clientIn, agentOut := pipe(b)
	defer agentIn.Close()
	defer clientIn.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer agentOut.Close()
		lines := bufio.NewReader(agentIn)
		var out []byte
		for {
			line, err := lines.ReadSlice('\n')
			if err != nil {
				return
			}
			id, ok := requestID(line)
			if !ok {
				b.Errorf("the floor's server read %q", line)
				return
			}
			out = append(append(append(out[:0], before...), id...), after...)
			if _, err := agentOut.Write(out); err != nil {
				return
			}
		}
	}()
	call := lineCaller(b, clientOut, clientIn)
	var cpu cpuClock
	b.ReportAllocs()
	cpu.start()
	for b.Loop() {
		call("session/prompt", `{"sessionId":"sess","prompt":[{"type":"text","text":"what runs?"}]}`)
	}
	cpu.stop()
	b.ReportMetric(float64(cpu.wall.Nanoseconds())/float64(b.N), "prompt-ns")
	cpu.report(b, 1)
	clientOut.Close()
	<-served
}

// requestID returns the id of a request line lineCaller wrote.
func requestID(line []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(line, []byte(`"id":`))
	if !ok {
		return nil, false
	}
	end := bytes.IndexByte(rest, ',')
	return rest[:end], end > 0
}

// promptAnswer returns what offstage writes for a prompt of
// lineSessions' (its second in a session: its updates and response, as
// read), cut around the response's id.
func promptAnswer(b *testing.B) (before, after []byte) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: turnsScript(2)}, AllowAll: true}, agentIn, agentOut)
		agentOut.Close()
	}()
	var seen bytes.Buffer
	call := lineCaller(b, clientOut, io.TeeReader(clientIn, &seen))
	call("initialize", `{"protocolVersion":1}`)
	dir, _ := json.Marshal(b.TempDir())
	_, prompt := openSession(b, call, dir)
	seen.Reset()
	resp := call("session/prompt", prompt)
	clientOut.Close()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	all := seen.Bytes()
	at := bytes.Index(all, resp)
	id, ok := requestID(resp)
	if at < 0 || !ok {
		b.Fatalf("the prompt's response %q is not in what was read", resp)
	}
	idAt := at + bytes.Index(resp, id)
	return bytes.Clone(all[:idAt]), bytes.Clone(all[idAt+len(id) : at+len(resp)])
}
