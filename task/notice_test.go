package task_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/task"
)

// noticer is a task function that posts the notices it receives on in,
// reporting through posted whether each was queued, until release closes.
func noticer(in <-chan string, posted chan<- bool, release <-chan struct{}) task.Func {
	return func(ctx context.Context, h *task.Handle) (string, error) {
		for {
			select {
			case text := <-in:
				posted <- h.Notify("test", text)
			case <-release:
				return "done", nil
			case <-ctx.Done():
				return "", context.Cause(ctx)
			}
		}
	}
}

func TestNoticeIsDeliveredOnceAndResultStillComes(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		in, posted, release := make(chan string), make(chan bool), make(chan struct{})
		id := mustSpawn(t, top, "shell", noticer(in, posted, release))
		in <- "waiting for input: Overwrite? [y/N]"
		if !<-posted {
			t.Fatal("Notify() = false for a running task with a live owner")
		}
		select {
		case <-top.Ready():
		default:
			t.Fatal("a notice left no token in Ready")
		}
		got := top.Notices()
		if len(got) != 1 || got[0].TaskID != id || got[0].Kind != "test" || got[0].Text != "waiting for input: Overwrite? [y/N]" || got[0].Label != "shell task" {
			t.Fatalf("Notices() = %+v, want the one notice of %s", got, id)
		}
		if again := top.Notices(); again != nil {
			t.Errorf("second Notices() = %+v, want nil (exactly once)", again)
		}
		if d := top.Drain(); d != nil {
			t.Errorf("Drain() after a notice = %v, want nil: a notice is not a result", ids(d))
		}
		close(release)
		synctest.Wait()
		if d := top.Drain(); len(d) != 1 || d[0].Text != "done" {
			t.Errorf("Drain() after finishing = %v, want the result", ids(d))
		}
		var types []string
		evs, _ := tb.Events().After(0)
		for _, e := range evs {
			types = append(types, e.Type.String())
		}
		if !strings.Contains(strings.Join(types, " "), "notice") {
			t.Errorf("events %v have no notice", types)
		}
	})
}

func TestWaitReturnsAtOnceOnANoticeAndConsumesIt(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		in, posted, release := make(chan string), make(chan bool, 1), make(chan struct{})
		id := mustSpawn(t, top, "shell", noticer(in, posted, release))
		other := mustSpawn(t, top, "shell", noticer(make(chan string), posted, release))
		go func() {
			time.Sleep(3 * time.Second)
			in <- "Password:"
		}()
		start := time.Now()
		got, err := top.Wait(t.Context(), []string{id, other}, task.All)
		if err != nil {
			t.Fatalf("Wait() error %v, want nil on a notice", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("Wait returned after %v, want 3s (when the notice came)", d)
		}
		if len(got.Notices) != 1 || got.Notices[0].Text != "Password:" || len(got.Done) != 0 || len(got.Running) != 2 {
			t.Errorf("Wait() = notices %+v done %v running %v, want the notice and both running", got.Notices, ids(got.Done), infoIDs(got.Running))
		}
		if n := top.Notices(); n != nil {
			t.Errorf("Notices() after Wait = %+v, want nil: Wait consumed it", n)
		}
		close(release)
	})
}

func TestWaitSeesANoticeAlreadyWaitingAndLeavesOthers(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		inA, inB, posted, release := make(chan string), make(chan string), make(chan bool), make(chan struct{})
		a := mustSpawn(t, top, "shell", noticer(inA, posted, release))
		b := mustSpawn(t, top, "shell", noticer(inB, posted, release))
		inB <- "b1"
		<-posted
		inA <- "a1"
		<-posted
		start := time.Now()
		got, err := top.Wait(t.Context(), []string{a}, task.Any)
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("Wait() = %v after %v, want at once", err, time.Since(start))
		}
		if len(got.Notices) != 1 || got.Notices[0].TaskID != a {
			t.Errorf("Wait(a).Notices = %+v, want a's only", got.Notices)
		}
		if n := top.Notices(); len(n) != 1 || n[0].TaskID != b {
			t.Errorf("Notices() = %+v, want b's, left by the wait on a", n)
		}
		close(release)
	})
}

func TestWaitThatTimesOutLeavesNotices(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		a := mustSpawn(t, top, "shell", gate(release, "a"))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := top.Wait(ctx, []string{a}, task.Any); err == nil {
			t.Fatal("Wait() = nil error, want the deadline")
		}
		close(release)
	})
}

func TestNoticesAreCappedAndTheDropIsSaid(t *testing.T) {
	run(t, task.Options{MaxNotices: 3, MaxNoticeBytes: 10}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		in, posted, release := make(chan string), make(chan bool), make(chan struct{})
		mustSpawn(t, top, "shell", noticer(in, posted, release))
		var queued []bool
		for i := range 5 {
			in <- fmt.Sprintf("notice %d is long", i)
			queued = append(queued, <-posted)
		}
		if fmt.Sprint(queued) != "[true true true false false]" {
			t.Errorf("Notify results = %v, want three queued and two refused", queued)
		}
		got := top.Notices()
		if len(got) != 4 {
			t.Fatalf("Notices() = %+v, want 3 and a drop notice", got)
		}
		if got[0].Text != "notice 0 i…(+6 more bytes)" {
			t.Errorf("first notice %q is not cut to 10 bytes, saying so", got[0].Text)
		}
		if got[3].Kind != task.NoticesDropped || !strings.Contains(got[3].Text, "2 notices were dropped") {
			t.Errorf("last notice = %+v, want the count of dropped notices", got[3])
		}
		in <- "after"
		if !<-posted {
			t.Error("Notify after the queue was read = false, want room again")
		}
		if got := top.Notices(); len(got) != 1 {
			t.Errorf("Notices() = %+v, want one, and no stale drop notice", got)
		}
		close(release)
	})
}

func TestNoNoticeAfterFinishOrForADeadOwner(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		handles := make(chan *task.Handle, 1)
		childPosted := make(chan bool, 1)
		parentRelease, childRelease := make(chan struct{}), make(chan struct{})
		parent := mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			handles <- h
			_, err := h.View().Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, ch *task.Handle) (string, error) {
				<-childRelease
				childPosted <- ch.Notify("test", "too late")
				<-ctx.Done()
				return "", nil
			})
			if err != nil {
				return "", err
			}
			<-parentRelease
			return "parent", nil
		})
		h := <-handles
		close(parentRelease)
		synctest.Wait()
		if h.Notify("test", "after the end") {
			t.Error("Notify() after the task finished = true")
		}
		close(childRelease)
		if <-childPosted {
			t.Error("Notify() to a finished owner = true")
		}
		if n := tb.View(parent).Notices(); n != nil {
			t.Errorf("a finished owner holds notices %+v", n)
		}
	})
}
