package task_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/task"
)

// spawnAgent starts an agent task that starts one child shell through its
// own view, reports the child's id on ids, and then runs until release is
// closed or it is cancelled.
func spawnAgent(t *testing.T, top *task.View, release <-chan struct{}, ids chan<- string) string {
	t.Helper()
	return mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
		child, err := h.View().Spawn(task.Spec{Kind: "shell", Label: "sleep"}, block)
		if err != nil {
			return "", err
		}
		ids <- child
		return gate(release, "agent done")(ctx, h)
	})
}

func TestViewsSeeOnlyTheirOwnersTasks(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release, ids := make(chan struct{}), make(chan string, 1)
		agent := spawnAgent(t, top, release, ids)
		child := <-ids
		synctest.Wait()
		sub := tb.View(agent)

		if diff := cmp.Diff([]string{agent}, infoIDs(top.List())); diff != "" {
			t.Errorf("top.List() (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{child}, infoIDs(sub.List())); diff != "" {
			t.Errorf("sub.List() (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{agent, child}, infoIDs(tb.List())); diff != "" {
			t.Errorf("tb.List() (-want +got):\n%s", diff)
		}
		if info, _ := tb.Info(child); info.Owner != agent {
			t.Errorf("child owner = %q, want %q", info.Owner, agent)
		}

		// Every scoped call refuses a foreign id with ErrNotOwner, and an
		// unknown one with ErrNotFound.
		ctx := t.Context()
		calls := map[string]func(v *task.View, id string) error{
			"Info":   func(v *task.View, id string) error { _, err := v.Info(id); return err },
			"Peek":   func(v *task.View, id string) error { _, err := v.Peek(id, 0); return err },
			"Cancel": func(v *task.View, id string) error { _, err := v.Cancel(id); return err },
			"Done":   func(v *task.View, id string) error { _, err := v.Done(id); return err },
			"Output": func(v *task.View, id string) error { _, err := v.Output(id); return err },
			"Wait": func(v *task.View, id string) error {
				_, err := v.Wait(ctx, []string{id}, task.Any)
				return err
			},
		}
		for name, call := range calls {
			if err := call(top, child); !errors.Is(err, task.ErrNotOwner) {
				t.Errorf("top.%s(child) = %v, want ErrNotOwner", name, err)
			}
			if err := call(sub, agent); !errors.Is(err, task.ErrNotOwner) {
				t.Errorf("sub.%s(agent) = %v, want ErrNotOwner", name, err)
			}
			if err := call(top, "shell:999"); !errors.Is(err, task.ErrNotFound) {
				t.Errorf("top.%s(shell:999) = %v, want ErrNotFound", name, err)
			}
		}
		// ... and refusing never cancelled anything.
		synctest.Wait()
		if s := state(t, tb, child); s != task.Running {
			t.Errorf("child state after a foreign Cancel = %v, want running", s)
		}
		// The table's global methods, for UIs, reach every task.
		if _, err := tb.Output(child); err != nil {
			t.Errorf("tb.Output(child) = %v", err)
		}
		if _, err := tb.Done(child); err != nil {
			t.Errorf("tb.Done(child) = %v", err)
		}
		if n := top.CancelAll(); n != 1 {
			t.Errorf("top.CancelAll() = %d, want 1 (the agent only)", n)
		}
		close(release)
	})
}

func TestCancellingAnOwnerCascades(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		ids := make(chan string, 1)
		agent := spawnAgent(t, top, make(chan struct{}), ids)
		child := <-ids
		synctest.Wait()
		if _, err := top.Cancel(agent); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for _, id := range []string{agent, child} {
			if s := state(t, tb, id); s != task.Canceled {
				t.Errorf("state(%s) = %v, want canceled", id, s)
			}
		}
	})
}

func TestOwnerEndingCancelsItsChildren(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		release, ids := make(chan struct{}), make(chan string, 1)
		agent := spawnAgent(t, top, release, ids)
		child := <-ids
		close(release) // the agent completes while its child still runs
		synctest.Wait()
		if s := state(t, tb, agent); s != task.Completed {
			t.Errorf("agent state = %v, want completed", s)
		}
		r, err := tb.View(agent).Wait(t.Context(), []string{child}, task.All)
		if err != nil {
			t.Fatal(err)
		}
		// The owner has ended, so nothing delivers to it: the result is
		// reported, not consumed.
		if len(r.Earlier) != 1 || r.Earlier[0].State != task.Canceled {
			t.Errorf("Wait on the orphaned child = %+v, want it canceled", r)
		}
		if _, err := tb.View(agent).Spawn(task.Spec{Kind: "shell"}, block); !errors.Is(err, task.ErrOwnerDone) {
			t.Errorf("Spawn under a finished owner = %v, want ErrOwnerDone", err)
		}
		if _, err := tb.View(agent).Spawn(task.Spec{Kind: "shell"}, block); !errors.Is(err, task.ErrOwnerDone) {
			t.Errorf("second Spawn under a finished owner = %v, want ErrOwnerDone", err)
		}
	})
}

func TestChildOfFinishedOwnerHasCauseOwnerDone(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		causes := make(chan error, 1)
		mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			_, err := h.View().Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, _ *task.Handle) (string, error) {
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return "", nil
			})
			return "", err
		})
		synctest.Wait()
		if err := <-causes; !errors.Is(err, task.ErrOwnerDone) {
			t.Errorf("child's cause = %v, want ErrOwnerDone", err)
		}
	})
}

func TestQueuedChildEndsWhenItsOwnerIsCancelled(t *testing.T) {
	run(t, task.Options{MaxRunning: 2}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		kids, hold := make(chan string, 2), make(chan struct{})
		agent := mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			for range 2 {
				id, err := h.View().Spawn(task.Spec{Kind: "shell"}, block)
				if err != nil {
					return "", err
				}
				kids <- id
			}
			<-ctx.Done()
			<-hold // ignores cancellation for a while: keeps its slot
			return "", nil
		})
		first, second := <-kids, <-kids
		synctest.Wait()
		if s := state(t, tb, second); s != task.Queued {
			t.Fatalf("second child state = %v, want queued", s)
		}
		tb.Cancel(agent)
		synctest.Wait()
		// The queued child ends through its context without waiting for a
		// slot: the agent still holds one.
		for _, id := range []string{first, second} {
			if s := state(t, tb, id); s != task.Canceled {
				t.Errorf("state(%s) = %v, want canceled", id, s)
			}
		}
		if s := state(t, tb, agent); s != task.Running {
			t.Errorf("agent state = %v, want still running (it ignores cancellation)", s)
		}
		close(hold)
	})
}

// TestViewOfAnUnknownOwnerIsEmpty pins what Table.View documents for an
// owner that is not in the table (issue 21: "View(\"agent:99\") returns a
// Ready() that never fires"): every call says so or is empty, none blocks.
func TestViewOfAnUnknownOwnerIsEmpty(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		id := mustSpawn(t, tb.View(""), "shell", block)
		ghost := tb.View("agent:99")
		if _, err := tb.Info("agent:99"); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Table.Info(agent:99) = %v, want ErrNotFound: the way to check an owner", err)
		}
		if _, err := ghost.Spawn(task.Spec{Kind: "shell"}, block); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Spawn = %v, want ErrNotFound", err)
		}
		if l := ghost.List(); len(l) != 0 {
			t.Errorf("List() = %v, want nothing", l)
		}
		if _, err := ghost.Info(id); !errors.Is(err, task.ErrNotOwner) {
			t.Errorf("Info(%s) = %v, want ErrNotOwner", id, err)
		}
		if r := ghost.Drain(); r != nil {
			t.Errorf("Drain() = %v, want nil", r)
		}
		if ghost.Ready() != nil {
			t.Error("Ready() is not nil: the doc promises a nil channel")
		}
	})
}
