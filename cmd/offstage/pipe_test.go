package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPiped runs offstage run with a script and stdin from a pipe, and
// returns its stdout and stderr.
func runPiped(t *testing.T, script, stdin string, args ...string) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(script), 0o644)
	cmd, mark := offstage(t, nil, append([]string{"run", "--script", path}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	noSurvivors(t, mark)
	return out.String(), errOut.String()
}

// Piped lines run in order: a command waits for the answer to the message
// before it, and /quit does not cut the turn short.
func TestPipedConversationRunsInOrder(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [
		{"expect": "^hello$", "text": "Hello to you.", "delay_ms": 300}
	]}`, "hello\n/tasks\n/quit\n")
	answer, tasks := strings.Index(out, "Hello to you."), strings.Index(out, "no tasks")
	if answer < 0 || tasks < answer {
		t.Errorf("want the answer, then /tasks; stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

// The end of piped input waits for the last message's answer.
func TestPipedConversationAnswersTheLastLine(t *testing.T) {
	out, errOut := runPiped(t, `{"turns": [
		{"text": "One.", "delay_ms": 100},
		{"expect": "^two$", "text": "Two.", "delay_ms": 200}
	]}`, "one\ntwo\n")
	if !strings.Contains(out, "One.") || !strings.Contains(out, "Two.") || !strings.Contains(out, "bye.") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}
