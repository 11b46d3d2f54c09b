package tools_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// quickPrompts notices a prompt after 300ms instead of 4s.
func quickPrompts() tools.Config {
	return tools.Config{Process: proc.Config{PromptAfter: 300 * time.Millisecond}}
}

// TestAPromptIsNoticedAnsweredAndToldOnce: read -p on a terminal is
// marked waiting_for_input, a wait on it returns at once, the owner is
// told exactly once, and task_input's answer lets it finish.
func TestAPromptIsNoticedAnsweredAndToldOnce(t *testing.T) {
	e := newEnv(t, quickPrompts())
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "read -p 'Overwrite? [y/N] ' x; echo \"answer=$x\"", "tty": true, "run_in_background": true}`, &out)
	id := out.TaskID

	// The wait ends on the notice, well before its timeout, and takes it.
	start := time.Now()
	var w tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "timeout_seconds": 60}`, &w)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("task_wait took %v, want about the prompt delay", d)
	}
	want := id + ` seems to wait for input: "Overwrite? [y/N]". Answer it with task_input, or cancel it with task_cancel.`
	if len(w.Notices) != 1 || w.Notices[0].Kind != "waiting_for_input" || w.Notices[0].Text != want || len(w.Done) != 0 || w.TimedOut {
		t.Fatalf("task_wait = %+v, want the prompt notice", w)
	}
	if len(w.Running) != 1 || w.Running[0].WaitingForInput != "Overwrite? [y/N]" {
		t.Errorf("running = %+v, want it waiting for input", w.Running)
	}
	if n := e.top.Notices(); n != nil {
		t.Errorf("Notices() = %+v after the wait took the notice", n)
	}

	// Listed and inspected as waiting; a second wait returns at once too.
	var l tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &l)
	if len(l.Tasks) != 1 || l.Tasks[0].WaitingForInput != "Overwrite? [y/N]" {
		t.Errorf("task_list = %+v", l)
	}
	var in tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &in)
	if in.WaitingForInput != "Overwrite? [y/N]" {
		t.Errorf("task_inspect = %+v", in)
	}
	start = time.Now()
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "timeout_seconds": 60, "until": "never printed"}`, &w)
	if d := time.Since(start); d > 5*time.Second || !strings.Contains(w.Note, id+` waits for input ("Overwrite? [y/N]")`) || w.TimedOut {
		t.Errorf("a wait on a shell already waiting = %+v after %v, want at once, saying so", w, d)
	}

	// The answer: the mark clears, the program finishes, no second notice.
	var io tools.TaskInputResult
	ok(t, e, e.top, "task_input", `{"task_id": "`+id+`", "text": "y", "keys": ["enter"]}`, &io)
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "timeout_seconds": 20}`, &w)
	if len(w.Done) != 1 || !strings.Contains(w.Done[0].Result, "answer=y") {
		t.Fatalf("after the answer: %+v", w)
	}
	if n := e.top.Notices(); n != nil {
		t.Errorf("Notices() = %+v, want none: the stall was told once", n)
	}
}

func TestAForegroundPromptMovesToTheBackgroundAtOnce(t *testing.T) {
	e := newEnv(t, quickPrompts())
	start := time.Now()
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "printf 'Password: '; read p; echo ok", "interactive": true}`, &out)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("bash took %v, want about the prompt delay, not yield_after_seconds", d)
	}
	if out.Status != "running" || !strings.Contains(out.Note, `seems to wait for input: "Password:"`) || !strings.Contains(out.Note, "keeps running in the background as "+out.TaskID) {
		t.Fatalf("bash = %+v", out)
	}
	var io tools.TaskInputResult
	ok(t, e, e.top, "task_input", `{"task_id": "`+out.TaskID+`", "text": "x\n"}`, &io)
	waitDone(t, e.top, out.TaskID)
	if n := e.top.Notices(); n != nil {
		t.Errorf("Notices() = %+v: the bash result told it already", n)
	}
}

func TestAPromptWithClosedInputSaysHowToRerun(t *testing.T) {
	e := newEnv(t, quickPrompts())
	// A program that prompts and then waits without reading stdin (sleep
	// stands in for one that reads its terminal) cannot be answered.
	id := e.background(t, e.top, "printf 'Continue (yes/no)? '; sleep 60")
	var w tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "timeout_seconds": 60}`, &w)
	if len(w.Notices) != 1 || !strings.Contains(w.Notices[0].Text, "its input is closed") || !strings.Contains(w.Notices[0].Text, "interactive: true") || !strings.Contains(w.Notices[0].Text, "--yes") {
		t.Errorf("task_wait = %+v, want a notice with the rerun hint", w)
	}
}

func TestAPauseWithoutAPromptIsNotFlagged(t *testing.T) {
	e := newEnv(t, quickPrompts())
	id := e.background(t, e.top, "printf 'building'; sleep 1; echo ' done'")
	time.Sleep(700 * time.Millisecond)
	var l tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &l)
	if l.Tasks[0].WaitingForInput != "" {
		t.Errorf("task_list = %+v: a pause is not a prompt", l.Tasks)
	}
	waitDone(t, e.top, id)
	if n := e.top.Notices(); n != nil {
		t.Errorf("Notices() = %+v, want none", n)
	}
}

func TestNotifyOn(t *testing.T) {
	e := newEnv(t, tools.Config{})
	for args, want := range map[string]string{
		`{"command": "true", "notify_on": "ERROR"}`:                                                        "add run_in_background: true",
		`{"command": "true", "notify_on": "(", "run_in_background": true}`:                                 "notify_on is not a valid regular expression",
		`{"command": "true", "notify_on": "` + strings.Repeat("a", 1001) + `", "run_in_background": true}`: "notify_on is longer than 1000 characters",
	} {
		if got := e.refused(t, e.top, "bash", args); !strings.Contains(got, want) {
			t.Errorf("bash(%.80s) = %q, want %q", args, got, want)
		}
	}
	var out tools.BashOutput
	// awk writes its buffered output at once, so every line reaches the
	// watch within its 1 s batch (seq | sed, 50,000 lines, took longer on
	// a busy machine, and the notice came in two).
	ok(t, e, e.top, "bash", `{"command": "awk 'BEGIN { for (i = 1; i <= 50; i++) printf \"line %d\\nERROR %d000\\n\", i, i }'", "run_in_background": true, "notify_on": "^ERROR"}`, &out)
	if !strings.Contains(out.Note, "notices") {
		t.Errorf("bash note %q does not mention notices", out.Note)
	}
	waitDone(t, e.top, out.TaskID)
	n := e.top.Notices()
	if len(n) != 1 || n[0].Kind != "watch" {
		t.Fatalf("Notices() = %+v, want one watch notice", n)
	}
	if !strings.Contains(n[0].Text, "printed 50 lines matching") || !strings.Contains(n[0].Text, "ERROR 1000\nERROR 2000") || !strings.Contains(n[0].Text, "…and 30 more (at most 20 lines per notice).") {
		t.Errorf("watch notice = %q", n[0].Text)
	}
	if r := e.top.Drain(); len(r) != 1 || r[0].State != task.Completed {
		t.Errorf("the result after the notice = %+v", r)
	}
}

// TestASilentReaderMovesToTheBackgroundAtOnce: an interactive `cat` shows
// no question, yet it sits reading its input (seen from the kernel): the
// foreground bash returns after the prompt delay, saying so, and the
// shell is listed as waiting for input until it is answered.
func TestASilentReaderMovesToTheBackgroundAtOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel rule reads /proc")
	}
	e := newEnv(t, quickPrompts())
	start := time.Now()
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "cat", "interactive": true}`, &out)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("bash took %v, want about the prompt delay, not yield_after_seconds", d)
	}
	if out.Status != "running" || !strings.Contains(out.Note, `seems to wait for input: "(cat is reading its input)"`) {
		t.Fatalf("bash = %+v", out)
	}
	var l tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &l)
	if len(l.Tasks) != 1 || l.Tasks[0].WaitingForInput != "(cat is reading its input)" {
		t.Errorf("task_list = %+v", l)
	}
	var io tools.TaskInputResult
	ok(t, e, e.top, "task_input", `{"task_id": "`+out.TaskID+`", "text": "hello\n", "close_stdin": true}`, &io)
	waitDone(t, e.top, out.TaskID)
}
