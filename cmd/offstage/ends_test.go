package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestAOneShotRunStoppedBySIGTERM (an outsider's finding): a one-shot
// run stopped by SIGTERM while its background work ran exited 0 with no
// answer, as if it had done what it was asked; in process its shell
// ended "by the session's context"; under serve the client printed no
// word of where the work went. Now it exits 143 saying so: in process
// its work ends by the run, naming the signal; under serve the session
// detaches, said as the client going away says it, and the work goes on.
func TestAOneShotRunStoppedBySIGTERM(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 100", "run_in_background": true}},
		                {"name": "bash", "input": {"command": "sleep 101"}}]},
		{"text": "started"},
		{"text": "it finished"}
	]}`), 0o644)
	stop := func(t *testing.T, env []string) (string, string) {
		t.Helper()
		cmd, mark := offstage(t, env, "run", "--script", script, "go")
		errOut := new(syncBuffer)
		cmd.Stdout, cmd.Stderr = io.Discard, errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitSurvivors(t, mark, 3) // offstage (or its relay), and the two sleeps
		cmd.Process.Signal(syscall.SIGTERM)
		if code := exitOf(t, cmd.Wait()); code != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %d after SIGTERM, want %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), errOut.String())
		}
		return errOut.String(), mark
	}
	t.Run("in process", func(t *testing.T) {
		env := []string{"XDG_STATE_HOME=" + t.TempDir()}
		errOut, mark := stop(t, env)
		if !strings.HasSuffix(errOut, "offstage: stopped by SIGTERM\n") {
			t.Errorf("stderr does not end saying it was stopped:\n%s", errOut)
		}
		noSurvivors(t, mark)
		// The foreground command too: its turn's end names the run.
		_, tasks := journalOf(t, stateOf(t, env))
		if len(tasks) != 2 {
			t.Fatalf("tasks = %+v, want two shells", tasks)
		}
		for _, r := range tasks {
			if r.EndedBy != "session" || r.EndReason != "run: stopped by SIGTERM (one-shot)" {
				t.Errorf("%s ended %s: %q, want by the session: run: stopped by SIGTERM (one-shot)", r.ID, r.EndedBy, r.EndReason)
			}
		}
	})
	t.Run("a conversation in process", func(t *testing.T) {
		// Not only a one-shot run: a conversation that SIGTERM ended
		// exited 0 (an outsider's finding).
		cmd, mark := offstage(t, nil, "run", "--script", script)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out := new(syncBuffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		io.WriteString(in, "go\n")
		waitSurvivors(t, mark, 3)
		cmd.Process.Signal(syscall.SIGTERM)
		if code := exitOf(t, cmd.Wait()); code != 128+int(syscall.SIGTERM) || !strings.Contains(out.String(), "offstage: bye. ") || !strings.HasSuffix(out.String(), "offstage: stopped by SIGTERM\n") {
			t.Errorf("a conversation stopped by SIGTERM: exit %d, want 143, the bye line and the signal:\n%s", code, out.String())
		}
		noSurvivors(t, mark)
	})
	t.Run("under serve", func(t *testing.T) {
		state := t.TempDir()
		startServe(t, state)
		errOut, _ := stop(t, []string{"XDG_STATE_HOME=" + state})
		// Its last line says where the work went.
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if last := lines[len(lines)-1]; !strings.HasPrefix(last, "offstage: detached from session") || !strings.Contains(last, "offstage run --attach") {
			t.Errorf("stderr does not end saying where the work went:\n%s", errOut)
		}
		if r := waitTask(t, state, "shell:1", func(map[string]any) bool { return true }); r["state"] != "running" {
			t.Errorf("shell:1 after its one-shot client's SIGTERM: %v, want running (detached)", r)
		}
	})
}
