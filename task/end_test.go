package task_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/task"
)

// budgetError stands for a cause another package defines (a token
// budget spent): it names the end by implementing task.Ender.
type budgetError struct{ spent int }

func (e *budgetError) Error() string                { return fmt.Sprintf("budget of %d tokens spent", e.spent) }
func (e *budgetError) EndedBy() (by, reason string) { return task.ByLimit, e.Error() }
func (e *budgetError) Is(target error) bool         { return target == task.ErrCanceled }

// ended returns who ended task id and why, failing if it has not
// finished.
func ended(t *testing.T, tb *task.Table, id string) (string, string) {
	t.Helper()
	info, err := tb.Info(id)
	if err != nil || !info.State.Finished() {
		t.Fatalf("Info(%s) = %+v, %v; want finished", id, info, err)
	}
	return info.EndedBy, info.EndReason
}

func wantEnd(t *testing.T, tb *task.Table, id, by, reason string) {
	t.Helper()
	gotBy, gotReason := ended(t, tb, id)
	if gotBy != by || !strings.Contains(gotReason, reason) {
		t.Errorf("%s ended by %q (%q), want %q (containing %q)", id, gotBy, gotReason, by, reason)
	}
}

// TestEveryEndHasAName: each way a task ends records who ended it, and
// the owner's Result and the recorder hear the same.
func TestEveryEndHasAName(t *testing.T) {
	for _, tc := range []struct {
		name       string
		by, reason string
		end        func(t *testing.T, tb *task.Table) string // ends a task, returns its id
	}{
		{"completed", task.BySelf, "it finished", func(t *testing.T, tb *task.Table) string {
			return mustSpawn(t, tb.View(""), "agent", returns("done"))
		}},
		{"exited", task.BySelf, "it exited with status 0", func(t *testing.T, tb *task.Table) string {
			return mustSpawn(t, tb.View(""), "shell", func(_ context.Context, h *task.Handle) (string, error) {
				h.SetExitCode(0)
				return "ok", nil
			})
		}},
		{"failed", task.BySelf, "it failed: boom", func(t *testing.T, tb *task.Table) string {
			return mustSpawn(t, tb.View(""), "agent", func(context.Context, *task.Handle) (string, error) {
				return "", errors.New("boom")
			})
		}},
		{"panicked", task.BySelf, "it failed: task panicked: oops", func(t *testing.T, tb *task.Table) string {
			return mustSpawn(t, tb.View(""), "agent", func(context.Context, *task.Handle) (string, error) { panic("oops") })
		}},
		{"model", task.ByModel, "task_cancel", func(t *testing.T, tb *task.Table) string {
			id := mustSpawn(t, tb.View(""), "shell", block)
			tb.View("").Cancel(id)
			return id
		}},
		{"user", task.ByUser, "cancelled from the session", func(t *testing.T, tb *task.Table) string {
			id := mustSpawn(t, tb.View(""), "shell", block)
			tb.Cancel(id)
			return id
		}},
		{"operator", task.ByOperator, "runaway", func(t *testing.T, tb *task.Table) string {
			id := mustSpawn(t, tb.View(""), "shell", block)
			tb.CancelCause(id, task.Ended(task.ByOperator, "runaway"))
			return id
		}},
		{"timeout", task.ByTimeout, "timeout of 1m0s", func(t *testing.T, tb *task.Table) string {
			id, err := tb.View("").Spawn(task.Spec{Kind: "shell", Timeout: time.Minute}, block)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute) // fake time
			return id
		}},
		{"limit by cause", task.ByLimit, "budget of 100 tokens spent", func(t *testing.T, tb *task.Table) string {
			id := mustSpawn(t, tb.View(""), "agent", block)
			tb.CancelCause(id, &budgetError{100})
			return id
		}},
		{"limit by error", task.ByLimit, "budget of 7 tokens spent", func(t *testing.T, tb *task.Table) string {
			return mustSpawn(t, tb.View(""), "agent", func(context.Context, *task.Handle) (string, error) {
				return "", fmt.Errorf("agent stopped: %w", &budgetError{7})
			})
		}},
		{"queued, by the model", task.ByModel, "task_cancel", func(t *testing.T, tb *task.Table) string {
			mustSpawn(t, tb.View(""), "shell", block) // takes the only slot
			id := mustSpawn(t, tb.View(""), "shell", block)
			tb.View("").Cancel(id)
			return id
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &changes{}
			run(t, task.Options{MaxRunning: 1, Recorder: rec}, func(t *testing.T, tb *task.Table) {
				id := tc.end(t, tb)
				synctest.Wait()
				wantEnd(t, tb, id, tc.by, tc.reason)
				for _, r := range tb.View("").Drain() {
					if r.ID == id && r.EndedBy != tc.by {
						t.Errorf("Result of %s ended by %q, want %q", id, r.EndedBy, tc.by)
					}
				}
				if c, ok := rec.finished(id); !ok || c.EndedBy != tc.by || !strings.Contains(c.EndReason, tc.reason) {
					t.Errorf("recorded end of %s = %+v, want %s", id, c, tc.by)
				}
			})
		})
	}
}

// finished returns the recorded EventFinished change of id.
func (c *changes) finished(id string) (task.Change, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.all {
		if ch.ID == id && ch.Type == task.EventFinished {
			return ch, true
		}
	}
	return task.Change{}, false
}

// TestCascadeNamesTheParent: a task ended because the agent that owns it
// ended is the parent's, and says which task and why; a task the session's
// close reaches through its owner is the session's, not its parent's.
func TestCascadeNamesTheParent(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		var child string
		owner := mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			child = mustSpawn(t, h.View(), "shell", block)
			<-ctx.Done()
			return "", context.Cause(ctx)
		})
		synctest.Wait()
		top.Cancel(owner)
		synctest.Wait()
		wantEnd(t, tb, owner, task.ByModel, "task_cancel")
		wantEnd(t, tb, child, task.ByParent, "its owner "+owner+" ended (model: task_cancel)")
	})
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		var child string
		owner := mustSpawn(t, top, "agent", func(_ context.Context, h *task.Handle) (string, error) {
			child = mustSpawn(t, h.View(), "shell", block)
			return "answered", nil
		})
		synctest.Wait()
		wantEnd(t, tb, child, task.ByParent, "its owner "+owner+" ended (self: it finished)")
	})
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		var child string
		owner, _ := top.Spawn(task.Spec{Kind: "agent", Timeout: time.Second}, func(ctx context.Context, h *task.Handle) (string, error) {
			child = mustSpawn(t, h.View(), "shell", block)
			<-ctx.Done()
			return "", context.Cause(ctx)
		})
		time.Sleep(time.Second)
		synctest.Wait()
		wantEnd(t, tb, owner, task.ByTimeout, "timeout of 1s")
		wantEnd(t, tb, child, task.ByParent, "its owner "+owner+" ended (timeout")
	})
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), task.Options{MaxRunning: 2})
		top := tb.View("")
		var child, queuedChild string
		owner := mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			child = mustSpawn(t, h.View(), "shell", block)
			queuedChild = mustSpawn(t, h.View(), "shell", block)
			<-ctx.Done()
			return "", context.Cause(ctx)
		})
		queued := mustSpawn(t, top, "shell", block)
		synctest.Wait()
		why := &task.EndError{By: task.BySession, Reason: "the MCP client went away", Err: task.ErrClosed}
		if err := tb.CloseCause(t.Context(), why); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{owner, child, queued, queuedChild} {
			wantEnd(t, tb, id, task.BySession, "the MCP client went away")
		}
		for _, r := range top.Drain() {
			if !errors.Is(r.Err, task.ErrClosed) {
				t.Errorf("%s Err = %v, want ErrClosed", r.ID, r.Err)
			}
		}
	})
}

// TestSessionEnds: a plain Close and the end of the table's context are
// the session's.
func TestSessionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := task.New(t.Context(), task.Options{})
		id := mustSpawn(t, tb.View(""), "shell", block)
		synctest.Wait()
		tb.Close(t.Context())
		wantEnd(t, tb, id, task.BySession, "the session closed")
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		tb := task.New(ctx, task.Options{})
		id := mustSpawn(t, tb.View(""), "shell", block)
		synctest.Wait()
		cancel(task.Ended(task.BySupervisor, "offstage serve was stopped"))
		synctest.Wait()
		wantEnd(t, tb, id, task.BySupervisor, "offstage serve was stopped")
		tb.Close(t.Context())
	})
}

func TestEndOf(t *testing.T) {
	for _, tc := range []struct {
		state task.State
		err   error
		by    string
	}{
		{task.Completed, nil, task.BySelf},
		{task.Failed, errors.New("x"), task.BySelf},
		{task.TimedOut, task.ErrTimedOut, task.ByTimeout},
		{task.Canceled, task.ErrOwnerDone, task.ByParent},
		{task.Canceled, task.ErrClosed, task.BySession},
		{task.Canceled, task.ErrCanceled, task.ByUser},
		{task.Canceled, context.Canceled, task.BySession},
		{task.Canceled, errors.Join(errors.New("a"), &budgetError{1}), task.ByLimit},
		{task.Failed, &task.EndError{By: "", Err: &budgetError{1}}, task.ByLimit}, // no opinion: asks what it wraps
	} {
		if by, _ := task.EndOf(tc.state, tc.err); by != tc.by {
			t.Errorf("EndOf(%v, %v) = %q, want %q", tc.state, tc.err, by, tc.by)
		}
	}
	// A cancellation whose cause says more (signal.NotifyContext's names
	// the signal) says it.
	for err, want := range map[error]string{
		context.Canceled: "the session's context was cancelled",
		signalCause("terminated signal received"): "the session's context was cancelled: terminated signal received",
	} {
		if by, reason := task.EndOf(task.Canceled, err); by != task.BySession || reason != want {
			t.Errorf("EndOf(canceled, %v) = %q, %q; want session, %q", err, by, reason, want)
		}
	}
}

// signalCause is a cancellation cause as signal.NotifyContext gives one.
type signalCause string

func (s signalCause) Error() string        { return string(s) }
func (s signalCause) Is(target error) bool { return target == context.Canceled }
