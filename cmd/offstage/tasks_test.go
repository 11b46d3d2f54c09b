package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// fixtureJournal writes a journal with two sessions at fixed times.
func fixtureJournal(t *testing.T) (dir string, now time.Time) {
	t.Helper()
	dir = t.TempDir()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	j := journal.New(store, journal.Options{})
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	j.Add(&journal.Host{ID: "h1", Hostname: "build-box", PID: 1, Start: 1, Started: base})
	at := func(d time.Duration) time.Time { return base.Add(d) }
	change := func(s string, typ task.EventType, id, label string, state task.State, when time.Duration, extra func(*task.Change)) {
		c := &task.Change{Event: task.Event{Type: typ, ID: id, State: state, Time: at(when), Kind: strings.Split(id, ":")[0]}, Label: label}
		if extra != nil {
			extra(c)
		}
		j.Add(&journal.TaskChange{Session: s, Change: *c})
	}
	exit := func(code int, result, err string) func(*task.Change) {
		return func(c *task.Change) { c.ExitCode, c.Result, c.Err = &code, result, err }
	}
	j.StartSession(journal.Session{ID: "20261122-090000-aaaaaa", HostID: "h1", Surface: "run", Cwd: "/src", Model: "openai gpt-4.1", Started: at(0)}, 0).End()
	change("20261122-090000-aaaaaa", task.EventSpawned, "shell:1", "make", task.Running, 0, nil)
	change("20261122-090000-aaaaaa", task.EventStarted, "shell:1", "make", task.Running, 0, nil)
	j.Add(journal.TaskUsage{Session: "20261122-090000-aaaaaa", ID: "shell:1", CPU: 83400 * time.Millisecond, MemoryPeak: 1536 << 20})
	change("20261122-090000-aaaaaa", task.EventFinished, "shell:1", "make", task.Completed, 95*time.Second, exit(0, "exit status 0 after 1m35s", ""))
	change("20261122-090000-aaaaaa", task.EventDelivered, "shell:1", "make", task.Completed, 96*time.Second, nil)
	change("20261122-090000-aaaaaa", task.EventSpawned, "agent:2", "reviewer: look at the diff", task.Running, time.Minute, nil)
	change("20261122-090000-aaaaaa", task.EventStarted, "agent:2", "reviewer: look at the diff", task.Running, time.Minute, nil)
	change("20261122-090000-aaaaaa", task.EventFinished, "agent:2", "reviewer: look at the diff", task.Failed, 2*time.Minute, func(c *task.Change) {
		c.Err = "model unavailable"
		c.Usage = task.Usage{InputTokens: 48200, OutputTokens: 1300, CachedInputTokens: 40000, ModelCalls: 7}
	})
	j.StartSession(journal.Session{ID: "20261122-110000-bbbbbb", HostID: "h1", Surface: "mcp", Cwd: "/src", Started: at(2 * time.Hour)}, 0)
	change("20261122-110000-bbbbbb", task.EventSpawned, "shell:1", "npm run dev   # the dev server, which runs until it is stopped", task.Running, 2*time.Hour, nil)
	change("20261122-110000-bbbbbb", task.EventStarted, "shell:1", "npm run dev   # the dev server, which runs until it is stopped", task.Running, 2*time.Hour, nil)
	j.Add(journal.TaskPorts{Session: "20261122-110000-bbbbbb", ID: "shell:1", Ports: []int{20417, 20418}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir, at(2*time.Hour + 5*time.Minute)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, d)
	}
}

func TestTasksGolden(t *testing.T) {
	dir, now := fixtureJournal(t)
	timeNow = func() time.Time { return now }
	defer func() { timeNow = time.Now }()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tasks, _ := store.Tasks(t.Context(), journal.TaskFilter{})
	var plain, colour bytes.Buffer
	writeTasks(&plain, tasks, now, false, false)
	writeTasks(&colour, tasks, now, true, false)
	var fleet bytes.Buffer
	writeTasks(&fleet, tasks, now, false, true)
	golden(t, "tasks-fleet.txt", fleet.String())
	golden(t, "tasks.txt", plain.String())
	golden(t, "tasks-colour.txt", colour.String())

	var out, errOut bytes.Buffer
	if err := tasksCommand(t.Context(), []string{"--state-dir", dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	golden(t, "tasks.jsonl", out.String())
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l taskLine
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.TaskID == "" {
			t.Errorf("line %q: %v", line, err)
		}
	}

	out.Reset()
	if err := tasksCommand(t.Context(), []string{"--state-dir", dir, "--state", "failed", "--since", "3h"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 1 || !strings.Contains(out.String(), `"task_id":"agent:2"`) {
		t.Errorf("--state failed --since 3h = %s", out.String())
	}
	out.Reset()
	tasksCommand(t.Context(), []string{"--state-dir", dir, "--session", "20261122-11"}, &out, &errOut)
	if got := strings.Count(out.String(), "\n"); got != 1 {
		t.Errorf("--session prefix = %s", out.String())
	}
	for args, want := range map[string]string{
		"--state sleeping":  `--state "sleeping" is not a state`,
		"--state /tmp/x":    `the journal's directory is --state-dir`,
		"--since yesterday": `--since "yesterday" is neither a duration`,
		"--session nope":    `session "nope"`,
		"show shell:9":      "no task shell:9 in the journal",
		"show":              "offstage tasks show needs a task's id, such as shell:3", // issue 23 item 10
		"show a b":          `unexpected "show a b"`,
		"cancel":            "offstage tasks cancel needs a task's id",
		"follow":            "offstage tasks follow needs a task's id",
		"cancel shell:9":    "no task shell:9 in the journal",
		// An id that is not one says what one looks like, bounded; it was
		// echoed whole as a task not in the journal (an outsider's finding).
		"show 1e400":                             `"1e400" is not a task id: an id is a kind, a colon and a number from 1, as shell:3`,
		"cancel 20261122-09/0x1F":                `"0x1F" is not a task id`,
		"show shell:" + strings.Repeat("9", 500): `"shell:999999999999999999999999999999999…" is not a task id`,
		"stop shell:1":                           `unexpected "stop shell:1"`,
		// Control characters in an id show escaped, not dropped (they
		// were removed without a trace, so "a\x1bb" read as "ab").
		"show shell:\x1b[2J1":                   `"shell:\x1b[2J1" is not a task id`,
		"--session no\x1bpe":                    `session "no\x1bpe"`,
		"--lines -1":                            "--lines -1: give 0 or more",
		"follow shell:1 --lines -1":             "--lines -1: give 0 or more",
		"--limit -1":                            "--limit -1: give 0 (all) or more",
		"show shell:1 --reason x":               "--reason goes with offstage tasks cancel",
		"follow shell:1 --since 2h":             `with follow, --since is a byte of the output`,
		"follow 20261122-09/shell:1 --since -1": `with follow, --since is a byte`,
	} {
		err := tasksCommand(t.Context(), append([]string{"--state-dir", dir}, strings.Fields(args)...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(want, "task id") && strings.Contains(err.Error(), "cannot be used") {
			t.Errorf("tasks %s = %v, want %q (and the journal not blamed)", args, err, want)
		}
	}
	if err := tasksCommand(t.Context(), []string{"--state-dir", t.TempDir()}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "no journal at") {
		t.Errorf("no journal: %v", err)
	}
}

func TestTasksShow(t *testing.T) {
	dir, now := fixtureJournal(t)
	timeNow = func() time.Time { return now }
	defer func() { timeNow = time.Now }()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var out bytes.Buffer
	if err := showTask(t.Context(), store, "", "20261122-09/shell:1", false, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	golden(t, "tasks-show.txt", out.String())

	// Issue 37 item 15: a bare shell:1 picked the newest of the sessions
	// holding one without a word; a cancel must not pick at all.
	var errOut bytes.Buffer
	if err := showTask(t.Context(), store, "", "shell:1", false, io.Discard, &errOut); err != nil ||
		!strings.Contains(errOut.String(), "shell:1 is in 2 sessions; this is the newest, 20261122-110000-bbbbbb/shell:1") {
		t.Errorf("show shell:1: %v, stderr %q", err, errOut.String())
	}
	if err := cancelTask(t.Context(), store, "", "shell:1", "", io.Discard); err == nil || !strings.Contains(err.Error(), "shell:1 is in 2 sessions; name one, as 20261122-110000-bbbbbb/shell:1") {
		t.Errorf("cancel shell:1 = %v", err)
	}
}

// TestTasksShowPorts (issue 40 item 3): the ports leased for a shell are
// in tasks show, saying which was $PORT, and in its JSON.
func TestTasksShowPorts(t *testing.T) {
	dir, now := fixtureJournal(t)
	timeNow = func() time.Time { return now }
	defer func() { timeNow = time.Now }()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var out, js bytes.Buffer
	if err := showTask(t.Context(), store, "", "20261122-11/shell:1", false, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := "  ports:   20417 ($PORT), 20418, leased while it runs\n"; !strings.Contains(out.String(), want) {
		t.Errorf("tasks show:\n%s\nwant the line %q", out.String(), want)
	}
	if err := showTask(t.Context(), store, "", "20261122-11/shell:1", true, &js, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"ports":[20417,20418]`) {
		t.Errorf("tasks show --json = %s, want its ports", js.String())
	}
	out.Reset()
	if err := showTask(t.Context(), store, "", "20261122-09/shell:1", false, &out, io.Discard); err != nil || strings.Contains(out.String(), "ports") {
		t.Errorf("a shell that leased no port shows %q (%v)", out.String(), err)
	}
}

// TestADamagedJournalIsAClearError: offstage run on a file that is not a
// database exits 2, naming the file and what to do.
func TestADamagedJournalIsAClearError(t *testing.T) {
	state := t.TempDir()
	os.MkdirAll(filepath.Join(state, "offstage"), 0o700)
	os.WriteFile(filepath.Join(state, "offstage", "journal.db"), bytes.Repeat([]byte("not a database\n"), 500), 0o600)
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [{"text": "hello"}]}`), 0o644)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script, "hi")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 2 || !strings.Contains(string(out), "journal.db is damaged") || !strings.Contains(string(out), "--no-journal") {
		t.Errorf("exit %d: %s", code, out)
	}
	// --no-journal gets past it.
	cmd, _ = offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--no-journal", "--script", script, "hi")
	out, err = cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "journal") || !strings.Contains(string(out), "hello") {
		t.Errorf("with --no-journal: %s", out)
	}
}

// offstage tasks, which has no --no-journal, does not advise it: on a
// damaged journal, or a shared one it cannot reach, its advice is its own.
// run, mcp and acp, which have the flag, name it.
func TestJournalAdviceFitsTheCommand(t *testing.T) {
	state := t.TempDir()
	os.MkdirAll(filepath.Join(state, "offstage"), 0o700)
	os.WriteFile(filepath.Join(state, "offstage", "journal.db"), bytes.Repeat([]byte("not a database\n"), 500), 0o600)
	const away = "postgres://u@127.0.0.1:1/x"
	for _, tc := range []struct {
		args      []string
		want      string
		noJournal bool
	}{
		{[]string{"tasks"}, "journal.db is damaged", false},
		{[]string{"tasks", "show", "shell:1"}, "journal.db is damaged", false},
		{[]string{"tasks", "--journal", away}, "cannot be reached", false},
		{[]string{"mcp", "--journal", away}, "cannot be reached", true},
		{[]string{"mcp"}, "journal.db is damaged", true},
	} {
		cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, tc.args...)
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "--no-journal") != tc.noJournal {
			t.Errorf("offstage %s: exit %d, %s (want --no-journal named: %v)", tc.args, code, out, tc.noJournal)
		}
	}
}

// TestTasksShowADeadHostsTasksOrphaned (issue 23 item 10, and an
// outsider's full-disk trial): after offstage died, its running tasks
// were listed as running until the next offstage started, and nothing
// said its record might be incomplete.
func TestTasksShowADeadHostsTasksOrphaned(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	hostname, _ := os.Hostname()
	dir := t.TempDir()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	j := journal.New(store, journal.Options{})
	now := time.Now()
	j.Add(&journal.Host{ID: "dead", Hostname: hostname, PID: dead.Process.Pid, Start: 1, Started: now})
	j.Add(&journal.Host{ID: "alive", Hostname: hostname, PID: os.Getpid(), Start: mustStart(t), Started: now})
	for _, s := range []struct{ session, host string }{{"20261123-100000-dddddd", "dead"}, {"20261123-100000-aaaaaa", "alive"}} {
		j.StartSession(journal.Session{ID: s.session, HostID: s.host, Surface: "run", Started: now}, 0)
		for _, typ := range []task.EventType{task.EventSpawned, task.EventStarted} {
			j.Add(&journal.TaskChange{Session: s.session, Change: task.Change{Event: task.Event{Type: typ, ID: "shell:1", State: task.Running, Time: now, Kind: "shell"}, Label: "sleep 300"}})
		}
	}
	if err := j.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := tasksCommand(t.Context(), []string{"--state-dir", dir, "--json"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for line := range strings.Lines(out.String()) {
		var l struct{ Session, State string }
		json.Unmarshal([]byte(line), &l)
		states[l.Session] = l.State
	}
	want := map[string]string{"20261123-100000-dddddd": "orphaned", "20261123-100000-aaaaaa": "running"}
	if d := cmp.Diff(want, states); d != "" {
		t.Errorf("states (-want +got):\n%s", d)
	}
	if !strings.Contains(errOut.String(), "1 task shown orphaned") || !strings.Contains(errOut.String(), "may be incomplete") {
		t.Errorf("stderr %q does not say it", errOut.String())
	}
	// show agrees with the list (an attacker's trial, F2: the list said
	// orphaned and show said running, for the same task).
	for session, want := range want {
		out.Reset()
		errOut.Reset()
		if err := tasksCommand(t.Context(), []string{"--state-dir", dir, "--json", "show", session + "/shell:1"}, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		var l struct{ State string }
		json.Unmarshal(out.Bytes(), &l)
		if l.State != want {
			t.Errorf("show %s/shell:1: state %q, want %q as the list says", session, l.State, want)
		}
		if said := strings.Contains(errOut.String(), "1 task shown orphaned"); said != (want == "orphaned") {
			t.Errorf("show %s/shell:1: stderr %q", session, errOut.String())
		}
	}
}

// TestTookOfAnOrphanedTask: the TOOK of a task whose host died is
// unknown, whether shown orphaned (its host gone, not yet recorded) or
// recorded so (at the next start); it grew with the clock, or counted
// the time until the death was found (an outsider's finding).
func TestTookOfAnOrphanedTask(t *testing.T) {
	start := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	now := start.Add(3 * time.Hour)
	for _, c := range []struct {
		t    journal.Task
		want string
	}{
		{journal.Task{State: journal.Running, Started: start}, "3h…"},
		{journal.Task{State: journal.Completed, Started: start, Finished: start.Add(90 * time.Second)}, "1m"},
		{journal.Task{State: journal.Queued}, "-"},
		{journal.Task{State: journal.Orphaned, Started: start}, "?"},
		{journal.Task{State: journal.Orphaned, Started: start, Finished: start.Add(2 * time.Hour)}, "?"},
	} {
		if got := took(c.t, now); got != c.want {
			t.Errorf("took(%s, started %v, finished %v) = %q, want %q", c.t.State, c.t.Started, c.t.Finished, got, c.want)
		}
	}
}

func mustStart(t *testing.T) int64 {
	t.Helper()
	s, err := journal.ProcessStart(os.Getpid())
	if err != nil {
		t.Skipf("no process start times here: %v", err)
	}
	return s
}

// TestTheTableAlignsInColour (issue 23 item 10): the widths counted the
// colour codes, so on a terminal the header stood nine columns off the
// states and a canceled row one off the others.
func TestTheTableAlignsInColour(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var tasks []journal.Task
	for i, state := range []journal.State{journal.Running, journal.Canceled, journal.Completed, journal.Orphaned} {
		tasks = append(tasks, journal.Task{Session: "20261122-110000-bbbbbb", ID: fmt.Sprintf("shell:%d", i+1), State: state, Label: "make", Created: now})
	}
	tasks[0].Label = "printf '\x1b[2J\x1b[31m'" // a command's escapes reach no terminal, nor count as columns
	var plain, colour bytes.Buffer
	writeTasks(&plain, tasks, now, false, false)
	writeTasks(&colour, tasks, now, true, false)
	shown := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(colour.String(), "")
	if d := cmp.Diff(plain.String(), shown); d != "" || shown == colour.String() {
		t.Errorf("the coloured table, without its colour codes, is not the plain one (-plain +coloured):\n%s", d)
	}
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("a label's escape codes reach the terminal:\n%q", plain.String())
	}
}

// TestTasksSaysWhatTheLimitLeftOut (issue 23 item 10): --json, or a
// table, of more tasks than --limit (50 unless given) said nothing of
// the rest.
func TestTasksSaysWhatTheLimitLeftOut(t *testing.T) {
	dir, now := fixtureJournal(t)
	timeNow = func() time.Time { return now }
	defer func() { timeNow = time.Now }()
	for _, tc := range []struct {
		args  []string
		lines int
		note  string
	}{
		{[]string{"--limit", "1"}, 1, "offstage: 2 older tasks left out: the newest is shown; --limit 0 shows all"},
		{[]string{"--limit", "2", "--json"}, 2, "offstage: 1 older task left out"},
		{[]string{"--limit", "3"}, 3, ""},
		{[]string{"--limit", "0"}, 3, ""},
		{nil, 3, ""},
	} {
		var out, errOut bytes.Buffer
		if err := tasksCommand(t.Context(), append([]string{"--state-dir", dir}, tc.args...), &out, &errOut); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out.String(), "\n"); n != tc.lines {
			t.Errorf("tasks %q: %d lines, want %d", tc.args, n, tc.lines)
		}
		if got := errOut.String(); tc.note == "" && got != "" || !strings.Contains(got, tc.note) {
			t.Errorf("tasks %q: stderr %q, want %q", tc.args, got, tc.note)
		}
	}
}

// TestTasksHonoursNoColor (issue 23 item 10): on a terminal the table is
// coloured unless $NO_COLOR is set or --no-color is given.
func TestTasksHonoursNoColor(t *testing.T) {
	dir, _ := fixtureJournal(t)
	for _, tc := range []struct {
		env    []string
		args   []string
		colour bool
	}{
		{nil, nil, true},
		{[]string{"NO_COLOR=1"}, nil, false},
		{nil, []string{"--no-color"}, false},
	} {
		cmd, _ := offstage(t, tc.env, append([]string{"tasks", "--state-dir", dir}, tc.args...)...)
		f, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(f) // until offstage exits (EIO)
		f.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("tasks %v %q: %v\n%s", tc.env, tc.args, err, out)
		}
		if !strings.Contains(string(out), "completed") {
			t.Fatalf("tasks %v %q printed no table:\n%s", tc.env, tc.args, out)
		}
		if got := strings.Contains(string(out), "\x1b["); got != tc.colour {
			t.Errorf("tasks %v %q: colour %v, want %v:\n%q", tc.env, tc.args, got, tc.colour, out)
		}
	}
}

// An agent task shows what it spent, and, with the user's prices, what
// that cost: 8.2k uncached input at 2, 40k cached at 0.5 and 1.3k output
// at 8 per million make 0.0468.
func TestTasksShowTokensAndTheirCost(t *testing.T) {
	dir, now := fixtureJournal(t)
	timeNow = func() time.Time { return now }
	defer func() { timeNow = time.Now }()
	config := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", config)
	if err := os.MkdirAll(filepath.Join(config, "offstage"), 0o700); err != nil {
		t.Fatal(err)
	}
	prices := "prices:\n  gpt-4.1: {input: 2, output: 8, cached_input: 0.5}\n"
	if err := os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte(prices), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := journal.OpenSQLiteReadOnly(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var out, errOut bytes.Buffer
	if err := showTask(t.Context(), store, "20261122-090000-aaaaaa", "agent:2", false, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if want := "tokens:  48.2k tokens in (40k cached), 1.3k out, 7 model calls, cost 0.05\n"; !strings.Contains(out.String(), want) {
		t.Errorf("tasks show =\n%s\nwant the line %q", out.String(), want)
	}
	out.Reset()
	if err := tasksCommand(t.Context(), []string{"--state-dir", dir, "--json", "--state", "failed"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var l taskLine
	if err := json.Unmarshal(out.Bytes(), &l); err != nil || l.Cost == nil || fmt.Sprintf("%.4f", *l.Cost) != "0.0468" || l.Usage == nil || l.Usage.ModelCalls != 7 {
		t.Errorf("tasks --json = %s (%v); want the usage and a cost of 0.0468", out.String(), err)
	}
	// The dashboard's task page prices it the same way (taskCost).
	task, err := store.Task(t.Context(), "20261122-090000-aaaaaa", "agent:2")
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := taskCost(store, userPrices())(t.Context(), task); !ok || fmt.Sprintf("%.4f", c) != "0.0468" {
		t.Errorf("the dashboard's cost: %v, %v; want 0.0468", c, ok)
	}
	if taskCost(store, nil) != nil {
		t.Error("with no prices the dashboard was given a cost to show")
	}
}

// TestUndeliveredAdviceFitsTheFace: the advice for a result no turn heard
// names what resumes that session; it told an MCP session's task to run
// offstage run --resume, which would make it a new run conversation (an
// outsider's finding).
func TestUndeliveredAdviceFitsTheFace(t *testing.T) {
	for surface, want := range map[string]string{
		"run": "offstage run --resume=S1 delivers it",
		"acp": "session/load",
		"mcp": "its MCP client's session ended",
	} {
		if got := undeliveredAdvice(surface, "S1"); !strings.Contains(got, want) || surface != "run" && strings.Contains(got, "run --resume") {
			t.Errorf("%s: %q, want %q", surface, got, want)
		}
	}
}

// TestLiveSessionLinesAreBounded: a session with hundreds of unfinished
// tasks names the first few on its line in offstage sessions and offstage
// tasks, and counts the rest; the line named 400 (an outsider's finding).
func TestLiveSessionLinesAreBounded(t *testing.T) {
	var tasks []liveTask
	for i := range 400 {
		tasks = append(tasks, liveTask{ID: fmt.Sprintf("shell:%d", i+1), State: journal.Queued})
	}
	st := liveState{PID: 1, Sessions: []liveSession{{ID: "S1", Face: "mcp", Tasks: tasks}}}
	var a, b bytes.Buffer
	writeSessions(&a, st, time.Now())
	writeLive(&b, st, time.Now())
	for name, out := range map[string]string{"sessions": a.String(), "tasks": b.String()} {
		if !strings.Contains(out, "shell:8 queued, and 392 more") || strings.Contains(out, "shell:9 ") || len(out) > 600 {
			t.Errorf("offstage %s with 400 unfinished tasks:\n%s", name, out)
		}
	}
}
