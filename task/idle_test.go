package task_test

import (
	"testing"
	"testing/synctest"

	"github.com/offstage/offstage/task"
)

// idles counts the EventIdle events logged after seq, and returns the
// newest seq.
func idles(t *testing.T, tb *task.Table, seq uint64) (int, uint64) {
	t.Helper()
	evs, err := tb.Events().After(seq)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == task.EventIdle {
			if e.ID != "" || e.Owner != "" {
				t.Errorf("idle event %+v", e)
			}
			n++
		}
	}
	return n, tb.Events().Last()
}

// TestBackgroundIdle: issue 25 item 5. Nothing said that the last
// background task had ended, so hooks and UIs polled the list; now the
// event log carries one background_idle when the last of three tasks
// ends, none before, and one again only after new work starts and ends.
func TestBackgroundIdle(t *testing.T) {
	run(t, task.Options{MaxRunning: 2}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		releases := []chan struct{}{make(chan struct{}), make(chan struct{}), make(chan struct{})}
		for _, r := range releases { // the third waits queued behind two running
			mustSpawn(t, top, "shell", gate(r, "done"))
		}
		synctest.Wait()
		var seq uint64
		for i, r := range releases {
			close(r)
			synctest.Wait()
			n, last := idles(t, tb, seq)
			seq = last
			want := 0
			if i == len(releases)-1 {
				want = 1
			}
			if n != want {
				t.Errorf("after task %d of 3 ended: %d background_idle events, want %d", i+1, n, want)
			}
		}
		top.Drain()
		synctest.Wait()
		if n, _ := idles(t, tb, seq); n != 0 {
			t.Errorf("delivering the results logged %d more background_idle events", n)
		}
		// New work: idle again once it ends, and only then.
		r := make(chan struct{})
		mustSpawn(t, top, "agent", gate(r, "done"))
		synctest.Wait()
		if n, last := idles(t, tb, seq); n != 0 {
			t.Errorf("starting new work logged %d background_idle events", n)
		} else {
			seq = last
		}
		close(r)
		synctest.Wait()
		if n, _ := idles(t, tb, seq); n != 1 {
			t.Errorf("after the new work ended: %d background_idle events, want 1", n)
		}
		if got := task.EventIdle.String(); got != "background_idle" {
			t.Errorf("EventIdle.String() = %q", got)
		}
	})
}
