package tools_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/offstage/offstage/tools"
)

func untilArgs(id, pattern string, timeout float64) string {
	b, _ := json.Marshal(map[string]any{"task_ids": []string{id}, "until": pattern, "timeout_seconds": timeout})
	return string(b)
}

// TestWaitUntilAServerListens: start a server, wait until it says it
// listens, go on; the match consumes nothing and is not found twice.
func TestWaitUntilAServerListens(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, `echo booting; sleep 0.3; printf '\033[1mlistening on :8080\033[0m\n'; sleep 100`)
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", untilArgs(id, `listening on :\d+`, 20), &out)
	if out.Matched == nil || out.Matched.TaskID != id || out.Matched.Line != "listening on :8080" || len(out.Running) != 1 || len(out.Done) != 0 {
		t.Fatalf("task_wait until = %+v", out)
	}
	if !strings.Contains(out.Note, "Nothing was consumed") {
		t.Errorf("note = %q", out.Note)
	}
	var read tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "since": `+jsonInt(out.Matched.Cursor)+`}`, &read)
	if read.Output != "" {
		t.Errorf("output after the matched line = %q, want nothing yet", read.Output)
	}
	ok(t, e, e.top, "task_wait", untilArgs(id, `listening on`, 0.3), &out)
	if out.Matched != nil || !out.TimedOut {
		t.Errorf("a second wait matched the same line: %+v", out)
	}
	var cancelled tools.CancelOutput
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+id+`"}`, &cancelled)
	waitDone(t, e.top, id)
	if d := e.top.Drain(); len(d) != 1 || d[0].ID != id {
		t.Errorf("the result after a match = %v, want it delivered once, now", d)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestWaitUntilSeesEarlierLines: a line printed before the call, and not
// read yet, matches at once; a line already read does not.
func TestWaitUntilSeesEarlierLines(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "echo ready; echo steady; sleep 100")
	waitOutput(t, e.top, id, "steady")
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", untilArgs(id, `^ready$`, 5), &out)
	if out.Matched == nil || out.Matched.Line != "ready" {
		t.Fatalf("task_wait until an earlier line = %+v", out)
	}
	var read tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &read) // reads both lines
	ok(t, e, e.top, "task_wait", untilArgs(id, `steady`, 0.3), &out)
	if out.Matched != nil {
		t.Errorf("a line already read matched: %+v", out)
	}
}

// TestWaitUntilEndsWithTheTask: a shell that finishes without the line
// ends the wait as a plain wait does, its result delivered.
func TestWaitUntilEndsWithTheTask(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "echo nothing to see; exit 3")
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", untilArgs(id, `never`, 20), &out)
	if out.Matched != nil || len(out.Done) != 1 || out.Done[0].Status != "failed" {
		t.Errorf("task_wait until, the shell failing first = %+v", out)
	}
}

func TestWaitUntilRefusesBadInput(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "sleep 100")
	for args, want := range map[string]string{
		untilArgs(id, `(unclosed`, 1):               "not a valid regular expression",
		untilArgs(id, strings.Repeat("a", 1001), 1): "longer than 1000 characters",
		untilArgs("shell:99", `x`, 1):               `There is no task "shell:99"`,
	} {
		if got := e.refused(t, e.top, "task_wait", args); !strings.Contains(got, want) {
			t.Errorf("task_wait(%.60s) error = %q, want %q", args, got, want)
		}
	}
}

// TestWaitUntilFirstMatchWins: of several shells, the one that prints the
// line first is the match.
func TestWaitUntilFirstMatchWins(t *testing.T) {
	e := newEnv(t, tools.Config{})
	slow := e.background(t, e.top, "sleep 2; echo up; sleep 100")
	fast := e.background(t, e.top, "sleep 0.2; echo up; sleep 100")
	b, _ := json.Marshal(map[string]any{"task_ids": []string{slow, fast}, "until": "^up$", "timeout_seconds": 20})
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", string(b), &out)
	if out.Matched == nil || out.Matched.TaskID != fast || len(out.Running) != 2 {
		t.Errorf("task_wait until over two shells = %+v, want %s's line", out, fast)
	}
}

// TestWaitUntilSaysWhatItCouldNotLookAt pins issue 20: a wait with until
// that could not look at part of a flood (it passed the 1 MiB ring, and
// there is no log) said nothing, so "no match" read as "no such line".
func TestWaitUntilSaysWhatItCouldNotLookAt(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "yes | head -c 67108864")
	var out tools.WaitOutput
	// (?i): no literal for the pre-filter to skip lines with, so every
	// line goes through the regexp, slower than the flood.
	ok(t, e, e.top, "task_wait", untilArgs(id, `(?i)never`, 120), &out)
	m := regexp.MustCompile(`until could not look at part of the output \(` + regexp.QuoteMeta(id) + `: (\d+) bytes\)`).FindStringSubmatch(out.Note)
	if out.Matched != nil || len(out.Done) != 1 || m == nil {
		t.Fatalf("task_wait until over a flood = %+v, want it done and a note that says how much until missed", out)
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n <= 0 || n > 64<<20-procHeadBytes-procTailBytes {
		t.Errorf("until missed %d bytes, want some, and at most all but the head and the ring", n)
	}
}
