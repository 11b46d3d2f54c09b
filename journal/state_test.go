package journal_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// TestStatesAreTaskStatesAndOrphaned: every task.State has its journal
// State, by the same name, and back; Orphaned is the one more.
func TestStatesAreTaskStatesAndOrphaned(t *testing.T) {
	var want []journal.State
	for s := task.Queued; s <= task.TimedOut; s++ {
		js := journal.StateOf(s)
		if js.String() != s.String() {
			t.Errorf("StateOf(%v) = %q, want the same name", s, js)
		}
		if back, ok := js.Task(); !ok || back != s {
			t.Errorf("%q.Task() = %v, %v; want %v, true", js, back, ok, s)
		}
		if js.Finished() != s.Finished() {
			t.Errorf("%q.Finished() = %v, want %v", js, js.Finished(), s.Finished())
		}
		want = append(want, js)
	}
	want = append(want, journal.Orphaned)
	if got := journal.States(); !slices.Equal(got, want) {
		t.Errorf("States() = %v, want %v", got, want)
	}
	if _, ok := journal.Orphaned.Task(); ok {
		t.Error("Orphaned.Task() is ok, want no task.State")
	}
	if !journal.Orphaned.Finished() || journal.State("").Finished() {
		t.Error("Orphaned must be finished, the zero State not")
	}
}

func TestParseState(t *testing.T) {
	for _, s := range journal.States() {
		if got, err := journal.ParseState(s.String()); err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "Running", "done", "/tmp/x"} {
		_, err := journal.ParseState(bad)
		if err == nil {
			t.Errorf("ParseState(%q) succeeded", bad)
			continue
		}
		if want := "is not a state: use queued, running, completed, failed, canceled, timed_out or orphaned"; !strings.Contains(err.Error(), want) {
			t.Errorf("ParseState(%q) = %v, want it to list the states", bad, err)
		}
	}
}
