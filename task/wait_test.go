package task_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/task"
)

func ids(rs []task.Result) (out []string) {
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func infoIDs(is []task.Info) (out []string) {
	for _, i := range is {
		out = append(out, i.ID)
	}
	return out
}

func TestWaitAnyReturnsWhenOneFinishes(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		r1, r2 := make(chan struct{}), make(chan struct{})
		a := mustSpawn(t, top, "shell", gate(r1, "a"))
		b := mustSpawn(t, top, "shell", gate(r2, "b"))
		go func() {
			time.Sleep(5 * time.Second)
			close(r2)
		}()
		start := time.Now()
		got, err := top.Wait(t.Context(), []string{a, b, a}, task.Any)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) != 5*time.Second {
			t.Errorf("Wait returned after %v, want 5s", time.Since(start))
		}
		if len(got.Done) != 1 || got.Done[0].ID != b || got.Done[0].Text != "b" {
			t.Errorf("Done = %v, want [%s]", ids(got.Done), b)
		}
		if len(got.Running) != 1 || got.Running[0].ID != a || got.Running[0].State != task.Running {
			t.Errorf("Running = %v, want [%s] (repeated ids count once)", infoIDs(got.Running), a)
		}
		// Wait consumed b: Drain must not return it again.
		if d := top.Drain(); d != nil {
			t.Errorf("Drain() after Wait = %v, want nil", ids(d))
		}
		close(r1)
	})
}

func TestWaitAllDeliversEveryResult(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		r1, r2 := make(chan struct{}), make(chan struct{})
		a := mustSpawn(t, top, "shell", gate(r1, "a"))
		b := mustSpawn(t, top, "shell", gate(r2, "b"))
		go func() {
			close(r1)
			time.Sleep(time.Second)
			close(r2)
		}()
		got, err := top.Wait(t.Context(), []string{b, a}, task.All)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Done) != 2 || got.Done[0].ID != b || got.Done[1].ID != a || got.Running != nil {
			t.Errorf("Wait(All) = done %v running %v, want done [%s %s] in the order asked", ids(got.Done), infoIDs(got.Running), b, a)
		}
	})
}

func TestWaitThatTimesOutConsumesNothing(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		a := mustSpawn(t, top, "shell", returns("a"))
		b := mustSpawn(t, top, "shell", gate(release, "b"))
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		got, err := top.Wait(ctx, []string{a, b}, task.All)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait() error = %v, want DeadlineExceeded", err)
		}
		if got.Done != nil || len(got.Unconsumed) != 1 || got.Unconsumed[0].ID != a || len(got.Running) != 1 || got.Running[0].ID != b {
			t.Errorf("Wait() = %+v, want a unconsumed and b running", got)
		}
		if d := top.Drain(); len(d) != 1 || d[0].ID != a {
			t.Errorf("Drain() = %v, want [%s]: a timed-out Wait must leave results for Drain", ids(d), a)
		}
		close(release)
	})
}

func TestWaitReportsEarlierDeliveries(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		a := mustSpawn(t, top, "shell", returns("a"))
		synctest.Wait()
		top.Drain()
		got, err := top.Wait(t.Context(), []string{a}, task.Any)
		if err != nil {
			t.Fatal(err)
		}
		if got.Done != nil || len(got.Earlier) != 1 || got.Earlier[0].State != task.Completed {
			t.Errorf("Wait() on a drained task = %+v, want it in Earlier, completed", got)
		}
	})
}

func TestWaitRejectsBadIDsBeforeConsuming(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		a := mustSpawn(t, top, "shell", returns("a"))
		synctest.Wait()
		if _, err := top.Wait(t.Context(), nil, task.Any); err == nil {
			t.Error("Wait(no ids) = nil error")
		}
		if _, err := top.Wait(t.Context(), []string{a, "shell:42"}, task.Any); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Wait(unknown) = %v, want ErrNotFound", err)
		}
		if d := top.Drain(); len(d) != 1 {
			t.Errorf("Drain() = %v: a failed Wait consumed a result", ids(d))
		}
	})
}

func TestDoneIsClosedAfterTheResultIsWritten(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		id := mustSpawn(t, top, "shell", returns("x"))
		done, err := top.Done(id)
		if err != nil {
			t.Fatal(err)
		}
		<-done
		if info, _ := top.Info(id); info.State != task.Completed {
			t.Errorf("state after done = %v, want completed", info.State)
		}
	})
}

// Regression: the reference registry read a task's status, then its result
// in a second step; a task finishing in between was reported cancelled.
// Here deciding and delivering are one critical section: hammer it with
// tasks finishing exactly as waits look.
func TestWaitNeverReportsACompletedTaskAsCanceled(t *testing.T) {
	tb := task.New(t.Context(), task.Options{MaxRunning: 64})
	defer tb.Close(context.Background())
	top := tb.View("")
	for i := range 2000 {
		release := make(chan struct{})
		id := mustSpawn(t, top, "shell", gate(release, "ok"))
		go close(release)
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%3)*time.Microsecond)
		got, err := top.Wait(ctx, []string{id}, task.Any)
		cancel()
		for _, r := range got.Done {
			if r.State != task.Completed || r.Text != "ok" {
				t.Fatalf("Wait() delivered %v %q, want completed ok", r.State, r.Text)
			}
		}
		for _, r := range append(got.Running, got.Unconsumed...) {
			if r.State == task.Canceled {
				t.Fatalf("Wait() (err %v) reported %s canceled", err, r.ID)
			}
		}
		<-mustDone(t, top, id)
		for _, r := range top.Drain() {
			if r.State != task.Completed {
				t.Fatalf("Drain() = %v, want completed", r.State)
			}
		}
	}
}

func mustDone(t *testing.T, v *task.View, id string) <-chan struct{} {
	t.Helper()
	done, err := v.Done(id)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// Regression: an idle parent was never woken when a task finished before
// the listener started waiting. Ready holds a permit.
func TestReadyIsNotLostWhenNobodyListens(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "shell", returns("a"))
		mustSpawn(t, top, "shell", returns("b"))
		synctest.Wait() // both finished; nobody was listening
		select {
		case <-top.Ready():
		default:
			t.Fatal("Ready() has no permit after tasks finished unobserved")
		}
		select {
		case <-top.Ready():
			t.Error("Ready() held a second permit: finishes should coalesce into one")
		default:
		}
		if d := top.Drain(); len(d) != 2 {
			t.Errorf("Drain() = %v, want both results", ids(d))
		}
	})
}

func TestReadyWakesAListener(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		mustSpawn(t, top, "shell", gate(release, "x"))
		woke := make(chan struct{})
		go func() {
			<-top.Ready()
			close(woke)
		}()
		synctest.Wait()
		select {
		case <-woke:
			t.Fatal("woken before anything finished")
		default:
		}
		close(release)
		<-woke
		// Ready is per owner: a sub-agent's children do not wake the top.
		if tb.View("agent:404").Ready() != nil {
			t.Error("Ready() of an unknown owner should be nil")
		}
	})
}
