package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func TestFitColumns(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven ch…"},
		{"漢字漢字漢字", 7, "漢字漢…"}, // six columns and the mark
		{"a\x1b[31mb\tc", 10, "a[31mbc"},
		{"anything", 0, ""},
	} {
		got := fitColumns(tc.in, tc.n)
		if got != tc.want || columns(got) > tc.n {
			t.Errorf("fitColumns(%q, %d) = %q (%d columns), want %q", tc.in, tc.n, got, columns(got), tc.want)
		}
	}
}

// screen replays what a program wrote to a terminal of the given width
// (enough of a VT100 for the printer: printable runes with wrapping, CR,
// LF, and CSI sequences, of which erase-line is obeyed) and returns the
// rows.
func screen(out string, width int) []string {
	rows := [][]rune{{}}
	r, c := 0, 0
	put := func(ch rune) {
		w := runeColumns(ch)
		if c+w > width { // the terminal wraps before printing
			r, c = r+1, 0
		}
		for len(rows) <= r {
			rows = append(rows, []rune{})
		}
		for len(rows[r]) < c+w {
			rows[r] = append(rows[r], ' ')
		}
		rows[r][c] = ch
		c += w
	}
	in := []rune(out)
	for i := 0; i < len(in); i++ {
		switch ch := in[i]; {
		case ch == '\r':
			c = 0
		case ch == '\n':
			r++
			for len(rows) <= r {
				rows = append(rows, []rune{})
			}
		case ch == 0x1b && i+1 < len(in) && in[i+1] == '[':
			j := i + 2
			for j < len(in) && (in[j] < 0x40 || in[j] > 0x7e) {
				j++
			}
			if j < len(in) && in[j] == 'K' {
				switch string(in[i+2 : j]) {
				case "2":
					rows[r] = []rune{}
				case "", "0":
					if c < len(rows[r]) {
						rows[r] = rows[r][:c]
					}
				}
			}
			i = j
		case ch < 0x20 || ch == 0x7f:
		default:
			put(ch)
		}
	}
	lines := make([]string, len(rows))
	for i, row := range rows {
		lines[i] = strings.TrimRight(string(row), " ")
	}
	return lines
}

func TestScreenModelWraps(t *testing.T) {
	got := screen("abcdef\r\n12\x1b[2K\rxy", 4)
	want := []string{"abcd", "ef", "xy"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("screen = %q, want %q", got, want)
	}
}

// TestStatusLineNeverWraps: with three background tasks in a terminal of
// 40 and of 80 columns, however many times the status line is redrawn,
// the screen shows exactly one, cut to fit.
func TestStatusLineNeverWraps(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [
			{"name": "bash", "input": {"command": "sleep 60 # the first long-running background task", "run_in_background": true}},
			{"name": "bash", "input": {"command": "sleep 60 # the second long-running background task", "run_in_background": true}},
			{"name": "bash", "input": {"command": "sleep 60 # the third, with a label of its own: 漢字", "run_in_background": true}}
		]},
		{"text": "Three tasks are running."}
	]}`
	for _, cols := range []uint16{40, 80} {
		t.Run(fmt.Sprintf("%d columns", cols), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "script.json")
			os.WriteFile(path, []byte(script), 0o644)
			cmd, mark := offstage(t, nil, "run", "--script", path)
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: 30})
			if err != nil {
				t.Fatal(err)
			}
			tm := &term{t: t, f: f}
			readDone := make(chan struct{})
			go func() {
				defer close(readDone)
				tm.read()
			}()
			tm.expect("type a message")
			tm.send("go\r")
			tm.expect("Three tasks are running.")
			// Six redraws, at one a second: past the point where a wrapped
			// line would have scrolled copies of itself up the screen.
			deadline := time.Now().Add(30 * time.Second)
			var all string
			for {
				tm.mu.Lock()
				all = tm.out.String()
				tm.mu.Unlock()
				// Taken when the last redraw has reached the terminal: a
				// read can end inside one, after its erase and before its
				// text, and the row would be empty for that moment.
				_, last, _ := cutLast(all, "\x1b[2K")
				if strings.Count(all[strings.Index(all, "Three tasks are running."):], "⋯") >= 6 && strings.Contains(last, "⋯") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the status line was not redrawn six times:\n%q", all)
				}
				time.Sleep(50 * time.Millisecond)
			}
			shown := screen(all, int(cols))
			// A status row, or a piece of one that wrapped.
			part := regexp.MustCompile(`⋯|running \d+s|\(heard \d+s ago\)`)
			var status []string
			for _, row := range shown {
				if part.MatchString(row) {
					status = append(status, row)
				}
			}
			if len(status) != 1 || columns(status[0]) >= int(cols) {
				t.Errorf("at %d columns the screen shows %d status rows %q, want one narrower than the screen; screen:\n%s", cols, len(status), status, strings.Join(shown, "\n"))
			}
			t.Logf("the screen at %d columns:\n%s", cols, strings.Join(shown, "\n"))
			tm.send("/quit\r")
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("offstage did not quit")
			}
			// The reader ends (EIO) once nothing holds the terminal any more.
			select {
			case <-readDone:
			case <-time.After(20 * time.Second):
				t.Error("something still holds the terminal after offstage quit")
			}
			f.Close()
			noSurvivors(t, mark)
		})
	}
}

// cutLast is strings.Cut at the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.1"}}, "v0.3.1 (go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}, "devel 0123456789ab+dirty (go1.26.8)"},
		{debug.BuildInfo{GoVersion: "go1.26.8"}, "devel (go1.26.8)"},
	} {
		if got := versionOf(&tc.info); got != tc.want {
			t.Errorf("versionOf(%+v) = %q, want %q", tc.info.Main, got, tc.want)
		}
	}
}

// TestStatusLineStaysWhileTasksRun: on a terminal, a task event that
// prints nothing leaves the status line on screen, and one that prints a
// line has it redrawn below.
func TestStatusLineStaysWhileTasksRun(t *testing.T) {
	tb := task.New(t.Context(), task.Options{})
	defer tb.Close(t.Context())
	id, err := tb.View("").Spawn(task.Spec{Kind: "shell", Label: "sleep 60"}, func(ctx context.Context, h *task.Handle) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	p := &printer{w: &out, table: tb, width: func() int { return 60 }, live: true}
	last := func() string {
		rows := screen(out.String(), 60)
		for i := len(rows) - 1; i >= 0; i-- {
			if rows[i] != "" {
				return rows[i]
			}
		}
		return ""
	}
	p.drawStatus()
	if !strings.HasPrefix(last(), "⋯ "+id) {
		t.Fatalf("no status line: %q", out.String())
	}
	p.Event(agent.Event{Type: agent.TaskEvent, Task: &task.Event{Type: task.EventProgress, ID: id, State: task.Running, Text: "running (pid 1)"}})
	if !strings.HasPrefix(last(), "⋯ "+id) {
		t.Errorf("a silent task event took the status line away: %q", out.String())
	}
	p.Event(agent.Event{Type: agent.TaskEvent, Task: &task.Event{Type: task.EventNotice, ID: id, State: task.Running, Text: "waiting for input"}})
	rows := screen(out.String(), 60)
	if !strings.HasPrefix(last(), "⋯ "+id) || !strings.Contains(strings.Join(rows, "\n"), "notice: waiting for input") {
		t.Errorf("after a printed event, screen:\n%s", strings.Join(rows, "\n"))
	}
}

// TestTraceRendersToolResultsForAPerson: the trace shows a tool's JSON
// result as its task, status, exit code, first output lines and note, not
// as one line of JSON with \n escapes; terminal escapes in the output are
// dropped.
func TestTraceRendersToolResultsForAPerson(t *testing.T) {
	var out strings.Builder
	p := &printer{w: &out}
	p.Event(agent.Event{Type: agent.ToolResultEvent, Tool: "bash", Text: `{"task_id":"shell:3","status":"completed","exit_code":2,"output":"one\ntwo\n\u001b[31mthree\nfour\nfive\nsix\nseven\n","output_bytes":35,"note":"It failed."}`})
	want := "  ← bash: shell:3 completed, exit code 2\n      │ one\n      │ two\n      │ [31mthree\n      │ four\n      │ five\n      │ … 2 lines not shown\n      It failed.\n"
	if out.String() != want {
		t.Errorf("trace:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	p.Event(agent.Event{Type: agent.ToolResultEvent, Tool: "task_list", Text: `[{"task_id":"shell:1"}]`})
	if out.String() != "  ← task_list: [{\"task_id\":\"shell:1\"}]\n" {
		t.Errorf("another shape: %q", out.String())
	}
}

// TestHeartbeatsOnlyWhenTheyChange: a sub-agent's heartbeat that repeats
// the last one is not printed again.
func TestHeartbeatsOnlyWhenTheyChange(t *testing.T) {
	var out strings.Builder
	p := &printer{w: &out}
	for _, text := range []string{"running tool bash", "running tool bash", "running tool bash", "running tool task_list"} {
		p.Event(agent.Event{Type: agent.TaskEvent, Task: &task.Event{Type: task.EventProgress, ID: "agent:1", Kind: "agent", State: task.Running, Iteration: 2, Text: text}})
	}
	if n := strings.Count(out.String(), "agent:1 step 2"); n != 2 {
		t.Errorf("%d heartbeat lines, want 2:\n%s", n, out.String())
	}
}

// TestTaskEventsPrintInTheOrderTheyHappened (issue 23 item 4): the
// session's follower delivers task events on a goroutine of its own, and
// on a loaded machine they came after the tool result that had already
// reported them ("· shell:1 started" after "← bash: shell:1 running", a
// waiting_for_input notice after the task_input that answered it).
func TestTaskEventsPrintInTheOrderTheyHappened(t *testing.T) {
	tb := task.New(t.Context(), task.Options{})
	defer tb.Close(t.Context())
	asked := make(chan struct{})
	id, err := tb.View("").Spawn(task.Spec{Kind: "shell", Label: "migrate"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.Notify("waiting_for_input", "Apply? [y/N]")
		close(asked)
		<-ctx.Done()
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	<-asked
	var out strings.Builder
	p := &printer{w: &out, table: tb}
	p.Event(agent.Event{Type: agent.ToolResultEvent, Tool: "task_input", Text: `{"task_id":"` + id + `","status":"running"}`})
	late, _ := tb.Events().After(0) // what the follower delivers now, behind
	for i := range late {
		p.Event(agent.Event{Type: agent.TaskEvent, Task: &late[i]})
	}
	want := "  · " + id + " started: migrate\n" +
		"  · " + id + " notice: waiting_for_input: Apply? [y/N]\n" +
		"  ← task_input: " + id + " running\n"
	if got := out.String(); got != want {
		t.Errorf("trace:\n%s\nwant:\n%s", got, want)
	}
}

// TestModelTextReachesNoTerminalAsEscapes (an attacker's trial): a model
// steered by what it read must not write the user's clipboard (OSC 52),
// retitle or clear the terminal through its streamed text or thinking.
func TestModelTextReachesNoTerminalAsEscapes(t *testing.T) {
	var b strings.Builder
	p := &printer{w: &b}
	p.Event(agent.Event{Type: agent.ThinkingDelta, Text: "think \x1b]0;T\x07"})
	p.Event(agent.Event{Type: agent.TextDelta, Text: "says \x1b]52;c;SGVsbG8=\x07 and \x1b[2J\u009b31m end\n\tok"})
	if strings.ContainsAny(b.String(), "\x1b\x07\u009b") || !strings.Contains(b.String(), "end\n\tok") {
		t.Errorf("printed %q", b.String())
	}
}

// TestStatusLineShowsMemoryWhenItFits (issue 22): a running shell's
// memory is on the status line when the line fits with it, and left out
// when it does not.
func TestStatusLineShowsMemoryWhenItFits(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("memory is measured from /proc")
	}
	tb := task.New(t.Context(), task.Options{})
	defer tb.Close(t.Context())
	id, sh, err := tools.SpawnShell(tb.View(""), proc.Config{Command: "sleep 60"}, tools.ShellOptions{})
	if err != nil || sh == nil {
		t.Fatalf("SpawnShell: %v", err)
	}
	for _, tc := range []struct {
		width  int
		memory bool
	}{{120, true}, {40, false}} {
		var out strings.Builder
		p := &printer{w: &out, table: tb, width: func() int { return tc.width }, live: true}
		p.drawStatus()
		line := out.String()
		if !strings.Contains(line, id) || strings.Contains(line, "iB") != tc.memory {
			t.Errorf("width %d: status line %q; memory shown: want %v", tc.width, line, tc.memory)
		}
	}
}

// The status line says what each running sub-agent and the session have
// spent, with its cost where the user gave a price.
func TestStatusLineShowsTokens(t *testing.T) {
	tb := task.New(t.Context(), task.Options{})
	defer tb.Close(t.Context())
	release := make(chan struct{})
	defer close(release)
	added := make(chan struct{})
	tb.View("").Spawn(task.Spec{Kind: "agent", Label: "review"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.AddUsage(task.Usage{InputTokens: 12000, OutputTokens: 500, ModelCalls: 3})
		close(added)
		<-release
		return "", nil
	})
	<-added
	session := agent.Usage{Total: task.Usage{InputTokens: 1_500_000, OutputTokens: 20_000, ModelCalls: 40}}
	var out strings.Builder
	p := &printer{w: &out, table: tb, width: func() int { return 200 }, live: true,
		usage: func() agent.Usage { return session }, pricing: pricing{model: "openai m", prices: prices{"m": {Input: 1, Output: 10}}}}
	p.drawStatus()
	if line := out.String(); !strings.Contains(line, "agent:1 \"review\" running") || !strings.Contains(line, " 12.5k tokens") || !strings.HasSuffix(line, " · session 1.5M tokens (1.70)") {
		t.Errorf("status line %q, want the sub-agent's 12.5k tokens and the session's 1.5M, cost 1.70", line)
	}
}
