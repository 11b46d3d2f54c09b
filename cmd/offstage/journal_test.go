package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// lastLine is the last line of a command's stderr.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// damagedJournal makes a journal in dir with a few sessions, then
// overwrites every page but the first (the header and the schema) with
// junk: damaged in the middle, not truncated.
func damagedJournal(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "journal.db")
	store, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	j := journal.New(store, journal.Options{})
	for i := range 20 {
		log := j.StartSession(journal.Session{ID: fmt.Sprint("s", i), Started: time.Now()}, 0)
		log.Record(&task.Change{Event: task.Event{Type: task.EventSpawned, ID: "shell:1", Time: time.Now(), Kind: "shell"}, Label: "make"})
		log.Message([]byte(strings.Repeat("words ", 300)))
		log.End()
	}
	if err := j.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xa5}, int(info.Size())-4096), 4096); err != nil {
		t.Fatal(err)
	}
}

// TestADamagedJournalIsOneDiagnosis pins issue 19 item 6: a journal
// damaged in its middle let run go on, lose every record and exit 0,
// while offstage tasks printed SQLite's bare message. Both now refuse
// with the same advice, exit status 2.
func TestADamagedJournalIsOneDiagnosis(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "offstage")
	os.MkdirAll(dir, 0o700)
	damagedJournal(t, dir)
	script := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(script, []byte(`{"turns": [{"text": "hi"}]}`), 0o644)
	for _, args := range [][]string{{"run", "--script", script, "hi"}, {"tasks"}, {"tasks", "show", "shell:1"}} {
		cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, args...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		code := exitOf(t, cmd.Run())
		last := lastLine(errOut.String())
		if code != 2 || !strings.Contains(last, "is damaged") || !strings.Contains(last, "move it aside (mv ") {
			t.Errorf("offstage %s: exit %d, last line %q; want 2 and the advice to move it aside\n%s", strings.Join(args, " "), code, last, errOut.String())
		}
	}
}

// TestARunWhoseJournalVanishesDoesNotEndClean pins issue 19 item 6: the
// journal file deleted during a session took every later record into an
// unlinked file, with no word and exit status 0. Now the journal says so
// once, and the run's exit status and last line say what was lost.
func TestARunWhoseJournalVanishesDoesNotEndClean(t *testing.T) {
	state := t.TempDir()
	db := filepath.Join(state, "offstage", "journal.db")
	script := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"text": "Cleaning up.", "tool_calls": [{"name": "bash", "input": {"command": "rm -f '`+db+`' '`+db+`-wal' '`+db+`-shm'"}}]},
		{"text": "Done."}
	]}`), 0o644)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script, "clean up")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitOf(t, cmd.Run())
	if !strings.Contains(out.String(), "Done.") {
		t.Errorf("the session did not go on: stdout %q", out.String())
	}
	last := lastLine(errOut.String())
	if code != 1 || !strings.Contains(last, "the journal lost") || !strings.Contains(last, "was removed") {
		t.Errorf("exit %d, last line %q; want 1 and what the journal lost\n%s", code, last, errOut.String())
	}
	if n := strings.Count(errOut.String(), "was removed while this offstage had it open"); n != 2 { // the report, and the last line
		t.Errorf("%d mentions of the removal, want the report once and the last line:\n%s", n, errOut.String())
	}
}

// TestTasksSaysWhichSessionsLostRecords: a session whose end recorded a
// loss is flagged where its tasks are shown.
func TestTasksSaysWhichSessionsLostRecords(t *testing.T) {
	dir := t.TempDir()
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	err = store.Write(t.Context(), []journal.Record{
		&journal.Session{ID: "20261123-100000-cccccc", Started: now},
		&journal.TaskChange{Session: "20261123-100000-cccccc", Change: task.Change{Event: task.Event{Type: task.EventSpawned, ID: "shell:1", Time: now, Kind: "shell"}, Label: "make"}},
		journal.SessionEnd{Session: "20261123-100000-cccccc", At: now, Lost: 7},
	})
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := tasksCommand(t.Context(), []string{"--state-dir", dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if want := "the journal lost 7 records of session 20261123-100000-cccccc"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q does not say %q", errOut.String(), want)
	}
	out.Reset()
	if err := tasksCommand(t.Context(), []string{"--state-dir", dir, "show", "shell:1"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if want := `"session_lost":7`; !strings.Contains(out.String(), want) {
		t.Errorf("show: %q does not say %q", out.String(), want)
	}
	r, err := journal.OpenSQLiteReadOnly(filepath.Join(dir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out.Reset()
	if err := showTask(t.Context(), r, "", "shell:1", false, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if want := "the journal lost 7 records of its session"; !strings.Contains(out.String(), want) {
		t.Errorf("show: %q does not say %q", out.String(), want)
	}
}
