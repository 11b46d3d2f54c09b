package task_test

import (
	"context"
	"testing"

	"github.com/offstage/offstage/task"
)

// A task's usage includes what the tasks it started spent; a finished
// task's stays as it ended, and the top level has no task to add to.
func TestUsageRollsUpToOwners(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		call := task.Usage{InputTokens: 100, OutputTokens: 10, CachedInputTokens: 40, ModelCalls: 1}
		release := make(chan struct{})
		childDone := make(chan string, 1)
		parent := mustSpawn(t, tb.View(""), "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			h.AddUsage(call)
			child := mustSpawn(t, h.View(), "agent", func(_ context.Context, ch *task.Handle) (string, error) {
				if got, want := ch.AddUsage(call), call; got != want {
					t.Errorf("child AddUsage() = %+v, want %+v", got, want)
				}
				ch.AddUsage(call)
				return "", nil
			})
			if _, err := h.View().Wait(ctx, []string{child}, task.All); err != nil {
				return "", err
			}
			childDone <- child
			<-release
			return "", nil
		})
		child := <-childDone
		info, _ := tb.Info(parent)
		if want := (task.Usage{InputTokens: 300, OutputTokens: 30, CachedInputTokens: 120, ModelCalls: 3}); info.Usage != want {
			t.Errorf("parent's Usage = %+v, want %+v (its own call and its child's two)", info.Usage, want)
		}
		info, _ = tb.Info(child)
		if want := call.Add(call); info.Usage != want {
			t.Errorf("child's Usage = %+v, want %+v", info.Usage, want)
		}
		close(release)
		r, err := tb.View("").Wait(t.Context(), []string{parent}, task.All)
		if err != nil || len(r.Done) != 1 || r.Done[0].Usage.ModelCalls != 3 {
			t.Errorf("Wait() = %+v, %v; want the parent's result with 3 model calls", r, err)
		}
	})
}

func TestChangeCarriesUsage(t *testing.T) {
	rec := &changes{}
	run(t, task.Options{Recorder: rec}, func(t *testing.T, tb *task.Table) {
		id := mustSpawn(t, tb.View(""), "agent", func(_ context.Context, h *task.Handle) (string, error) {
			h.AddUsage(task.Usage{OutputTokens: 5, ModelCalls: 1})
			return "", nil
		})
		tb.View("").Wait(t.Context(), []string{id}, task.All)
	})
	found := false
	for _, c := range rec.all {
		if c.Type != task.EventFinished {
			continue
		}
		found = true
		if c.Usage.OutputTokens != 5 {
			t.Errorf("the finish's Change.Usage = %+v, want 5 output tokens", c.Usage)
		}
	}
	if !found {
		t.Error("no finish recorded")
	}
}
