package acpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	call := lineCaller(b, in, out)
	call("initialize", `{"protocolVersion":1}`)
	dir, _ := json.Marshal(b.TempDir())
	var cpu, wall time.Duration
	for b.Loop() {
		sid, prompt := openSession(b, call, dir)
		c0, w0 := processCPUOf(b, cmd.Process.Pid), time.Now()
		for range n {
			call("session/prompt", prompt)
		}
		cpu += processCPUOf(b, cmd.Process.Pid) - c0
		wall += time.Since(w0)
		call("session/close", `{"sessionId":`+sid+`}`)
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
