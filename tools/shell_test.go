package tools_test

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// table returns a task table closed (and checked) at the end of the test.
func table(t *testing.T) (*task.Table, *task.View) {
	t.Helper()
	tb := task.New(t.Context(), task.Options{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tb.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return tb, tb.View("")
}

func spawnShell(t *testing.T, v *task.View, cfg proc.Config, opts tools.ShellOptions) string {
	t.Helper()
	id, _ := startShell(t, v, cfg, opts)
	return id
}

// startShell spawns a shell task and returns its id and its process,
// which SpawnShell hands over at once when the task runs.
func startShell(t *testing.T, v *task.View, cfg proc.Config, opts tools.ShellOptions) (string, *proc.Process) {
	t.Helper()
	id, p, err := tools.SpawnShell(v, cfg, opts)
	if err != nil {
		t.Fatalf("SpawnShell(%q) = %v", cfg.Command, err)
	}
	if p == nil {
		t.Fatalf("SpawnShell(%q) returned no process for a task that runs at once", cfg.Command)
	}
	return id, p
}

func waitResult(t *testing.T, v *task.View, id string) task.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		r, err := v.Wait(ctx, []string{id}, task.All)
		if err == nil && len(r.Done) == 0 && len(r.Notices) > 0 {
			continue // a notice ended the wait, not the task
		}
		if err != nil || len(r.Done) != 1 {
			t.Fatalf("Wait(%s) = %+v, %v", id, r, err)
		}
		return r.Done[0]
	}
}

// processOf returns the process behind a shell task.
func processOf(t *testing.T, v *task.View, id string) *proc.Process {
	t.Helper()
	p, ok := tools.Shell(v, id)
	if !ok {
		t.Fatalf("Shell(%s) = nil, false; want the process SpawnShell started", id)
	}
	return p
}

// groupMembers returns the live processes of group pgid.
func groupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	return proctest.Group(pgid)
}

// waitGroupSize polls /proc until group pgid has at least n live
// processes, and fails after timeout.
func waitGroupSize(t *testing.T, pgid, n int, timeout time.Duration) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		m := groupMembers(t, pgid)
		if len(m) >= n {
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("group %d has %d live processes after %v: %v", pgid, len(m), timeout, m)
		}
	}
}

// readUntil polls p's combined output until it contains want.
func readUntil(t *testing.T, p *proc.Process, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for next := int64(0); !strings.Contains(string(p.Read(proc.Combined, 0, 1<<20).Data), want); {
		total, err := p.WaitOutput(ctx, next)
		if err != nil {
			t.Fatalf("output never contained %q; got %q", want, p.Read(proc.Combined, 0, 1<<20).Data)
		}
		next = total
	}
}

func TestShellTaskCompletes(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "echo hello; echo world"}, tools.ShellOptions{})
	if !strings.HasPrefix(id, "shell:") {
		t.Errorf("id = %q, want shell:N", id)
	}
	r := waitResult(t, top, id)
	if r.State != task.Completed || r.Err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("result = %v %v exit %v", r.State, r.Err, r.ExitCode)
	}
	if r.Label != "echo hello; echo world" {
		t.Errorf("label = %q", r.Label)
	}
	if !strings.HasPrefix(r.Text, "exit status 0 after ") || !strings.HasSuffix(r.Text, ":\nhello\nworld\n") {
		t.Errorf("result text = %q", r.Text)
	}
}

func TestShellTaskFailures(t *testing.T) {
	_, top := table(t)
	for _, tc := range []struct {
		cmd, prefix string
	}{
		{"echo oops; exit 3", "exit status 3 after"},
		{"kill -KILL $$", "killed by SIGKILL after"}, // a signal we did not send
	} {
		r := waitResult(t, top, spawnShell(t, top, proc.Config{Command: tc.cmd}, tools.ShellOptions{}))
		var ee *proc.ExitError
		if r.State != task.Failed || !errors.As(r.Err, &ee) || ee.Stopped {
			t.Errorf("%q: %v %v, want failed with an ExitError not stopped by us", tc.cmd, r.State, r.Err)
		}
		if !strings.HasPrefix(r.Text, tc.prefix) {
			t.Errorf("%q: text %q, want prefix %q", tc.cmd, r.Text, tc.prefix)
		}
	}
}

func TestCancellingAShellTaskStopsItsGroup(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "sleep 1000 & sleep 1000 & wait"}, tools.ShellOptions{})
	p := processOf(t, top, id)
	waitGroupSize(t, p.PID(), 3, 5*time.Second)
	if already, err := top.Cancel(id); err != nil || already {
		t.Fatalf("Cancel() = %v, %v", already, err)
	}
	r := waitResult(t, top, id)
	if r.State != task.Canceled || !strings.HasPrefix(r.Text, "stopped (killed by SIGTERM)") {
		t.Errorf("result = %v %q, want canceled and stopped", r.State, r.Text)
	}
	if m := groupMembers(t, p.PID()); len(m) != 0 {
		t.Errorf("group %d survived the cancel: %v", p.PID(), m)
	}
}

func TestShellTaskTimeoutStopsTheGroup(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "sleep 1000 & wait"}, tools.ShellOptions{Timeout: 200 * time.Millisecond})
	p := processOf(t, top, id)
	r := waitResult(t, top, id)
	if r.State != task.TimedOut || !errors.Is(r.Err, task.ErrTimedOut) {
		t.Errorf("result = %v %v, want timed_out", r.State, r.Err)
	}
	if m := groupMembers(t, p.PID()); len(m) != 0 {
		t.Errorf("group %d survived the timeout: %v", p.PID(), m)
	}
}

func TestShellTaskPeekAndBoundedResult(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "seq 1 100000; echo \x1b[32mdone\x1b[0m; sleep 1000"},
		tools.ShellOptions{ResultLines: 5, ResultBytes: 100})
	p := processOf(t, top, id)
	readUntil(t, p, "done")
	peek, err := top.Peek(id, 3)
	if err != nil {
		t.Fatal(err)
	}
	if peek.Output != "99999\n100000\ndone\n" || peek.State != task.Running {
		t.Errorf("Peek = %v %q, want running and the cleaned last 3 lines", peek.State, peek.Output)
	}
	top.Cancel(id)
	r := waitResult(t, top, id)
	if len(r.Text) > 200 || !strings.HasSuffix(r.Text, "done\n") || !strings.Contains(r.Text, "last ") {
		t.Errorf("result text (%d bytes) = %q, want a short, marked tail", len(r.Text), r.Text)
	}
}

func TestClosingTheTableReapsEveryShell(t *testing.T) {
	tb := task.New(t.Context(), task.Options{})
	top := tb.View("")
	var pids []int
	for range 3 {
		id := spawnShell(t, top, proc.Config{Command: "sleep 1000 & sleep 1000 & wait", Grace: time.Second}, tools.ShellOptions{})
		pids = append(pids, processOf(t, top, id).PID())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if m := groupMembers(t, pid); len(m) != 0 {
			t.Errorf("group %d survived Close: %v", pid, m)
		}
	}
	for _, r := range top.Drain() {
		if r.State != task.Canceled {
			t.Errorf("%s = %v, want canceled", r.ID, r.State)
		}
	}
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"ls -la":                "ls -la",
		"  make \n  test\t-v ":  "make test -v",
		strings.Repeat("日", 70): strings.Repeat("日", 59) + "…",
	} {
		if got := tools.Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAShellTellsItsOwnerItWaitsForInput(t *testing.T) {
	_, v := table(t)
	cfg := proc.Config{Command: `printf 'Overwrite? [y/N] '; read a; echo "answer $a"`, Stdin: true, PromptAfter: 200 * time.Millisecond}
	id := spawnShell(t, v, cfg, tools.ShellOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r, err := v.Wait(ctx, []string{id}, task.All)
	if err != nil || len(r.Done) != 0 || len(r.Notices) != 1 {
		t.Fatalf("Wait() = %+v, %v, want it ended by the notice", r, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Wait took %v, want about the prompt's 200ms", d)
	}
	n := r.Notices[0]
	if n.Kind != tools.NoticeWaitingForInput || n.Text != id+` seems to wait for input: "Overwrite? [y/N]".` {
		t.Errorf("notice = %+v", n)
	}
	processOf(t, v, id).Input(t.Context(), []byte("y\n"))
	if res := waitResult(t, v, id); !strings.Contains(res.Text, "answer y") {
		t.Errorf("result %q", res.Text)
	}
	if got := v.Notices(); got != nil {
		t.Errorf("Notices() = %+v, want nil: the wait took the one notice", got)
	}
}

func TestAClosedInputPromptSaysHowToRerun(t *testing.T) {
	_, v := table(t)
	// Without stdin a read fails at once; a program that asks its terminal
	// or waits anyway stalls. sleep stands in for it.
	cfg := proc.Config{Command: `printf 'Password: '; sleep 30`, PromptAfter: 200 * time.Millisecond}
	id := spawnShell(t, v, cfg, tools.ShellOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := v.Wait(ctx, []string{id}, task.All)
	if err != nil || len(r.Notices) != 1 || !strings.Contains(r.Notices[0].Text, "Its input is closed") {
		t.Fatalf("Wait() = %+v, %v, want a notice that says the input is closed", r, err)
	}
	v.Cancel(id)
}

func TestAWatchPostsMatchesWithinItsCaps(t *testing.T) {
	_, v := table(t)
	// 100,000 lines with an ERROR every 10,000th.
	cfg := proc.Config{Command: `awk 'BEGIN { for (i = 1; i <= 100000; i++) { print "line " i; if (i % 10000 == 0) print "ERROR at " i } }'`}
	// The batch outlasts the command, so its end posts the one notice
	// (a 5 s batch split it in two on a busy machine); the log keeps the
	// watch from skipping.
	id := spawnShell(t, v, cfg, tools.ShellOptions{NotifyOn: regexp.MustCompile(`ERROR`), WatchLines: 4, WatchBatch: time.Hour, LogDir: t.TempDir()})
	done, _ := v.Done(id)
	<-done
	if res := v.Drain(); len(res) != 1 || res[0].State != task.Completed {
		t.Fatalf("results %+v", res)
	}
	got := v.Notices()
	if len(got) != 1 {
		t.Fatalf("Notices() = %+v, want one batch", got)
	}
	want := id + " printed 10 lines matching \"ERROR\":\nERROR at 10000\nERROR at 20000\nERROR at 30000\nERROR at 40000\n…and 6 more (at most 4 lines per notice)."
	if got[0].Kind != tools.NoticeWatch || got[0].Text != want {
		t.Errorf("notice = %q, want %q", got[0].Text, want)
	}
}

func TestAWatchIsRateLimitedAndEnds(t *testing.T) {
	_, v := table(t)
	cfg := proc.Config{Command: `i=0; while [ $i -lt 30 ]; do echo "ERROR $i"; i=$((i+1)); sleep 0.05; done`}
	id := spawnShell(t, v, cfg, tools.ShellOptions{NotifyOn: regexp.MustCompile(`^ERROR`),
		WatchBatch: 10 * time.Millisecond, WatchEvery: 300 * time.Millisecond, WatchNotices: 3})
	var times []time.Time
	var notices []task.Notice
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		r, err := v.Wait(ctx, []string{id}, task.All)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range r.Notices {
			notices = append(notices, n)
			times = append(times, n.Time) // when the watch posted it: a busy receiver sees them bunched
		}
		if len(r.Done) > 0 {
			break
		}
	}
	if len(notices) != 3 {
		t.Fatalf("%d notices, want 3 (the cap): %+v", len(notices), notices)
	}
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d < 250*time.Millisecond {
			t.Errorf("notice %d came %v after the one before, want about 300ms", i, d)
		}
	}
	if !strings.Contains(notices[2].Text, "This was the watch's last notice (at most 3 per task)") {
		t.Errorf("last notice %q does not say the watch ended", notices[2].Text)
	}
	total := 0
	for _, n := range notices {
		total += strings.Count(n.Text, "\nERROR ")
	}
	if total >= 30 {
		t.Errorf("the watch posted %d lines after its cap", total)
	}
}

// TestAWatchSaysWhatItCouldNotLookAt pins issue 20: a watch that skipped
// output said so only on a notice carrying matched lines, so a flood with
// no match left the model trusting a blind watch. 64 MiB of two-byte
// lines through a 4 KiB ring outrun the watch, which cleans and matches
// each line; the notices must say how many bytes it missed, match or not.
func TestAWatchSaysWhatItCouldNotLookAt(t *testing.T) {
	const flood = `yes | head -c 67108864`
	blindRe := regexp.MustCompile(`could not look at (a further )?(\d+) bytes of its output`)
	for _, tc := range []struct {
		name, cmd     string
		batch, every  time.Duration
		match         string // a line every notice but the last carries
		minN, maxN    int
		furtherInLast bool
	}{
		// Batched past the flood's end: one notice at the end, with the total.
		{name: "no match", cmd: flood, batch: time.Minute, minN: 1, maxN: 1},
		{name: "a match", cmd: "echo ERROR first; " + flood, batch: time.Minute, match: "ERROR first", minN: 1, maxN: 1},
		// Told at once, then only the rest at the end: never a notice per skip.
		{name: "told once", cmd: flood, batch: time.Millisecond, every: time.Millisecond, minN: 1, maxN: 2, furtherInLast: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v := table(t)
			cfg := proc.Config{Command: tc.cmd, HeadBytes: 4 << 10, TailBytes: 4 << 10}
			id := spawnShell(t, v, cfg, tools.ShellOptions{NotifyOn: regexp.MustCompile(`ERROR`), WatchBatch: tc.batch, WatchEvery: tc.every})
			var notices []task.Notice
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			for {
				r, err := v.Wait(ctx, []string{id}, task.All)
				if err != nil {
					t.Fatal(err)
				}
				notices = append(notices, r.Notices...)
				if len(r.Done) > 0 {
					break
				}
			}
			if len(notices) < tc.minN || len(notices) > tc.maxN {
				t.Fatalf("%d notices, want %d to %d: %+v", len(notices), tc.minN, tc.maxN, notices)
			}
			var told int64
			for i, n := range notices {
				m := blindRe.FindStringSubmatch(n.Text)
				if n.Kind != tools.NoticeWatch || m == nil {
					t.Fatalf("notice %d = %q, want one that says how many bytes the watch could not look at", i, n.Text)
				}
				if further := m[1] != ""; further != (i > 0) {
					t.Errorf("notice %d = %q: says \"a further\" %v, want %v", i, n.Text, further, i > 0)
				}
				k, _ := strconv.ParseInt(m[2], 10, 64)
				told += k
			}
			if told <= 0 || told > 64<<20-4<<10 {
				t.Errorf("the notices say the watch missed %d bytes, want some, and at most all but the head", told)
			}
			if tc.match != "" && !strings.Contains(notices[0].Text, "printed 1 line matching \"ERROR\":\n"+tc.match+"\n") {
				t.Errorf("notice %q does not carry the matched line", notices[0].Text)
			}
		})
	}
}

// TestAShellRunsWhenItsLogCannotBeOpened: a shell whose log cannot be
// opened (here its directory is missing; a full or read-only state
// directory does the same) runs without one and says so once. Before, the
// log's failure failed the command: "proc: open log: …".
func TestAShellRunsWhenItsLogCannotBeOpened(t *testing.T) {
	_, v := table(t)
	var told []error
	cfg := proc.Config{Command: "echo hello", OnLogError: func(err error) { told = append(told, err) }}
	id := spawnShell(t, v, cfg, tools.ShellOptions{LogDir: filepath.Join(t.TempDir(), "missing")})
	r := waitResult(t, v, id)
	if r.Err != nil || !strings.Contains(r.Text, "hello") {
		t.Errorf("the shell = %q, %v; want it to run", r.Text, r.Err)
	}
	var le *proc.LogError
	if len(told) != 1 || !errors.As(told[0], &le) || !strings.Contains(told[0].Error(), "cannot be opened: no such file or directory") {
		t.Errorf("OnLogError told %v, want once that the log cannot be opened", told)
	}
}

func TestFilterLines(t *testing.T) {
	text := "ok 1\nFAIL 2\nok 3\nFAIL 4"
	got := tools.FilterLines(text, regexp.MustCompile("^FAIL"))
	if diff := cmp.Diff("FAIL 2\nFAIL 4", got); diff != "" {
		t.Errorf("FilterLines (-want +got):\n%s", diff)
	}
	if got := tools.FilterLines(text, nil); got != text {
		t.Errorf("FilterLines(nil) = %q", got)
	}
}

// TestStoppingAShellsProcessCancelsItsTask pins what an embedder met:
// Process.Stop ended the shell task failed, though a stop we sent ends
// it canceled, as proc's documentation says.
func TestStoppingAShellsProcessCancelsItsTask(t *testing.T) {
	_, top := table(t)
	id, p := startShell(t, top, proc.Config{Command: "sleep 1000"}, tools.ShellOptions{})
	p.Stop(time.Second)
	r := waitResult(t, top, id)
	if r.State != task.Canceled || !strings.HasPrefix(r.Text, "stopped (killed by SIGTERM)") {
		t.Errorf("result = %v %v %q, want canceled and stopped", r.State, r.Err, r.Text)
	}
}

// TestSpawnShellHandsOverItsProcess pins what an embedder met: SpawnShell
// returned only the id, and View.Output was nil right after it. Now the
// process comes back with the id, and Shell finds it; a shell that waits
// queued has none until it runs.
func TestSpawnShellHandsOverItsProcess(t *testing.T) {
	tb := task.New(t.Context(), task.Options{MaxRunning: 1})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tb.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	top := tb.View("")
	id, p := startShell(t, top, proc.Config{Command: "echo hello; sleep 1000"}, tools.ShellOptions{})
	if got, ok := tools.Shell(top, id); !ok || got != p {
		t.Errorf("Shell(%s) = %p, %v; want the process SpawnShell returned (%p)", id, got, ok, p)
	}
	readUntil(t, p, "hello")
	queued, q, err := tools.SpawnShell(top, proc.Config{Command: "sleep 1000"}, tools.ShellOptions{})
	if err != nil || q != nil {
		t.Fatalf("SpawnShell behind a full table = %s, %p, %v; want a queued task and no process", queued, q, err)
	}
	if got, ok := tools.Shell(top, queued); ok || got != nil {
		t.Errorf("Shell(%s) while queued = %p, %v; want nil, false", queued, got, ok)
	}
	if got, ok := tools.Shell(tb.View("agent:1"), id); ok {
		t.Errorf("Shell through another owner's view = %p, want nothing", got)
	}
}
