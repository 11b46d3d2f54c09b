package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	change("20261122-090000-aaaaaa", task.EventFinished, "shell:1", "make", task.Completed, 95*time.Second, exit(0, "exit status 0 after 1m35s", ""))
	change("20261122-090000-aaaaaa", task.EventDelivered, "shell:1", "make", task.Completed, 96*time.Second, nil)
	change("20261122-090000-aaaaaa", task.EventSpawned, "agent:2", "reviewer: look at the diff", task.Running, time.Minute, nil)
	change("20261122-090000-aaaaaa", task.EventStarted, "agent:2", "reviewer: look at the diff", task.Running, time.Minute, nil)
	change("20261122-090000-aaaaaa", task.EventFinished, "agent:2", "reviewer: look at the diff", task.Failed, 2*time.Minute, func(c *task.Change) { c.Err = "model unavailable" })
	j.StartSession(journal.Session{ID: "20261122-110000-bbbbbb", HostID: "h1", Surface: "mcp", Cwd: "/src", Started: at(2 * time.Hour)}, 0)
	change("20261122-110000-bbbbbb", task.EventSpawned, "shell:1", "npm run dev   # the dev server, which runs until it is stopped", task.Running, 2*time.Hour, nil)
	change("20261122-110000-bbbbbb", task.EventStarted, "shell:1", "npm run dev   # the dev server, which runs until it is stopped", task.Running, 2*time.Hour, nil)
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
	} {
		err := tasksCommand(t.Context(), append([]string{"--state-dir", dir}, strings.Fields(args)...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tasks %s = %v, want %q", args, err, want)
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
	if err := showTask(t.Context(), store, "", "20261122-09/shell:1", false, &out); err != nil {
		t.Fatal(err)
	}
	golden(t, "tasks-show.txt", out.String())
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
}

func mustStart(t *testing.T) int64 {
	t.Helper()
	s, err := journal.ProcessStart(os.Getpid())
	if err != nil {
		t.Skipf("no process start times here: %v", err)
	}
	return s
}
