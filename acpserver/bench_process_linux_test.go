package acpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
)

// The Process benchmarks run offstage's side in a process of its own, the
// test binary again, on the system's pipes (blocking, as an editor's
// child gets them), and time that process alone: what a prompt costs
// offstage acp as an editor runs it, without the client's CPU, which
// lineSessions counts, and with what lineSessions's in-memory pipes leave
// out: a read and a write of the system's a prompt, and the scheduler's
// work when the reading goroutine hands the prompt to the session's Run
// loop while the turn's goroutine waits in the kernel (a spinning thread
// that sleeps before it steals; a futex to wake it).

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
	if err := acpserver.Serve(context.Background(), acpserver.Config{Agent: agent.Config{Model: turnsScript(1 + n)}, AllowAll: true}, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// processCPUOf is the CPU time process pid used so far, all its threads,
// those ended too (its process clock, which the kernel lets another
// process read).
func processCPUOf(b *testing.B, pid int) time.Duration {
	clock := int32(^pid<<3 | 2) // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// processSessions is linesOver with offstage in a process of its own, on
// the system's pipes, as an editor runs offstage acp: prompt-cpu-ns is
// that process's CPU alone, the client's left out.
func processSessions(b *testing.B, n int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchServeEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewReader(out)
	id := 0
	call := func(method, params string) []byte {
		id++
		if _, err := fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
			b.Fatal(err)
		}
		answer := fmt.Appendf(nil, `"id":%d,`, id)
		for {
			line, err := lines.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(line, answer) {
				if !bytes.Contains(line, []byte(`"result"`)) {
					b.Fatalf("%s: %s", method, line)
				}
				return line
			}
		}
	}
	call("initialize", `{"protocolVersion":1}`)
	dir, _ := json.Marshal(b.TempDir())
	var cpu, wall time.Duration
	for b.Loop() {
		var sess struct {
			Result struct{ SessionID string }
		}
		if err := json.Unmarshal(call("session/new", `{"cwd":`+string(dir)+`,"mcpServers":[]}`), &sess); err != nil {
			b.Fatal(err)
		}
		sid, _ := json.Marshal(sess.Result.SessionID)
		prompt := `{"sessionId":` + string(sid) + `,"prompt":[{"type":"text","text":"what runs?"}]}`
		call("session/prompt", prompt) // the warm-up
		c0, w0 := processCPUOf(b, cmd.Process.Pid), time.Now()
		for range n {
			call("session/prompt", prompt)
		}
		cpu += processCPUOf(b, cmd.Process.Pid) - c0
		wall += time.Since(w0)
		call("session/close", `{"sessionId":`+string(sid)+`}`)
	}
	b.ReportMetric(float64(wall.Nanoseconds())/float64(b.N*n), "prompt-ns")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "prompt-cpu-ns")
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkACPPromptOverheadProcess: one prompt on a fresh session, in
// offstage's own process (processSessions). Its yardstick is
// BenchmarkACPPromptOverheadDirectWarm.
func BenchmarkACPPromptOverheadProcess(b *testing.B) { processSessions(b, 1) }

// BenchmarkACPPromptOverheadProcessLongSession: a conversation of
// longSession prompts, in offstage's own process. Its yardstick is
// BenchmarkACPPromptOverheadDirectLongSession.
func BenchmarkACPPromptOverheadProcessLongSession(b *testing.B) {
	processSessions(b, longSession)
}
