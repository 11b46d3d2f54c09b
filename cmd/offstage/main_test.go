package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc/sandbox"
	"go.uber.org/goleak"
)

// The test binary re-executes itself as offstage when this is set.
const asMainEnv = "OFFSTAGE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if sock := os.Getenv(rawPingEnv); sock != "" {
		rawPing(sock) // as a hostile client would: no check of its own
		return
	}
	if os.Getenv(asMainEnv) != "" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// markEnv is inherited by every process a test's offstage starts, so a
// scan of /proc finds any that survived.
const markEnv = "OFFSTAGE_TEST_MARK"

// offstage returns a command running offstage with args, marked, with the
// given extra environment (and none of the host's provider keys).
func offstage(t *testing.T, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	mark := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_") && !strings.HasPrefix(kv, "ANTHROPIC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A journal of its own, unless env says otherwise (the last value wins).
	cmd.Env = append(cmd.Env, asMainEnv+"=1", markEnv+"="+mark, "XDG_STATE_HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = t.TempDir()
	return cmd, mark
}

// survivors returns the live processes whose environment carries mark.
func survivors(t *testing.T, mark string) []string {
	t.Helper()
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(markEnv+"="+mark+"\x00")) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue // a zombie runs nothing
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		out = append(out, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// waitSurvivors waits until at least n processes carry mark.
func waitSurvivors(t *testing.T, mark string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(survivors(t, mark)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d processes running, have %q", n, survivors(t, mark))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func noSurvivors(t *testing.T, mark string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // reaping is prompt; a loaded machine is not
	for {
		left := survivors(t, mark)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived offstage: %q", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDemo(t *testing.T) {
	cmd, mark := offstage(t, nil, "demo")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo failed: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		t.Fatalf("demo ran over 60s:\n%s", out.String())
	}
	t.Logf("demo took %v", time.Since(start).Round(time.Millisecond))
	text := out.String()
	for capability, want := range map[string]string{
		"says the model is scripted":          "the model is scripted",
		"background shell":                    "← bash: shell:1 running",
		"two background sub-agents":           "← spawn_agent: agent:3 running",
		"live heartbeat":                      "agent:2 step 1: bash",
		"task_list":                           "→ task_list",
		"task_wait with any":                  `"mode": "any"`,
		"cancelling a long task":              "· shell:4 canceled",
		"a foreground command adopted":        "keeps running in the background as shell:7",
		"results reflowed into the next turn": "background results joined the conversation: shell:7",
		"a wait until a line":                 "shell:4 matched: dev server listening on :8080",
		"a prompt noticed":                    `shell:8 seems to wait for input: "Apply 3 migrations to the dev database? [y/N]"`,
		"the prompt answered":                 "answer: y\n      │ migrations applied",
		"an autonomous turn":                  "── autonomous turn",
		"clean exit, everything reaped":       "every one has finished and every process was reaped",
		"the sandbox in force":                "offstage demo: the shells run in a sandbox: workspace-write",
		"a write inside the workspace":        "notes.txt written in the workspace",
		"a write outside refused":             "The sandbox (workspace-write) refused this",
	} {
		if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil && strings.Contains(capability, "sandbox") {
			continue // this host has none: the demo says so instead
		}
		if !strings.Contains(text, want) {
			t.Errorf("the demo does not show %s (%q)", capability, want)
		}
	}
	// Incremental reads: the second read of the build goes on where the
	// first stopped.
	reads := regexp.MustCompile(`← task_output: shell:1 running\n((?:      │ .*\n)+)`).FindAllStringSubmatch(text, -1)
	if len(reads) != 2 || reads[0][1] == "" || reads[1][1] == "" || strings.HasPrefix(reads[1][1], reads[0][1]) {
		t.Errorf("the demo does not show two incremental reads of the build: %q", reads)
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", text)
	}
	noSurvivors(t, mark)
}

// TestAReaderThatGoesAwayDoesNotKillOffstage: `offstage run --json |
// head` closed offstage's stdout early, and SIGPIPE killed it before it
// stopped its tasks and wrote its journal. Now a write to the closed pipe
// fails, and the run ends with its task recorded.
func TestAReaderThatGoesAwayDoesNotKillOffstage(t *testing.T) {
	state := t.TempDir()
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "seq 1 20000"}}]},
		{"text": "done"}]}`), 0o644)
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--json", "--script", script, "go")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	io.ReadFull(out, buf)
	out.Close() // the reader goes away
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("offstage died of %v", ws.Signal())
	}
	if s := survivors(t, mark); len(s) > 0 {
		t.Errorf("left running: %v", s)
	}
	tasks, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "tasks", "--json")
	got, err := tasks.Output()
	if err != nil || !strings.Contains(string(got), `"state":"completed"`) {
		t.Errorf("the journal after the reader went away: %s (%v)", got, err)
	}
}
