package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// term is the other end of a pseudo-terminal running offstage.
type term struct {
	t    *testing.T
	f    *os.File
	mu   sync.Mutex
	out  strings.Builder
	seen int // how much of out expect has consumed
}

func (tm *term) read() {
	buf := make([]byte, 4096)
	for {
		n, err := tm.f.Read(buf)
		tm.mu.Lock()
		tm.out.Write(buf[:n])
		tm.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// expect waits until want appears in what offstage printed since the last
// expect.
func (tm *term) expect(want string) {
	tm.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		tm.mu.Lock()
		all := tm.out.String()
		tm.mu.Unlock()
		if i := strings.Index(all[tm.seen:], want); i >= 0 {
			tm.seen += i + len(want)
			return
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("offstage never printed %q; it printed:\n%s", want, all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (tm *term) send(s string) {
	tm.t.Helper()
	if _, err := io.WriteString(tm.f, s); err != nil {
		tm.t.Fatal(err)
	}
}

// startTerm runs offstage run with a script in a pseudo-terminal and
// returns the terminal, offstage's exit, and its mark.
func startTerm(t *testing.T, script string, args ...string) (*term, <-chan error, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(script), 0o644)
	cmd, mark := offstage(t, nil, append([]string{"run", "--script", path}, args...)...)
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// pty hands the master out in blocking mode, where Close does not end
	// a Read: one left blocked (a process of the test still holding the
	// terminal) outlived the test and failed goleak. A non-blocking copy
	// is the poller's, whose Close ends the Read.
	fd, err := syscall.Dup(int(ptmx.Fd()))
	ptmx.Close()
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd)
	syscall.SetNonblock(fd, true)
	f := os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { f.Close() })
	tm := &term{t: t, f: f}
	go tm.read()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	tm.expect("type a message")
	return tm, done, mark
}

// exits checks that offstage exits 0 soon and leaves nothing behind.
func (tm *term) exits(done <-chan error, mark string) {
	tm.t.Helper()
	select {
	case err := <-done:
		if code := exitOf(tm.t, err); code != 0 {
			tm.mu.Lock()
			all := tm.out.String()
			tm.mu.Unlock()
			tm.t.Errorf("exit %d (66: the race detector's); the terminal showed:\n%s", code, all)
		}
	case <-time.After(20 * time.Second):
		tm.t.Fatal("offstage did not exit")
	}
	noSurvivors(tm.t, mark)
}

func TestInteractiveThroughAPseudoTerminal(t *testing.T) {
	tm, done, mark := startTerm(t, `{"turns": [
		{"text": "Starting a long task.", "tool_calls": [{"name": "bash", "input": {"command": "exec sleep 100", "run_in_background": true}}]},
		{"text": "It runs in the background."},
		{"thinking": "This will take forever.", "text": "never said", "stream_delay_ms": 100000}
	]}`)
	tm.send("start a long task\r")
	tm.expect("It runs in the background.")
	tm.expect(`⋯ shell:1 "exec sleep 100" running`) // the live status line
	tm.send("/tasks\r")
	tm.expect("shell:1    running")

	tm.send("think hard\r")      // a turn that never ends by itself
	tm.expect("(thinking) This") // its first word: the turn runs (a fixed sleep here raced it)
	tm.send("\x03")              // Ctrl-C: the turn stops, the background task does not
	tm.expect("turn interrupted; background tasks keep running")
	tm.send("/tasks\r")
	tm.expect("shell:1    running")

	tm.send("/cancel shell:1\r")
	tm.expect("cancelling shell:1")
	tm.send("/wait shell:1\r")
	tm.expect("shell:1 canceled")

	tm.send("/quit\r")
	tm.expect("bye.")
	tm.exits(done, mark)
}

func TestSecondCtrlCQuitsAndReapsEverything(t *testing.T) {
	tm, done, mark := startTerm(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100 & sleep 100 & wait", "run_in_background": true}}]},
		{"text": "Two sleepers are running."}
	]}`)
	tm.send("go\r")
	tm.expect("Two sleepers are running.")
	// offstage, sh and the two sleepers: sh may start them after the
	// model's answer, so wait for them rather than look once.
	waitSurvivors(t, mark, 4)
	tm.send("\x03")
	tm.expect("Ctrl-C again")
	tm.send("\x03")
	tm.expect("1 running task was cancelled")
	tm.exits(done, mark)
}
