package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAServedRunIsToldWhatTheJournalLost: under offstage serve, a
// journal whose file is damaged while a hosted run goes on is said on
// the run's stderr as it happens, and the run ends with exit status 1 and
// a last line counting the session's lost records, as a run in its own
// process does; serve stop says the loss too, and exits 1. Before, serve's
// log alone said it, and every run and the stop exited 0 (an outsider's
// finding).
func TestAServedRunIsToldWhatTheJournalLost(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo one"}}]}, {"text": "said one"},
		{"tool_calls": [{"name": "bash", "input": {"command": "echo two"}}]}, {"text": "said two"},
		{"tool_calls": [{"name": "bash", "input": {"command": "echo three"}}]}, {"text": "said three"}]}`)
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "one\n")
	waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] == "completed" })
	damageHeader(t, state)
	io.WriteString(in, "two\n")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), "is damaged") && time.Now().Before(deadline) {
		io.WriteString(in, "three\n") // more records, for the journal to find the damage
		time.Sleep(200 * time.Millisecond)
	}
	io.WriteString(in, "/quit\n")
	in.Close()
	code := exitOf(t, cmd.Wait())
	last := lastLine(errOut.String())
	if !strings.Contains(errOut.String(), "is damaged") {
		t.Errorf("the run's stderr does not say the journal is damaged:\n%s", errOut.String())
	}
	if code != 1 || !strings.Contains(last, "the journal lost") || !strings.Contains(last, "of session") || !strings.Contains(last, "incomplete") {
		t.Errorf("the run: exit %d, last line %q; want 1, saying how many records of the session the journal lost\n%s", code, last, errOut.String())
	}
	_, stopErr, stopCode, _ := runIn(t, state, nil, "serve", "stop")
	if stopCode != 1 || !strings.Contains(stopErr, "the journal lost") {
		t.Errorf("serve stop: exit %d, stderr %q; want 1, saying the journal lost records", stopCode, stopErr)
	}
	sv.wait(t)
	noSurvivors(t, mark)
}

// TestARunWhoseSupervisorDiedSaysSo: a hosted run whose supervisor is
// killed says that the supervisor ended and the session with it, and
// sends its user to --resume. Before, it said the session had detached
// and that --attach would join it again, which no attach could.
func TestARunWhoseSupervisorDiedSaysSo(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [{"text": "hello"}]}`)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var errOut syncBuffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); len(sv.live(t).Sessions) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run's session never showed up under offstage serve")
		}
	}
	sv.cmd.Process.Kill()
	sv.wait(t)
	code := exitOf(t, cmd.Wait())
	last := lastLine(errOut.String())
	if code != 1 || !strings.Contains(last, "ended before the run did") || !strings.Contains(last, "offstage run --resume") || strings.Contains(last, "--attach joins it again") {
		t.Errorf("the run of a killed supervisor: exit %d, last line %q", code, last)
	}
}

// damageHeader overwrites the start of state's journal, its header and
// schema, as a stray write would: the journal finds it damaged at its
// next write. It returns the journal's path.
func damageHeader(t *testing.T, state string) string {
	t.Helper()
	path := filepath.Join(state, "offstage", "journal.db")
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte("not a database "), 300), 0); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAStopCutShortIsNotSaidDone: a supervisor killed while it stops
// (here while a shell ignores its SIGTERM) leaves serve stop saying so,
// exit 1. It said every session closed and every process reaped, while
// the journal showed a task orphaned (an outsider's finding).
func TestAStopCutShortIsNotSaidDone(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "trap '' TERM; sleep 300", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	if _, errOut, code, _ := runIn(t, state, nil, "run", "--wait", "0", "--script", script, "go"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	stop, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "serve", "stop")
	var out, errOut syncBuffer
	stop.Stdout, stop.Stderr = &out, &errOut
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // it stops, waiting on the shell's grace
	sv.cmd.Process.Kill()
	sv.wait(t)
	code := exitOf(t, stop.Wait())
	if code != 1 || strings.Contains(out.String(), "every process reaped") || !strings.Contains(errOut.String(), "ended without saying its stop was done") {
		t.Errorf("serve stop of a supervisor killed as it stopped: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
}
