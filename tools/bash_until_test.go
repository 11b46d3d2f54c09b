package tools_test

import (
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestBashStartAndWaitUntil: issue 25 item 2. Starting a server and going
// on when it listens took two calls (bash, then task_wait); now one bash
// call returns with the line, or at once with the exit code when the
// command ends first, or at wait_seconds with it still running.
func TestBashStartAndWaitUntil(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "echo booting; sleep 0.2; echo listening on :8080; sleep 100", "run_in_background": true, "until": "listening", "wait_seconds": 20}`, &out)
	if out.Matched == nil || out.Matched.Line != "listening on :8080" || out.Status != "running" || !strings.Contains(out.Output, "booting") {
		t.Errorf("bash until = %+v, want the line and the task running", out)
	}
	// A command that fails before printing the line: at once, with its
	// exit code and output, and its result is not given again.
	ok(t, e, e.top, "bash", `{"command": "echo address already in use; exit 1", "run_in_background": true, "until": "listening", "wait_seconds": 20}`, &out)
	if out.Matched != nil || out.Status != "failed" || out.ExitCode == nil || *out.ExitCode != 1 || !strings.Contains(out.Output, "address already in use") {
		t.Errorf("bash until, failing first = %+v, want exit code 1 and the output", out)
	}
	failed := out.TaskID
	waitDone(t, e.top, failed)
	for _, r := range e.top.Drain() {
		if r.ID == failed {
			t.Errorf("the failed command's result came back again: %+v", r)
		}
	}
	// Neither: at wait_seconds, still running.
	ok(t, e, e.top, "bash", `{"command": "sleep 100", "run_in_background": true, "until": "never", "wait_seconds": 0.3}`, &out)
	if out.Matched != nil || out.Status != "running" || !strings.Contains(out.Note, "keeps running") {
		t.Errorf("bash until, timed out = %+v", out)
	}
	for _, tc := range []struct{ args, want string }{
		{`{"command": "true", "until": "x"}`, "run_in_background"},
		{`{"command": "true", "run_in_background": true, "until": "("}`, "not a valid regular expression"},
		{`{"command": "true", "run_in_background": true, "wait_seconds": 3}`, "pass until"},
	} {
		if got := e.refused(t, e.top, "bash", tc.args); !strings.Contains(got, tc.want) {
			t.Errorf("bash(%s) = %q, want it to mention %q", tc.args, got, tc.want)
		}
	}
}

// TestUntilWaitsForAQueuedShellToStart (an attacker's trial, F18): once
// as many shells ran as may, "start the server and wait until it
// listens" was refused at once: a queued shell was no shell to wait on.
func TestUntilWaitsForAQueuedShellToStart(t *testing.T) {
	e := newEnvWith(t, tools.Config{}, task.Options{MaxRunning: 1})
	var first tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "sleep 0.5", "run_in_background": true}`, &first)
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "echo listening on :9090; sleep 100", "run_in_background": true, "until": "listening", "wait_seconds": 20}`, &out)
	if out.Matched == nil || out.Matched.Line != "listening on :9090" {
		t.Errorf("bash until on a queued shell = %+v, want the line once it started", out)
	}
}

// TestColourIsNotAnOutputCut (an attacker's trial, F8): a short output
// with colour codes was reported as cut ("Only the end of the output is
// shown"), sending the model to read again what it had.
func TestColourIsNotAnOutputCut(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "printf 'a\\033[31mb\\r\\n'"}`, &out)
	if out.Output != "ab\n" || strings.Contains(out.Note, "Only the end") {
		t.Errorf("bash = %+v", out)
	}
}

// TestAQueuedForegroundCommandIsNotSaidToRun (an outsider's finding): a
// foreground command held in the queue by the running limit was adopted
// after yield_after_seconds as "still running", though it never started.
func TestAQueuedForegroundCommandIsNotSaidToRun(t *testing.T) {
	e := newEnvWith(t, tools.Config{}, task.Options{MaxRunning: 1})
	var first tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "sleep 100", "run_in_background": true}`, &first)
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "echo fg", "yield_after_seconds": 1}`, &out)
	if out.Status != "queued" || !strings.Contains(out.Note, "has not started") || strings.Contains(out.Note, "still running") {
		t.Errorf("a queued foreground command = %+v", out)
	}
}

// TestAShortWaitSecondsIsSaidRaised: bash's wait_seconds below the
// shortest wait is raised to it, and the result says so, as task_wait's
// does (an outsider's 2 s became 5 s without a word).
func TestAShortWaitSecondsIsSaidRaised(t *testing.T) {
	e := newEnv(t, tools.Config{WaitFloor: 1500 * time.Millisecond})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command":"sleep 30","run_in_background":true,"until":"never printed","wait_seconds":0.5}`, &out)
	if !strings.Contains(out.Note, "wait_seconds was raised to 1.5s") {
		t.Errorf("bash with wait_seconds 0.5: note %q; want it said raised to 1.5s", out.Note)
	}
}
