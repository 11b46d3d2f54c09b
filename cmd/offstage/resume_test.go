package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/provider"
)

// journalOf reads the sessions and tasks of a state directory's journal.
func journalOf(t *testing.T, state string) ([]journal.Session, []journal.Task) {
	t.Helper()
	s, err := journal.OpenSQLite(filepath.Join(state, "offstage", "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sessions, err := s.Sessions(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := s.Tasks(t.Context(), journal.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return sessions, tasks
}

// waitForTask polls the journal until a task of the state directory
// satisfies ok.
func waitForTask(t *testing.T, state string, ok func(journal.Task) bool) journal.Task {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := journal.OpenSQLite(filepath.Join(state, "offstage", "journal.db")); err == nil {
			tasks, _ := s.Tasks(t.Context(), journal.TaskFilter{})
			s.Close()
			for _, x := range tasks {
				if ok(x) {
					return x
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no task in the journal got there")
	return journal.Task{}
}

// TestACrashOrphansAndResumeTellsTheModel: offstage is SIGKILLed with a
// shell running; the next offstage on the journal marks it orphaned, and
// --resume restores the conversation and tells the model, once.
func TestACrashOrphansAndResumeTellsTheModel(t *testing.T) {
	state := t.TempDir()
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo serving on :8080; exec sleep 600", "run_in_background": true}}]},
		{"text": "The server runs."},
		{"expect": "(?s)continue.*orphaned.*shell:1 \\(echo serving.*serving on :8080", "text": "The server was lost in the restart; starting it again.",
		 "tool_calls": [{"name": "bash", "input": {"command": "echo again"}}]},
		{"expect": "again", "text": "Started again."},
		{"text": "Nothing more to say."}
	]}`), 0o644)
	env := []string{"XDG_STATE_HOME=" + state}
	first, _ := offstage(t, env, "run", "--script", script, "start the server")
	var out1 bytes.Buffer
	first.Stdout, first.Stderr = &out1, &out1
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	running := waitForTask(t, state, func(x journal.Task) bool { return x.ID == "shell:1" && x.State == "running" && x.PID > 0 })
	// The log has the line before the host dies.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(running.LogPath); bytes.Contains(b, []byte("serving")) {
			break
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	first.Wait()

	second, _ := offstage(t, env, "run", "--resume", "--script", script, "continue")
	var out2, err2 bytes.Buffer
	second.Stdout, second.Stderr = &out2, &err2
	if err := second.Run(); err != nil {
		t.Fatalf("resume: %v\n%s\n%s", err, out2.String(), err2.String())
	}
	for _, want := range []string{"1 task of an offstage that is gone marked orphaned", "resuming session", "4 messages, 0 results it has not seen, 1 task the restart orphaned"} {
		if !strings.Contains(err2.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, err2.String())
		}
	}
	if !strings.Contains(out2.String(), "Started again.") {
		t.Errorf("the resumed conversation did not go on:\n%s\n%s", out2.String(), err2.String())
	}
	s, err := journal.OpenSQLite(filepath.Join(state, "offstage", "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tasks, _ := s.Tasks(t.Context(), journal.TaskFilter{})
	if len(tasks) != 2 || tasks[1].ID != "shell:1" || tasks[1].State != journal.Orphaned || tasks[0].ID != "shell:2" || tasks[0].State != "completed" {
		t.Errorf("tasks after resume = %+v, want shell:1 orphaned and shell:2 (numbered on) completed", tasks)
	}
	// A second resume does not tell it again.
	third, _ := offstage(t, env, "run", "--resume", "--script", script, "anything else?")
	var out3 bytes.Buffer
	third.Stdout, third.Stderr = &out3, &out3
	if err := third.Run(); err != nil {
		t.Fatalf("second resume: %v\n%s", err, out3.String())
	}
	if !strings.Contains(out3.String(), "0 tasks the restart orphaned") || !strings.Contains(out3.String(), "Nothing more to say.") {
		t.Errorf("second resume:\n%s", out3.String())
	}
}

// TestResultsAreDeliveredOnceAcrossRestarts kills offstage at random
// moments while background results come in, resumes, and checks that no
// result reaches the conversation twice, and that every result the
// journal held as undelivered at the crash reaches it once.
//
// Each round must test delivery (issue 20: a round could pass with none
// undelivered, or crash before the session was on record): the first turn
// starts twelve short shells and then a long foreground command, during
// which no result can be delivered (results reach the model before its
// next request). The crash comes at a random moment after the journal
// holds at least one finished, undelivered result, while that command
// still runs; how many results finished by then varies.
func TestResultsAreDeliveredOnceAcrossRestarts(t *testing.T) {
	var calls []string
	for i := range 12 {
		calls = append(calls, fmt.Sprintf(`{"name": "bash", "input": {"command": "sleep 0.%d; echo result-%d", "run_in_background": true}}`, i%10, i))
	}
	calls = append(calls, `{"name": "bash", "input": {"command": "sleep 60", "yield_after_seconds": 120}}`)
	turns := []string{`{"tool_calls": [` + strings.Join(calls, ",") + `]}`}
	for range 40 {
		turns = append(turns, `{"text": "noted", "delay_ms": 150}`)
	}
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [`+strings.Join(turns, ",")+`]}`), 0o644)
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		state := t.TempDir()
		env := []string{"XDG_STATE_HOME=" + state}
		first, _ := offstage(t, env, "run", "--script", script, "start them")
		var out bytes.Buffer
		first.Stdout, first.Stderr = &out, &out
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		waitForTask(t, state, func(x journal.Task) bool { return x.State == "completed" && !x.Delivered })
		time.Sleep(time.Duration(rand.IntN(800)) * time.Millisecond) // more or fewer finished, still in the foreground command
		first.Process.Signal(syscall.SIGKILL)
		first.Wait()

		db := filepath.Join(state, "offstage", "journal.db")
		s, err := journal.OpenSQLite(db)
		if err != nil {
			t.Fatal(err)
		}
		before, err := s.Tasks(t.Context(), journal.TaskFilter{})
		s.Close()
		if err != nil {
			t.Fatalf("round %d: reading the journal after the crash: %v", round, err)
		}
		undelivered := map[string]bool{}
		for _, x := range before {
			if x.State == "completed" && !x.Delivered {
				undelivered[x.ID] = true
			}
		}
		if len(undelivered) == 0 {
			t.Fatalf("round %d: no result was undelivered at the crash, so the round tests nothing: %+v", round, before)
		}

		second, _ := offstage(t, env, "run", "--resume", "--script", script, "go on")
		second.Stdout, second.Stderr = &out, &out
		if err := second.Run(); err != nil {
			t.Fatalf("round %d: resume: %v\n%s", round, err, out.String())
		}
		s, err = journal.OpenSQLite(db)
		if err != nil {
			t.Fatal(err)
		}
		sessions, err := s.Sessions(t.Context(), 0)
		if err != nil || len(sessions) == 0 {
			s.Close()
			t.Fatalf("round %d: sessions after resume = %v, %v", round, sessions, err)
		}
		msgs, err := s.History(t.Context(), sessions[0].ID)
		s.Close()
		if err != nil {
			t.Fatalf("round %d: reading the conversation after resume: %v", round, err)
		}
		seen := map[string]int{}
		re := regexp.MustCompile(`<background-result task_id="(shell:\d+)"`)
		for _, m := range msgs {
			var pm provider.Message
			if err := json.Unmarshal(m.Body, &pm); err != nil {
				t.Fatalf("round %d: message %s of the journal is not a message: %v", round, m.Body, err)
			}
			for _, b := range pm.Content {
				for _, sub := range re.FindAllStringSubmatch(b.Text, -1) {
					seen[sub[1]]++
				}
			}
		}
		for id, n := range seen {
			if n > 1 {
				t.Errorf("round %d: %s reached the conversation %d times", round, id, n)
			}
		}
		for id := range undelivered {
			if seen[id] != 1 {
				t.Errorf("round %d: %s was undelivered at the crash and reached the conversation %d times after, want once", round, id, seen[id])
			}
		}
		t.Logf("round %d: %d results undelivered at the crash, %d in the conversation after resume", round, len(undelivered), len(seen))
	}
}

// --resume SESSION with a space takes a prefix of an id as --resume=SESSION
// does: it resolves, or the run stops with an error; it never resumes the
// latest session with the prefix in the prompt.
func TestResumeWithASpaceTakesAPrefix(t *testing.T) {
	state := t.TempDir()
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"text": "First."},
		{"expect": "^go on$", "text": "Going on."}
	]}`), 0o644)
	env := []string{"XDG_STATE_HOME=" + state}
	first, _ := offstage(t, env, "run", "--script", script, "first")
	if out, err := first.CombinedOutput(); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	sessions, _ := journalOf(t, state)
	if len(sessions) != 1 {
		t.Fatalf("sessions = %+v", sessions)
	}

	wrong, _ := offstage(t, env, "run", "--resume", "1999", "--script", script, "go on")
	var errOut bytes.Buffer
	wrong.Stderr = &errOut
	if code := exitOf(t, wrong.Run()); code != 2 || !strings.Contains(errOut.String(), `no session "1999"`) {
		t.Errorf("--resume 1999: exit %d, stderr:\n%s", code, errOut.String())
	}

	prefix := sessions[0].ID[:6]
	second, _ := offstage(t, env, "run", "--resume", prefix, "--script", script, "go on")
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &errOut
	if err := second.Run(); err != nil || out.String() != "Going on.\n" {
		t.Errorf("--resume %s: %v, stdout %q\nstderr:\n%s", prefix, err, out.String(), errOut.String())
	}

	// Issue 37 item 7: a word that is not an id resumed the latest session
	// and sent "WORD prompt" to the model without a word on stderr.
	word, _ := offstage(t, env, "run", "--resume", "tests", "--script", script, "go on")
	errOut.Reset()
	word.Stderr = &errOut
	if err := word.Run(); err == nil || !strings.Contains(errOut.String(), `the latest session, since "tests" is not a session id; the prompt is "tests go on"`) {
		t.Errorf("--resume tests: %v, stderr:\n%s", err, errOut.String())
	}
}
