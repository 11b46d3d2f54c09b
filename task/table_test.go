package task_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/offstage/offstage/task"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// block is a task function that runs until its context ends and then
// returns the cause as its error.
func block(ctx context.Context, _ *task.Handle) (string, error) {
	<-ctx.Done()
	return "", context.Cause(ctx)
}

// returns is a task function that returns text at once.
func returns(text string) task.Func {
	return func(context.Context, *task.Handle) (string, error) { return text, nil }
}

// gate is a task function that returns text when release is closed.
func gate(release <-chan struct{}, text string) task.Func {
	return func(ctx context.Context, _ *task.Handle) (string, error) {
		select {
		case <-release:
			return text, nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// run runs f in a synctest bubble with a fresh table that is closed (and
// checked to close cleanly) at the end.
func run(t *testing.T, opts task.Options, f func(t *testing.T, tb *task.Table)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), opts)
		f(t, tb)
		if err := tb.Close(t.Context()); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

func mustSpawn(t *testing.T, v *task.View, kind string, fn task.Func) string {
	t.Helper()
	id, err := v.Spawn(task.Spec{Kind: kind, Label: kind + " task"}, fn)
	if err != nil {
		t.Fatalf("Spawn(%s) error: %v", kind, err)
	}
	return id
}

func state(t *testing.T, tb *task.Table, id string) task.State {
	t.Helper()
	info, err := tb.Info(id)
	if err != nil {
		t.Fatalf("Info(%s) error: %v", id, err)
	}
	return info.State
}

func TestIDsShareOneCounterAndAreNeverReused(t *testing.T) {
	run(t, task.Options{MaxRetained: 1}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		var got []string
		for _, kind := range []string{"agent", "shell", "agent", "custom-kind"} {
			got = append(got, mustSpawn(t, top, kind, returns("x")))
			synctest.Wait()
			top.Drain() // delivered tasks get evicted (MaxRetained 1); ids must still grow
		}
		want := []string{"agent:1", "shell:2", "agent:3", "custom-kind:4"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ids (-want +got):\n%s", diff)
		}
	})
}

func TestSpawnRejectsBadInput(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		for _, kind := range []string{"", "a:b", "two words", "tab\t"} {
			if _, err := top.Spawn(task.Spec{Kind: kind}, returns("")); err == nil {
				t.Errorf("Spawn(kind %q) = nil error, want an error", kind)
			}
		}
		if _, err := top.Spawn(task.Spec{Kind: "agent"}, nil); err == nil {
			t.Error("Spawn(nil func) = nil error, want an error")
		}
		if _, err := tb.View("agent:99").Spawn(task.Spec{Kind: "shell"}, returns("")); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Spawn under unknown owner = %v, want ErrNotFound", err)
		}
	})
}

func TestResultsAreDeliveredOnceInFinishOrder(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		r1, r2 := make(chan struct{}), make(chan struct{})
		a := mustSpawn(t, top, "agent", gate(r1, "first"))
		b := mustSpawn(t, top, "shell", gate(r2, "second"))
		synctest.Wait()
		if got := top.Drain(); got != nil {
			t.Fatalf("Drain() before anything finished = %v, want nil", got)
		}
		close(r2) // b finishes first
		synctest.Wait()
		close(r1)
		synctest.Wait()
		got := top.Drain()
		if len(got) != 2 || got[0].ID != b || got[1].ID != a {
			t.Fatalf("Drain() = %v, want [%s %s]", got, b, a)
		}
		if got[0].State != task.Completed || got[0].Text != "second" || got[0].Err != nil || !got[0].Delivered {
			t.Errorf("Drain()[0] = %+v, want completed %q, delivered", got[0], "second")
		}
		if again := top.Drain(); again != nil {
			t.Errorf("second Drain() = %v, want nil", again)
		}
	})
}

func TestFailedTaskCarriesError(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		boom := errors.New("boom")
		mustSpawn(t, top, "shell", func(context.Context, *task.Handle) (string, error) { return "partial", boom })
		synctest.Wait()
		got := top.Drain()
		if len(got) != 1 || got[0].State != task.Failed || !errors.Is(got[0].Err, boom) || got[0].Text != "partial" {
			t.Errorf("Drain() = %+v, want one failed result with boom and text", got)
		}
	})
}

// Regression: the reference registries reported a cancelled task as a
// success when its function returned a value after cancellation.
func TestCanceledTaskIsNeverReportedAsSuccess(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		id := mustSpawn(t, top, "agent", func(ctx context.Context, _ *task.Handle) (string, error) {
			<-ctx.Done()
			return "I finished fine, honest", nil
		})
		synctest.Wait()
		already, err := top.Cancel(id)
		if err != nil || already {
			t.Fatalf("Cancel() = %v, %v; want false, nil", already, err)
		}
		synctest.Wait()
		got := top.Drain()
		if len(got) != 1 || got[0].State != task.Canceled || !errors.Is(got[0].Err, task.ErrCanceled) {
			t.Fatalf("Drain() = %+v, want canceled with ErrCanceled", got)
		}
		if got[0].Text != "I finished fine, honest" {
			t.Errorf("Text = %q, want the function's text kept", got[0].Text)
		}
		already, err = top.Cancel(id)
		if err != nil || !already {
			t.Errorf("second Cancel() = %v, %v; want true, nil", already, err)
		}
	})
}

func TestCancelReturnsAtOnceAndIsCooperative(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		id := mustSpawn(t, top, "shell", func(ctx context.Context, _ *task.Handle) (string, error) {
			<-ctx.Done()
			<-release // winding down takes a while
			return "", nil
		})
		synctest.Wait()
		if _, err := top.Cancel(id); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if s := state(t, tb, id); s != task.Running {
			t.Errorf("state while the function winds down = %v, want running", s)
		}
		close(release)
		synctest.Wait()
		if s := state(t, tb, id); s != task.Canceled {
			t.Errorf("state after the function returned = %v, want canceled", s)
		}
	})
}

func TestQueueIsFIFOAndBoundedByMaxRunning(t *testing.T) {
	run(t, task.Options{MaxRunning: 2}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		var (
			mu      sync.Mutex
			started []string
			ids     []string
		)
		releases := make([]chan struct{}, 5)
		for i := range releases {
			releases[i] = make(chan struct{})
			rel := releases[i]
			id := mustSpawn(t, top, "shell", func(ctx context.Context, h *task.Handle) (string, error) {
				mu.Lock()
				started = append(started, h.ID())
				mu.Unlock()
				return gate(rel, "")(ctx, h)
			})
			ids = append(ids, id)
		}
		synctest.Wait()
		want := []task.State{task.Running, task.Running, task.Queued, task.Queued, task.Queued}
		for i, id := range ids {
			if s := state(t, tb, id); s != want[i] {
				t.Errorf("state(%s) = %v, want %v", id, s, want[i])
			}
		}
		// Cancelling a queued task ends it at once; it never runs.
		if _, err := top.Cancel(ids[3]); err != nil {
			t.Fatal(err)
		}
		if s := state(t, tb, ids[3]); s != task.Canceled {
			t.Errorf("cancelled queued task state = %v, want canceled", s)
		}
		close(releases[1])
		synctest.Wait()
		close(releases[0])
		synctest.Wait()
		close(releases[2])
		synctest.Wait()
		close(releases[4])
		synctest.Wait()
		wantStarted := []string{ids[0], ids[1], ids[2], ids[4]}
		slices.Sort(started[:2]) // the first two start together
		if diff := cmp.Diff(wantStarted, started); diff != "" {
			t.Errorf("start order (-want +got):\n%s", diff)
		}
	})
}

func TestTimeoutCountsFromStart(t *testing.T) {
	run(t, task.Options{MaxRunning: 1}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		first := mustSpawn(t, top, "shell", gate(release, ""))
		id, err := top.Spawn(task.Spec{Kind: "shell", Timeout: time.Minute}, block)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute) // queued time does not count
		synctest.Wait()
		if s := state(t, tb, id); s != task.Queued {
			t.Fatalf("state = %v, want queued", s)
		}
		close(release)
		synctest.Wait()
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if s := state(t, tb, id); s != task.Running {
			t.Fatalf("state 59s after start = %v, want running", s)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := top.Drain()
		if len(got) != 2 || got[0].ID != first || got[1].ID != id {
			t.Fatalf("Drain() = %v", got)
		}
		if got[1].State != task.TimedOut || !errors.Is(got[1].Err, task.ErrTimedOut) {
			t.Errorf("result = %v %v, want timed_out ErrTimedOut", got[1].State, got[1].Err)
		}
		if d := got[1].Finished.Sub(got[1].Started); d != time.Minute {
			t.Errorf("ran for %v, want 1m", d)
		}
	})
}

func TestPanicBecomesFailedWithStack(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "agent", func(context.Context, *task.Handle) (string, error) { panic("kaboom") })
		mustSpawn(t, top, "agent", func(context.Context, *task.Handle) (string, error) { panic(context.Canceled) })
		synctest.Wait()
		got := top.Drain()
		if len(got) != 2 {
			t.Fatalf("Drain() = %v, want 2 results", got)
		}
		slices.SortFunc(got, func(a, b task.Result) int { return strings.Compare(a.ID, b.ID) })
		var pe *task.PanicError
		if got[0].State != task.Failed || !errors.As(got[0].Err, &pe) || pe.Value != "kaboom" {
			t.Fatalf("result = %v %v, want failed with PanicError(kaboom)", got[0].State, got[0].Err)
		}
		if !strings.Contains(string(pe.Stack), "table_test.go") {
			t.Errorf("stack does not show the panicking function:\n%s", pe.Stack)
		}
		if got[1].State != task.Failed || !errors.Is(got[1].Err, context.Canceled) {
			t.Errorf("panic(err) result = %v %v, want failed unwrapping to the error", got[1].State, got[1].Err)
		}
	})
}

func TestCloseCancelsWaitsAndIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), task.Options{MaxRunning: 1})
		top := tb.View("")
		returned := false
		running := mustSpawn(t, top, "shell", func(ctx context.Context, _ *task.Handle) (string, error) {
			<-ctx.Done()
			time.Sleep(time.Second) // slow to wind down
			returned = true
			return "", nil
		})
		queued := mustSpawn(t, top, "shell", block)
		synctest.Wait()
		if err := tb.Close(t.Context()); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if !returned {
			t.Error("Close returned before the task function did")
		}
		if err := tb.Close(t.Context()); err != nil {
			t.Errorf("second Close() = %v", err)
		}
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, block); !errors.Is(err, task.ErrClosed) {
			t.Errorf("Spawn after Close = %v, want ErrClosed", err)
		}
		got := top.Drain()
		if len(got) != 2 || got[0].ID != queued || got[1].ID != running {
			t.Fatalf("Drain() after Close = %v", got)
		}
		for _, r := range got {
			if r.State != task.Canceled || !errors.Is(r.Err, task.ErrClosed) {
				t.Errorf("%s = %v %v, want canceled ErrClosed", r.ID, r.State, r.Err)
			}
		}
	})
}

func TestCloseGivesUpWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), task.Options{})
		release := make(chan struct{})
		mustSpawn(t, tb.View(""), "shell", func(context.Context, *task.Handle) (string, error) {
			<-release // ignores cancellation
			return "", nil
		})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := tb.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close() = %v, want DeadlineExceeded", err)
		}
		close(release)
		if err := tb.Close(t.Context()); err != nil {
			t.Errorf("Close() after the task returned = %v", err)
		}
	})
}

func TestParentContextEndsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		tb := task.New(ctx, task.Options{MaxRunning: 1})
		top := tb.View("")
		mustSpawn(t, top, "shell", block)
		mustSpawn(t, top, "shell", block)
		synctest.Wait()
		stop := errors.New("session over")
		cancel(stop)
		synctest.Wait()
		for _, r := range top.Drain() {
			if r.State != task.Canceled || !errors.Is(r.Err, stop) {
				t.Errorf("%s = %v %v, want canceled with the parent's cause", r.ID, r.State, r.Err)
			}
		}
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, block); !errors.Is(err, task.ErrClosed) {
			t.Errorf("Spawn after the parent ended = %v, want ErrClosed", err)
		}
		if err := tb.Close(t.Context()); err != nil {
			t.Error(err)
		}
	})
}

func TestMaxTasksBoundsWhatCannotBeEvicted(t *testing.T) {
	run(t, task.Options{MaxTasks: 2}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "shell", block)
		mustSpawn(t, top, "shell", returns("done"))
		synctest.Wait()
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, block); !errors.Is(err, task.ErrFull) {
			t.Fatalf("third Spawn = %v, want ErrFull (one running, one undelivered)", err)
		}
		top.Drain()
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, block); err != nil {
			t.Errorf("Spawn after Drain = %v, want room", err)
		}
	})
}

func TestResultTextAndTraceAreCapped(t *testing.T) {
	run(t, task.Options{MaxResultBytes: 10, MaxTrace: 3}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "agent", func(_ context.Context, h *task.Handle) (string, error) {
			for i := range 5 {
				h.Trace(fmt.Sprintf("step %d", i))
			}
			h.Trace(strings.Repeat("x", 600))
			return "héllo wörld, and more", nil
		})
		synctest.Wait()
		got := top.Drain()[0]
		if want := "héllo wö…(+13 more bytes)"; got.Text != want {
			t.Errorf("Text = %q, want %q", got.Text, want)
		}
		want := []string{"…(3 earlier trace lines dropped)", "step 3", "step 4", strings.Repeat("x", 512) + "…(+88 more bytes)"}
		if diff := cmp.Diff(want, got.Trace); diff != "" {
			t.Errorf("Trace (-want +got):\n%s", diff)
		}
	})
}

func TestProgressAndExitCodeShowInInfo(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		step := make(chan struct{})
		id := mustSpawn(t, top, "shell", func(ctx context.Context, h *task.Handle) (string, error) {
			h.Progress(3, "running tool bash")
			<-step
			time.Sleep(time.Minute)
			h.Activity("reading output")
			h.SetExitCode(7)
			return "", nil
		})
		synctest.Wait()
		start := time.Now()
		info, _ := tb.Info(id)
		if info.Iteration != 3 || info.Activity != "running tool bash" || !info.LastActivity.Equal(start) {
			t.Errorf("Info = %+v, want iteration 3, activity, last activity now", info)
		}
		close(step)
		time.Sleep(time.Minute)
		synctest.Wait()
		r := top.Drain()[0]
		if r.Iteration != 3 || r.Activity != "reading output" || r.ExitCode == nil || *r.ExitCode != 7 {
			t.Errorf("Result = %+v", r.Info)
		}
		if silent := r.Finished.Sub(r.LastActivity); silent != 0 {
			t.Errorf("silent for %v at the end, want 0", silent)
		}
		*r.ExitCode = 99 // a snapshot is the caller's: it must not reach the task
		if again, _ := tb.Info(id); again.ExitCode == nil || *again.ExitCode != 7 {
			t.Errorf("Info().ExitCode = %v after a caller changed an earlier snapshot, want 7", again.ExitCode)
		}
	})
}

// TestNoExitCodeIsNil: a task that reports no exit code has a nil ExitCode
// in its snapshots, not a zero one.
func TestNoExitCodeIsNil(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) { return "done", nil })
		synctest.Wait()
		if r := top.Drain()[0]; r.ExitCode != nil {
			t.Errorf("ExitCode = %d, want nil", *r.ExitCode)
		}
	})
}

func TestResultDoesNotDeliver(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release := make(chan struct{})
		id := mustSpawn(t, top, "agent", gate(release, "the answer"))
		synctest.Wait()
		if r, ok, err := tb.Result(id); ok || err != nil || r.State != task.Running {
			t.Errorf("Result(%s) while running = %+v, %v, %v; want not ok, running", id, r, ok, err)
		}
		close(release)
		synctest.Wait()
		if r, ok, err := tb.Result(id); !ok || err != nil || r.Text != "the answer" || r.Delivered {
			t.Errorf("Result(%s) = %+v, %v, %v; want the answer, undelivered", id, r, ok, err)
		}
		if got := top.Drain(); len(got) != 1 || got[0].Text != "the answer" {
			t.Errorf("Drain() after Result = %v, want the result still delivered once", got)
		}
		if _, _, err := tb.Result("agent:99"); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Result(agent:99) error = %v, want ErrNotFound", err)
		}
	})
}

// TestCancelCauseIsWhatTheOwnerIsTold: a task stopped with CancelCause
// (an operator, from outside the session) ends canceled with that cause
// as its error, queued or running, and a finished task is left alone.
func TestCancelCauseIsWhatTheOwnerIsTold(t *testing.T) {
	run(t, task.Options{MaxRunning: 1}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		cause := fmt.Errorf("stopped by an operator: %w", task.ErrCanceled)
		block := func(ctx context.Context, _ *task.Handle) (string, error) {
			<-ctx.Done()
			return "", context.Cause(ctx)
		}
		running := mustSpawn(t, top, "shell", block)
		queued := mustSpawn(t, top, "shell", block)
		synctest.Wait()
		for _, id := range []string{queued, running} {
			if done, err := tb.CancelCause(id, cause); done || err != nil {
				t.Fatalf("CancelCause(%s) = %v, %v", id, done, err)
			}
		}
		synctest.Wait()
		for _, id := range []string{running, queued} {
			r, ok, err := tb.Result(id)
			if !ok || err != nil || r.State != task.Canceled || r.Err != cause || !errors.Is(r.Err, task.ErrCanceled) {
				t.Errorf("Result(%s) = %v %v (ok %v, %v), want canceled with the operator's cause", id, r.State, r.Err, ok, err)
			}
		}
		if done, err := tb.CancelCause(running, cause); !done || err != nil {
			t.Errorf("CancelCause of a finished task = %v, %v; want true, nil", done, err)
		}
	})
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"shell:3": true, "agent:12": true, "my-kind:1": true,
		"shell:0": false, "shell:007": false, "shell:+3": false, "shell:-3": false, "shell:": false, ":3": false,
		"3": false, "1e400": false, "0x1F": false, "shell:1e4": false, "she ll:3": false, "shell:99999999999999999999": false, "": false,
	} {
		if got := task.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}
