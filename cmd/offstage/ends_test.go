package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stateOf is the state directory offstage(t, …) gave cmd.
func stateOf(t *testing.T, env []string) string {
	t.Helper()
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "XDG_STATE_HOME="); ok {
			return v
		}
	}
	t.Fatal("no XDG_STATE_HOME")
	return ""
}

// TestRunNamesWhyItsSessionClosed: the tasks a run's session ends record
// why it closed: /quit in a conversation, --wait running out after a
// one-shot prompt (issue 38).
func TestRunNamesWhyItsSessionClosed(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}}]},
		{"text": "started"}
	]}`), 0o644)
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		reason string
	}{
		{"quit", []string{"run", "--script", script}, "go\n/quit\n", "run: /quit"},
		{"one-shot", []string{"run", "--script", script, "--wait", "1s", "go"}, "", "run: --wait 1s ran out (one-shot)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, mark := offstage(t, nil, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if code := exitOf(t, cmd.Run()); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
			}
			noSurvivors(t, mark)
			_, tasks := journalOf(t, stateOf(t, cmd.Env))
			if len(tasks) != 1 || tasks[0].EndedBy != "session" || tasks[0].EndReason != tc.reason {
				t.Errorf("tasks = %+v\nwant shell:1 ended by the session (%s)\nstderr:\n%s", tasks, tc.reason, errOut.String())
			}
		})
	}
}
