package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func TestMain(m *testing.M) {
	if n := os.Getenv(helperEnv); n != "" {
		k, _ := strconv.ParseInt(n, 10, 64)
		os.Exit(printHelper(k))
	}
	goleak.VerifyTestMain(m)
}

// env is a task table, a tool set and the top-level view, cleaned up at
// the end of the test.
type env struct {
	tb  *task.Table
	set *tools.Set
	top *task.View
}

func newEnv(t *testing.T, cfg tools.Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, task.Options{})
}

// newEnvWith is newEnv with a table of opts.
func newEnvWith(t *testing.T, cfg tools.Config, opts task.Options) *env {
	t.Helper()
	tb := task.New(context.Background(), opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := tb.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	if cfg.Process.Dir == "" {
		cfg.Process.Dir = t.TempDir()
	}
	if cfg.WaitFloor == 0 {
		cfg.WaitFloor = -1 // these tests time short waits out; TestAShortWaitIsLengthened has the floor
	}
	return &env{tb: tb, set: tools.New(cfg), top: tb.View("")}
}

// call runs a tool and checks the invariants every result keeps: valid
// JSON, an object, within the budget, no Go error, and a result that is
// not an error fits the tool's output schema.
func (e *env) call(t *testing.T, v *task.View, tool, args string) tools.Result {
	t.Helper()
	tl := e.set.Tool(tool)
	if tl == nil {
		t.Fatalf("no tool %q", tool)
	}
	res, err := tl.Call(t.Context(), v, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s(%s) Go error: %v", tool, args, err)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(res.Text), &obj); err != nil {
		t.Fatalf("%s(%s) text is not a JSON object: %q", tool, args, res.Text)
	}
	if len(res.Text) > 16<<10 {
		t.Fatalf("%s(%s) result is %d bytes, over the budget", tool, args, len(res.Text))
	}
	if !res.IsError {
		checkOutput(t, tl, res.Text)
	}
	return res
}

// ok calls a tool that must succeed and decodes its result into out,
// which it zeroes first (omitted fields must not keep old values).
func ok[T any](t *testing.T, e *env, v *task.View, tool, args string, out *T) {
	t.Helper()
	res := e.call(t, v, tool, args)
	if res.IsError {
		t.Fatalf("%s(%s) = error %s", tool, args, res.Text)
	}
	var zero T
	*out = zero
	if err := json.Unmarshal([]byte(res.Text), out); err != nil {
		t.Fatal(err)
	}
}

// refused calls a tool that must fail and returns its error sentence.
func (e *env) refused(t *testing.T, v *task.View, tool, args string) string {
	t.Helper()
	res := e.call(t, v, tool, args)
	var out tools.ErrorOutput
	if !res.IsError || json.Unmarshal([]byte(res.Text), &out) != nil || out.Error == "" {
		t.Fatalf("%s(%s) = %s, want an error result", tool, args, res.Text)
	}
	return out.Error
}

func (e *env) background(t *testing.T, v *task.View, command string) string {
	t.Helper()
	var out tools.BashOutput
	args, _ := json.Marshal(map[string]any{"command": command, "run_in_background": true})
	ok(t, e, v, "bash", string(args), &out)
	waitAttached(t, v, out.TaskID)
	return out.TaskID
}

// waitAttached blocks until a background shell's process runs with its
// output attached. The bash tool answers before that (the first start of
// a host takes a while), and the task's activity turns to "running (pid
// N)" a moment later: a test that compares two reads must not count that
// moment as news, nor miss it as one.
func waitAttached(t *testing.T, v *task.View, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := tools.Shell(v, id); ok {
			return
		}
		if i, err := v.Info(id); err != nil || i.State.Finished() {
			return // ended (or never was): nothing more will attach
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no process attached after 20s", id)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitDone blocks until a task has finished, without consuming it.
func waitDone(t *testing.T, v *task.View, id string) {
	t.Helper()
	done, err := v.Done(id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not finish", id)
	}
}

func TestBashForeground(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "echo hello; echo oops >&2; exit 3"}`, &out)
	if out.Status != "failed" || out.ExitCode == nil || *out.ExitCode != 3 || out.Error != "exit status 3" {
		t.Errorf("bash = %+v, want failed with exit code 3", out)
	}
	if !strings.Contains(out.Output, "hello\n") || !strings.Contains(out.Output, "oops\n") || out.OutputBytes != 11 {
		t.Errorf("output = %q (%d bytes)", out.Output, out.OutputBytes)
	}
	// A foreground result is consumed: it will not be reflowed.
	if d := e.top.Drain(); d != nil {
		t.Errorf("Drain() after a foreground command = %v, want nothing", d)
	}
}

// Issue 37 item 9: results reached the model HTML-escaped, 2>&1 as
// 2\u003e\u00261. The text is JSON with the characters as they are, also
// for an error result and a long output.
func TestResultsAreNotHTMLEscaped(t *testing.T) {
	e := newEnv(t, tools.Config{})
	for _, args := range []string{
		`{"command": "echo '>>> a 2>&1 <b> & c'"}`,
		`{"command": "true", "<b>&": 1}`,
		`{"command": "for i in $(seq 1 3000); do echo '>>> a 2>&1 <b> & c'; done"}`,
	} {
		res := e.call(t, e.top, "bash", args)
		if strings.Contains(res.Text, `\u00`) || !strings.Contains(res.Text, ">") {
			t.Errorf("bash(%s) = %.300s, want > < & as they are", args, res.Text)
		}
	}
}

func TestBashBackgroundResultComesBackOnce(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "echo from the background")
	if !strings.HasPrefix(id, "shell:") {
		t.Fatalf("id = %q", id)
	}
	waitDone(t, e.top, id)
	d := e.top.Drain()
	if len(d) != 1 || d[0].ID != id || !strings.Contains(d[0].Text, "from the background") {
		t.Errorf("Drain() = %+v", d)
	}
}

// A foreground command still running after yield_after_seconds is adopted
// into the background, not killed, and its output can be read later.
func TestBashAdoptsASlowForegroundCommand(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	start := time.Now()
	ok(t, e, e.top, "bash", `{"command": "sleep 2; echo done", "yield_after_seconds": 1}`, &out)
	if d := time.Since(start); d < time.Second {
		t.Errorf("bash returned after %v, before yield_after_seconds", d)
	}
	if out.Status != "running" || !strings.Contains(out.Note, "keeps running in the background as "+out.TaskID) || !strings.Contains(out.Note, "Do not run it again") {
		t.Fatalf("bash = %+v, want it adopted", out)
	}
	waitDone(t, e.top, out.TaskID)
	var read tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+out.TaskID+`"}`, &read)
	if read.Output != "done\n" || read.Status != "completed" {
		t.Errorf("task_output = %+v, want done", read)
	}
}

func TestBashArguments(t *testing.T) {
	e := newEnv(t, tools.Config{})
	for args, want := range map[string]string{
		`{}`:                              "command",
		`{"command": ""}`:                 "command is empty",
		`{"command": 42}`:                 "command must be a JSON string, not a number",
		`{"command": "true", "bogus": 1}`: `bash has no parameter "bogus"`,
		`{"command": "true", "timeout_seconds": -1}`: "timeout_seconds must not be negative",
		`{"command": "true", "cwd": "nope"}`:         "cwd \"nope\" is not a directory",
		`not json`:                                   "not valid JSON",
		`[1, 2]`:                                     "must be a JSON object",
	} {
		if got := e.refused(t, e.top, "bash", args); !strings.Contains(got, want) {
			t.Errorf("bash(%s) error = %q, want it to mention %q", args, got, want)
		}
	}
	if n := len(e.top.List()); n != 0 {
		t.Errorf("refused calls started %d tasks", n)
	}
}

func TestBashTimeoutAndCwd(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "sleep 100", "timeout_seconds": 0.2}`, &out)
	if out.Status != "timed_out" {
		t.Errorf("bash with timeout = %+v, want timed_out", out)
	}
	ok(t, e, e.top, "bash", `{"command": "mkdir sub && cd sub && pwd"}`, &out)
	ok(t, e, e.top, "bash", `{"command": "pwd", "cwd": "sub"}`, &out)
	if !strings.HasSuffix(strings.TrimSpace(out.Output), "/sub") {
		t.Errorf("pwd in cwd sub = %q", out.Output)
	}
}

// TestCheckRefusesBeforeRunning: Check refuses what does not fit the
// schema or the typed input with the error Call would give, and accepts
// what Call would run (whose own checks, an empty command say, come later).
func TestCheckRefusesBeforeRunning(t *testing.T) {
	e := newEnv(t, tools.Config{})
	bash := e.set.Tool("bash")
	for _, args := range []string{`{"command": "true", "bogus": 1}`, `{"command": 42}`, `not json`, `[1]`} {
		res, ok := bash.Check(json.RawMessage(args))
		if ok || !res.IsError {
			t.Errorf("Check(%s) = %+v, %v; want refused", args, res, ok)
			continue
		}
		if want := e.call(t, e.top, "bash", args); res.Text != want.Text {
			t.Errorf("Check(%s) says %s, Call says %s", args, res.Text, want.Text)
		}
	}
	for _, args := range []string{`{"command": "true"}`, `{"command": ""}`} {
		if res, ok := bash.Check(json.RawMessage(args)); !ok {
			t.Errorf("Check(%s) = %+v, want accepted", args, res)
		}
	}
	if res, ok := e.set.Tool("task_list").Check(nil); !ok {
		t.Errorf("task_list Check(no arguments) = %+v, want accepted", res)
	}
	// A tool made with Define is checked the same way.
	type in struct {
		N int `json:"n"`
	}
	tl := tools.Define("typed", "d", 0, func(context.Context, *task.View, in) (any, error) { return nil, nil })
	if res, ok := tl.Check(json.RawMessage(`{"n": 1, "m": 2}`)); ok || !strings.Contains(res.Text, "typed") {
		t.Errorf("Check(unknown field m) = %+v, %v; want refused", res, ok)
	}
	if n := len(e.top.List()); n != 0 {
		t.Errorf("Check started %d tasks", n)
	}
}

func TestTaskList(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &out)
	if out.Count != 0 || out.Note != "You have no background tasks." {
		t.Errorf("empty task_list = %+v", out)
	}
	id := e.background(t, e.top, "sleep 100")
	ok(t, e, e.top, "task_list", ``, &out) // empty arguments are {}
	if out.Count != 1 || out.Tasks[0].ID != id || out.Tasks[0].Status != "running" || out.Tasks[0].Label != "sleep 100" {
		t.Errorf("task_list = %+v", out)
	}
}

func TestTaskInspectConsumesAFinishedResult(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "echo one; echo two")
	waitDone(t, e.top, id)
	var out tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`", "recent": 1}`, &out)
	if out.Status != "completed" || !strings.Contains(out.Result, "one\ntwo\n") || out.OutputTail != "two\n" {
		t.Errorf("task_inspect = %+v", out)
	}
	if d := e.top.Drain(); d != nil {
		t.Errorf("the result was shown by task_inspect and reflowed again: %v", d)
	}
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &out)
	if out.Result != "" || !strings.Contains(out.Note, "already given to you") {
		t.Errorf("second task_inspect = %+v, want no result text again", out)
	}
}

func TestTaskInspectShowsAnAgentsSteps(t *testing.T) {
	e := newEnv(t, tools.Config{})
	release := make(chan struct{})
	id, err := e.top.Spawn(task.Spec{Kind: "agent", Label: "reviewer"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.AttachHistory(steps{{Kind: task.BlockUser, Text: "review"}, {Kind: task.BlockToolCall, Tool: "bash"}})
		h.Progress(2, "running tool bash")
		<-release
		return "all good", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	deadline := time.Now().Add(5 * time.Second)
	var out tools.InspectOutput
	for out.Iteration != 2 && time.Now().Before(deadline) {
		ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &out)
	}
	if out.TotalSteps != 2 || len(out.Recent) != 2 || out.Recent[1].Tool != "bash" || out.Activity != "running tool bash" {
		t.Errorf("task_inspect of an agent = %+v", out)
	}
	if msg := e.refused(t, e.top, "task_output", `{"task_id": "`+id+`"}`); !strings.Contains(msg, "not a shell") {
		t.Errorf("task_output of an agent = %q", msg)
	}
}

func shellOutput(t *testing.T, command string) string {
	t.Helper()
	out, err := osexec.Command("/bin/sh", "-c", command).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

type steps []task.Block

func (s steps) Snapshot() []task.Block { return s }

func TestTaskOutputCursorsTailAndFilter(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "printf 'a 1\\nb 2\\n'; sleep 0.3; printf 'a 3\\nb 4\\n'")
	var out tools.TaskOutputResult
	deadline := time.Now().Add(5 * time.Second)
	for out.Output == "" && time.Now().Before(deadline) {
		ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &out)
	}
	if out.Output != "a 1\nb 2\n" || out.NextCursor != 8 {
		t.Fatalf("first read = %+v", out)
	}
	waitDone(t, e.top, id)
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &out) // since the last read
	if out.Output != "a 3\nb 4\n" || out.NextCursor != 16 || out.More {
		t.Errorf("second read = %+v", out)
	}
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "since": 0, "filter": "^a"}`, &out)
	if out.Output != "a 1\na 3\n" {
		t.Errorf("filtered read = %q", out.Output)
	}
	ok(t, e, e.top, "task_output", `{"task_id": " `+strings.TrimPrefix(id, "shell:")+` ", "tail_lines": 1}`, &out)
	if out.Output != "b 4\n" {
		t.Errorf("tail read by bare number = %q", out.Output)
	}
	for args, want := range map[string]string{
		`{"task_id": "` + id + `", "since": 0, "tail_lines": 2}`: "either since or tail_lines",
		`{"task_id": "` + id + `", "filter": "("}`:               "not a valid regular expression",
		`{"task_id": "` + id + `", "since": -5}`:                 "since must be",
		`{"task_id": "shell:999"}`:                               "no task",
		`{"task_id": "999"}`:                                     "no task numbered 999",
		// An id that is not one is said to be none, bounded, with what one
		// looks like; it was echoed as a task that does not exist (an
		// outsider's finding).
		`{"task_id": "1e400"}`:     `"1e400" is not a task id: an id is a kind, a colon and a number from 1, as shell:3`,
		`{"task_id": 1.5}`:         `"1.5" is not a task id`,
		`{"task_id": "shell:007"}`: `"shell:007" is not a task id`,
		`{"task_id": "shell:` + strings.Repeat("9", 5000) + `"}`: `"shell:9999999999999999999999999999999999…(+4966 more bytes)" is not a task id`,
	} {
		if got := e.refused(t, e.top, "task_output", args); !strings.Contains(got, want) {
			t.Errorf("task_output(%s) = %q, want %q", args, got, want)
		}
	}
}

func TestTaskOutputPagesThroughLargeOutput(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "seq 1 10000") // 48,894 bytes
	waitDone(t, e.top, id)
	var all strings.Builder
	var out tools.TaskOutputResult
	for range 20 {
		ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &out)
		all.WriteString(out.Output)
		if !out.More {
			break
		}
		if !strings.HasSuffix(out.Output, "\n") {
			t.Fatalf("a page ends mid-line: %q", out.Output[len(out.Output)-10:])
		}
	}
	want := shellOutput(t, "seq 1 10000")
	if all.String() != want || out.TotalBytes != int64(len(want)) {
		t.Errorf("paged output differs: %d bytes, want %d", all.Len(), len(want))
	}
}

// TestATailTooLongForOneCallStartsAtALine: tail_lines asking for more
// than one call shows starts at a line, and says how many lines came and
// where the rest is; it began mid-line, unannounced (an outsider's
// finding: "0\n298831\n…", the end of 298830, read as a line).
func TestATailTooLongForOneCallStartsAtALine(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "seq 1 300000")
	waitDone(t, e.top, id)
	var out tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "tail_lines": 1000000}`, &out)
	lines := strings.Split(strings.TrimSuffix(out.Output, "\n"), "\n")
	first, err := strconv.Atoi(lines[0])
	if err != nil || lines[len(lines)-1] != "300000" || first != 300000-len(lines)+1 {
		t.Fatalf("tail = %d lines from %q to %q; want whole lines ending at 300000", len(lines), lines[0], lines[len(lines)-1])
	}
	if want := fmt.Sprintf("Only the last %d of the 1000000 lines asked for fit", len(lines)); !strings.Contains(out.Note, want) {
		t.Errorf("note = %q, want it to say %q", out.Note, want)
	}
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "tail_lines": 3}`, &out)
	if out.Output != "299998\n299999\n300000\n" || strings.Contains(out.Note, "Only the last") {
		t.Errorf("a tail that fits = %q, note %q", out.Output, out.Note)
	}
}

// TestALongResultKeepsItsHeader: a background shell whose output is long
// lines comes back through task_wait cut to the result's size with its
// first line (how it ended, how much it wrote) kept, and a count of the
// output's bytes cut after it: cut whole, the line was lost, and
// "…(71 earlier bytes)" seemed to say that little came before the tail
// (an outsider's finding).
func TestALongResultKeepsItsHeader(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, `head -c 200000 /dev/zero | tr '\0' A; echo; echo END`)
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "timeout_seconds": 30}`, &out)
	if len(out.Done) != 1 {
		t.Fatalf("task_wait = %+v", out)
	}
	res := out.Done[0].Result
	head, rest, _ := strings.Cut(res, "\n")
	if !strings.HasPrefix(head, "exit status 0 after ") || !strings.Contains(head, "200005 bytes of output") {
		t.Errorf("the result's first line is %q; want how it ended and how much it wrote", head)
	}
	cut, err := strconv.Atoi(strings.TrimPrefix(strings.Split(rest, " earlier bytes)")[0], "…("))
	if !strings.HasSuffix(res, "AAAA\nEND\n") || err != nil || cut < 1 || len(res) > 4<<10+100 {
		t.Errorf("result (%d bytes) = %.200q…%q; want the first line, a count of the output cut, and the end", len(res), res, res[max(0, len(res)-20):])
	}
}

func TestTaskWait(t *testing.T) {
	e := newEnv(t, tools.Config{})
	fast := e.background(t, e.top, "echo fast")
	slow := e.background(t, e.top, "echo started; sleep 100")
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+fast+`", "`+slow+`"], "mode": "any", "timeout_seconds": 10}`, &out)
	if len(out.Done) != 1 || out.Done[0].ID != fast || !strings.Contains(out.Done[0].Result, "fast") || out.TimedOut {
		t.Errorf("task_wait any = %+v", out)
	}
	if len(out.Running) != 1 || out.Running[0].ID != slow {
		t.Errorf("running = %+v", out.Running)
	}
	// Consumed: not reflowed, and a second wait reports it delivered before.
	if d := e.top.Drain(); d != nil {
		t.Errorf("Drain() after task_wait = %v", d)
	}
	start := time.Now()
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+fast+`", "`+slow+`"], "mode": "all", "timeout_seconds": 0.3}`, &out)
	if !out.TimedOut || len(out.Done) != 0 || len(out.DeliveredBefore) != 1 || !strings.Contains(out.Note, "not an error") {
		t.Errorf("task_wait all with timeout = %+v", out)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("task_wait waited %v, want about 0.3s", d)
	}
	if out.Running[0].OutputTail != "started\n" {
		t.Errorf("running snapshot tail = %q", out.Running[0].OutputTail)
	}
	for args, want := range map[string]string{
		`{"task_ids": []}`: "task_ids is empty",
		`{"task_ids": ["` + fast + `"], "mode": "some"}`:        `mode must be "any" or "all"`,
		`{"task_ids": ["` + fast + `"], "timeout_seconds": -1}`: "must not be negative",
		`{"task_ids": "` + fast + `"}`:                          "task_ids must be a JSON array",
	} {
		if got := e.refused(t, e.top, "task_wait", args); !strings.Contains(got, want) {
			t.Errorf("task_wait(%s) = %q, want %q", args, got, want)
		}
	}
}

func TestTaskWaitClampsItsTimeout(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "true")
	var out tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": [`+strings.TrimPrefix(id, "shell:")+`], "timeout_seconds": 1000}`, &out)
	if len(out.Done) != 1 || !strings.Contains(out.Note, "capped at 300") {
		t.Errorf("task_wait with 1000s = %+v, want done and a note about the cap", out)
	}
}

func TestTaskCancel(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "sleep 100")
	var out tools.CancelOutput
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+id+`"}`, &out)
	if out.AlreadyFinished || !strings.Contains(out.Note, "Cancellation requested") {
		t.Errorf("task_cancel = %+v", out)
	}
	waitDone(t, e.top, id)
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+id+`"}`, &out)
	if !out.AlreadyFinished || out.Status != "canceled" || !strings.Contains(out.Note, "already finished (canceled)") {
		t.Errorf("second task_cancel = %+v", out)
	}
}

func TestTaskInput(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var started tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "read name; echo hello $name", "interactive": true, "run_in_background": true}`, &started)
	var in tools.TaskInputResult
	ok(t, e, e.top, "task_input", `{"task_id": "`+started.TaskID+`", "text": "world\n", "close_stdin": true}`, &in)
	if in.BytesWritten != 6 || !in.StdinClosed {
		t.Errorf("task_input = %+v", in)
	}
	waitDone(t, e.top, started.TaskID)
	var out tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+started.TaskID+`"}`, &out)
	if out.Output != "hello world\n" {
		t.Errorf("output = %q", out.Output)
	}
	if got := e.refused(t, e.top, "task_input", `{"task_id": "`+started.TaskID+`", "text": "late"}`); !strings.Contains(got, "has exited") {
		t.Errorf("task_input after exit = %q", got)
	}
	plain := e.background(t, e.top, "sleep 100")
	if got := e.refused(t, e.top, "task_input", `{"task_id": "`+plain+`", "text": "x"}`); !strings.Contains(got, "interactive: true") {
		t.Errorf("task_input to a non-interactive shell = %q", got)
	}
	if got := e.refused(t, e.top, "task_input", `{"task_id": "`+plain+`", "text": ""}`); !strings.Contains(got, "text and keys are empty") {
		t.Errorf("task_input with no text = %q", got)
	}
}

// A caller never sees or touches another owner's task, and a refused call
// has no side effect.
func TestToolsAreScopedToTheCaller(t *testing.T) {
	e := newEnv(t, tools.Config{})
	release := make(chan struct{})
	defer close(release)
	ids := make(chan string, 1)
	agent, err := e.top.Spawn(task.Spec{Kind: "agent"}, func(ctx context.Context, h *task.Handle) (string, error) {
		id, _, err := tools.SpawnShell(h.View(), proc.Config{Command: "echo secret; sleep 100", Stdin: true}, tools.ShellOptions{})
		ids <- id
		if err != nil {
			return "", err
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	child := <-ids
	sub := e.tb.View(agent)
	var subOut tools.TaskOutputResult
	deadline := time.Now().Add(5 * time.Second)
	for subOut.Output == "" && time.Now().Before(deadline) {
		ok(t, e, sub, "task_output", `{"task_id": "`+child+`", "since": 0}`, &subOut)
	}
	for _, call := range []struct{ tool, args string }{
		{"task_inspect", `{"task_id": "` + child + `"}`},
		{"task_output", `{"task_id": "` + child + `"}`},
		{"task_wait", `{"task_ids": ["` + child + `"], "timeout_seconds": 0.1}`},
		{"task_cancel", `{"task_id": "` + child + `"}`},
		{"task_input", `{"task_id": "` + child + `", "text": "x"}`},
		{"task_output", `{"task_id": "` + strings.TrimPrefix(child, "shell:") + `"}`},
	} {
		if got := e.refused(t, e.top, call.tool, call.args); !strings.Contains(got, "is not one of your tasks") {
			t.Errorf("top %s(%s) = %q, want it refused as not yours", call.tool, call.args, got)
		}
	}
	var list tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &list)
	if list.Count != 1 || list.Tasks[0].ID != agent {
		t.Errorf("top task_list = %+v, want only the agent", list)
	}
	// No side effects: still running, its cursor untouched for its owner.
	if info, _ := e.tb.Info(child); info.State != task.Running {
		t.Errorf("the child is %v after refused calls", info.State)
	}
	ok(t, e, sub, "task_output", `{"task_id": "`+child+`", "since": 0}`, &subOut)
	if subOut.Output != "secret\n" {
		t.Errorf("owner's read = %q", subOut.Output)
	}
}

func TestResultsStayWithinTheBudget(t *testing.T) {
	e := newEnv(t, tools.Config{ResultBudget: 2048})
	var ids []string
	for range 10 {
		ids = append(ids, e.background(t, e.top, "seq 1 5000"))
	}
	for _, id := range ids {
		waitDone(t, e.top, id)
	}
	args, _ := json.Marshal(map[string]any{"task_ids": ids, "mode": "all"})
	res, err := e.set.Tool("task_wait").Call(t.Context(), e.top, args)
	if err != nil || res.IsError {
		t.Fatalf("task_wait = %v, %s", err, res.Text)
	}
	if len(res.Text) > 2048 {
		t.Errorf("result is %d bytes, over its 2048 budget", len(res.Text))
	}
	if !strings.Contains(res.Text, "earlier bytes)") && !strings.Contains(res.Text, "more bytes)") {
		t.Errorf("cut results do not say they were cut: %s", res.Text)
	}
}

// TestTaskOutputReadsBackFromTheLog: with LogDir, a shell that prints 15
// MB in a burst is read with task_output from cursor 0 to the end: every
// byte comes back in order and skipped_bytes stays 0. Without, the gap is
// reported.
func TestTaskOutputReadsBackFromTheLog(t *testing.T) {
	for _, logs := range []bool{true, false} {
		cfg := tools.Config{}
		if logs {
			cfg.LogDir = t.TempDir()
		}
		e := newEnv(t, cfg)
		id := e.background(t, e.top, "seq 1 2000000")
		waitDone(t, e.top, id)
		var b strings.Builder
		var skipped int64
		var out tools.TaskOutputResult
		for cursor := int64(0); ; cursor = out.NextCursor {
			ok(t, e, e.top, "task_output", fmt.Sprintf(`{"task_id": %q, "since": %d}`, id, cursor), &out)
			b.WriteString(out.Output)
			skipped += out.SkippedBytes
			if !out.More {
				break
			}
		}
		want, _ := osexec.Command("seq", "1", "2000000").Output()
		switch {
		case logs && (skipped != 0 || b.String() != string(want)):
			t.Errorf("with a log: %d bytes read, %d skipped, want all %d", b.Len(), skipped, len(want))
		case !logs && skipped < int64(len(want))-2<<20:
			t.Errorf("without a log: %d skipped, want most of %d", skipped, len(want))
		}
	}
}

// TestTaskOutputFilterReadsOn: a filtered read goes on past output where
// nothing matches, up to 8 MiB a call, instead of one 8 KiB page: an
// outsider needed 123 calls to reach one line after 1 MB of noise. Its
// matches fill at most a page, cut between lines, and paging through
// them from each next_cursor gives every matching line once.
func TestTaskOutputFilterReadsOn(t *testing.T) {
	e := newEnv(t, tools.Config{LogDir: t.TempDir()})
	var out tools.TaskOutputResult

	id := e.background(t, e.top, "yes noise | head -n 166667; echo NEEDLE; yes noise | head -n 3333; echo ERROR boom")
	waitDone(t, e.top, id)
	ok(t, e, e.top, "task_output", fmt.Sprintf(`{"task_id": %q, "since": 0, "filter": "NEEDLE|ERROR"}`, id), &out)
	if out.Output != "NEEDLE\nERROR boom\n" || out.More || out.NextCursor != out.TotalBytes {
		t.Errorf("one filtered read through 1 MB = %+v, want both lines and the end", out)
	}

	// 10 MB of noise: a call reads through 8 MiB, says so, and the next
	// goes on from there to the line.
	id = e.background(t, e.top, "yes noise | head -n 1666667; echo NEEDLE")
	waitDone(t, e.top, id)
	ok(t, e, e.top, "task_output", fmt.Sprintf(`{"task_id": %q, "since": 0, "filter": "NEEDLE"}`, id), &out)
	if out.Output != "" || !out.More || out.NextCursor < 8<<20 || out.NextCursor > 8<<20+64<<10 ||
		!strings.Contains(out.Note, "No line from byte 0 to") || !strings.Contains(out.Note, "at most 8 MiB") {
		t.Errorf("first read through 10 MB = %+v, want 8 MiB read, nothing matched, said so", out)
	}
	ok(t, e, e.top, "task_output", fmt.Sprintf(`{"task_id": %q, "filter": "NEEDLE"}`, id), &out)
	if out.Output != "NEEDLE\n" || out.More {
		t.Errorf("second read = %+v, want the line", out)
	}

	// Many matches: a page each, between lines, none lost or repeated.
	id = e.background(t, e.top, "seq 1 30000")
	waitDone(t, e.top, id)
	var b strings.Builder
	calls := 0
	for cursor := int64(0); ; cursor = out.NextCursor {
		ok(t, e, e.top, "task_output", fmt.Sprintf(`{"task_id": %q, "since": %d, "filter": "7$"}`, id, cursor), &out)
		calls++
		if len(out.Output) > 8<<10 || out.Output != "" && !strings.HasSuffix(out.Output, "\n") {
			t.Fatalf("read %d: %d bytes, ending %q", calls, len(out.Output), out.Output[max(0, len(out.Output)-10):])
		}
		b.WriteString(out.Output)
		if !out.More {
			break
		}
	}
	var want strings.Builder
	for i := 7; i <= 30000; i += 10 {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if b.String() != want.String() || calls < 2 {
		t.Errorf("paged through the matches in %d calls: got %d bytes, want %d", calls, b.Len(), want.Len())
	}
}

// TestTaskOutputSaysWhyBytesAreGone (issue 19, item 5): a read behind the
// ring, past what the output log holds, says why those bytes are gone:
// before, it always blamed memory, also when the log had stopped at its
// cap or because its disk was full (/dev/full: every write fails).
func TestTaskOutputSaysWhyBytesAreGone(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to stand for a full disk")
	}
	for _, c := range []struct {
		name string
		cfg  tools.Config
		want string
	}{
		{"no log", tools.Config{}, "are no longer kept (only the first 64 KiB and the last 1 MiB are)."},
		{"log at its cap", tools.Config{LogDir: t.TempDir(), Process: proc.Config{LogMaxBytes: 2 << 20}},
			"are no longer kept: the output log keeps only the first 2097152 bytes (its cap), and memory keeps only the first 64 KiB and the last 1 MiB."},
		{"full disk", tools.Config{Process: proc.Config{LogPath: "/dev/full"}},
			"are lost: the output log stopped at byte 0 because writing it failed (no space left on device), and memory keeps only the first 64 KiB and the last 1 MiB."},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.cfg)
			id := e.background(t, e.top, "seq 1 2000000") // 14.8 MB
			waitDone(t, e.top, id)
			var out tools.TaskOutputResult
			ok(t, e, e.top, "task_output", fmt.Sprintf(`{"task_id": %q, "since": 3000000}`, id), &out)
			if out.SkippedBytes == 0 || !strings.HasSuffix(out.Note, c.want) {
				t.Errorf("skipped %d bytes, note %q; want the note to end %q", out.SkippedBytes, out.Note, c.want)
			}
		})
	}
}

// TestBashResultSaysTheLogWasNotKept: a foreground command whose output
// log could not be written (a full disk) ended with a note inviting the
// model to read "the rest" from 0, most of which was gone; only a read
// across the gap said so (found by an outsider's trial of issue 19 item 5).
func TestBashResultSaysTheLogWasNotKept(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full to stand for a full disk")
	}
	e := newEnv(t, tools.Config{Process: proc.Config{LogPath: "/dev/full"}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "seq 1 2000000"}`, &out)
	if want := "the output log stopped at byte 0 because writing it failed (no space left on device)"; !strings.Contains(out.Note, want) {
		t.Errorf("bash note %q, want it to say %q", out.Note, want)
	}
}

// A task_wait shorter than the floor is lengthened to it (each poll that
// times out costs the model a call), but still ends when the task does.
func TestAShortWaitIsLengthened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), task.Options{})
		defer tb.Close(context.Background())
		set := tools.New(tools.Config{Process: proc.Config{Dir: t.TempDir()}})
		var wait *tools.Tool
		for _, tool := range set.Tools() {
			if tool.Name == "task_wait" {
				wait = tool
			}
		}
		v := tb.View("")
		id, err := v.Spawn(task.Spec{Kind: "agent", Label: "slow"}, func(ctx context.Context, _ *task.Handle) (string, error) {
			select {
			case <-time.After(8 * time.Second):
				return "done", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := wait.Call(t.Context(), v, json.RawMessage(`{"task_ids": ["`+id+`"], "timeout_seconds": 0.5}`))
		if err != nil || !strings.Contains(res.Text, "raised to 5s") || !strings.Contains(res.Text, `"timed_out":true`) {
			t.Errorf("task_wait = %s, %v; want a timeout after the 5s floor, saying so", res.Text, err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("waited %v, want the floor, 5s", waited)
		}
		res, err = wait.Call(t.Context(), v, json.RawMessage(`{"task_ids": ["`+id+`"], "timeout_seconds": 1}`))
		if waited := time.Since(start); err != nil || waited != 8*time.Second || !strings.Contains(res.Text, `"done"`) {
			t.Errorf("second task_wait = %s, %v after %v; want the result when the task ended, at 8s", res.Text, err, waited)
		}
	})
}

// TestBashRefusesWhatNoCommandLineHolds: a command the kernel would not
// pass the shell (one argument of 32 pages or more; a NUL byte) is
// refused with what to do instead; it failed to start with the kernel's
// "argument list too long" or "invalid argument" (an outsider's finding).
// The longest it takes runs.
func TestBashRefusesWhatNoCommandLineHolds(t *testing.T) {
	e := newEnv(t, tools.Config{})
	page := os.Getpagesize()
	longest := ": " + strings.Repeat("a", 32*page-3) // 32 pages with its NUL
	var out tools.BashOutput
	ok(t, e, e.top, "bash", fmt.Sprintf(`{"command": %q}`, longest), &out)
	if out.ExitCode == nil || *out.ExitCode != 0 {
		t.Errorf("bash of %d bytes = %+v, want it run", len(longest), out)
	}
	for cmd, want := range map[string]string{
		longest + "a": fmt.Sprintf("command is %d bytes, and the system passes the shell at most %d in one argument; write a long script to a file", 32*page, 32*page-1),
		"echo a\x00b": "command contains a NUL byte",
	} {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		if got := e.refused(t, e.top, "bash", string(args)); !strings.Contains(got, want) {
			t.Errorf("bash of %d bytes = %.200q, want %q", len(cmd), got, want)
		}
	}
}
