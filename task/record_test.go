package task_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/offstage/offstage/task"
)

type changes struct {
	mu  sync.Mutex
	all []task.Change
}

func (c *changes) Record(ch *task.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, *ch)
}

func TestRecorderSeesEveryChangeWithDetails(t *testing.T) {
	rec := &changes{}
	run(t, task.Options{Recorder: rec, FirstID: 41}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		id := mustSpawn(t, top, "shell", func(ctx context.Context, h *task.Handle) (string, error) {
			h.SetExitCode(2)
			return "the output", errors.New("exit status 2")
		})
		if id != "shell:42" {
			t.Errorf("first id = %s, want shell:42 after FirstID 41", id)
		}
		done, _ := top.Done(id)
		<-done
		top.Drain()
	})
	var types []string
	for _, c := range rec.all {
		types = append(types, c.Type.String())
		if c.Kind != "shell" || c.Label != "shell task" || c.ID != "shell:42" || c.Seq == 0 {
			t.Errorf("change %+v lacks the task's details", c)
		}
		if c.Type == task.EventFinished && (c.Result != "the output" || c.Err != "exit status 2" || c.ExitCode == nil || *c.ExitCode != 2 || c.State != task.Failed) {
			t.Errorf("finished change = %+v", c)
		}
	}
	if got := join(types); got != "spawned started finished delivered" {
		t.Errorf("changes %s", got)
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// TestFollowSeesNewEventsAndSaysWhenItFellBehind: Follow hands over the
// events appended after it started, in order, and one ErrEventsDropped
// when the log moved past it.
func TestFollowSeesNewEventsAndSaysWhenItFellBehind(t *testing.T) {
	run(t, task.Options{EventLogSize: 4}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "shell", noop) // before Follow: not seen
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		block := make(chan struct{})
		var got []string
		var dropped int
		followed := make(chan struct{})
		go func() {
			defer close(followed)
			tb.Events().Follow(ctx, func(e *task.Event, err error) {
				if err != nil {
					dropped++
					return
				}
				got = append(got, e.ID+" "+e.Type.String())
				if len(got) == 1 {
					<-block // fall behind while the table goes on
				}
			})
		}()
		synctest.Wait()
		id := mustSpawn(t, top, "shell", noop)
		synctest.Wait()
		for range 3 {
			mustSpawn(t, top, "shell", noop)
		}
		synctest.Wait()
		close(block)
		synctest.Wait()
		cancel()
		<-followed
		if len(got) == 0 || got[0] != id+" spawned" || dropped != 1 {
			t.Errorf("followed %q with %d drops, want %s spawned first and one drop", got, dropped, id)
		}
	})
}

// pacer counts Pace calls and, to prove it runs outside the table's
// lock, calls back into the table from Pace.
type pacer struct {
	tb    *task.Table
	paced int
	seen  []task.EventType
}

func (p *pacer) Record(c *task.Change) { p.seen = append(p.seen, c.Type) }
func (p *pacer) Pace() {
	p.paced++
	p.tb.List() // would deadlock if the table held its lock
}

// A Pacer is asked before every spawn, outside the table's lock, so a
// journal can slow a burst of spawns without stalling the table.
func TestPacerIsAskedBeforeEverySpawnOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{}
		tb := task.New(t.Context(), task.Options{Recorder: p})
		p.tb = tb
		defer tb.Close(context.Background())
		v := tb.View("")
		for range 3 {
			if _, err := v.Spawn(task.Spec{Kind: "shell"}, func(context.Context, *task.Handle) (string, error) { return "", nil }); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if p.paced != 3 {
			t.Errorf("Pace called %d times for 3 spawns, want 3", p.paced)
		}
	})
}

// TestFollowFromSeesWhatCameBeforeItRan: a follower whose goroutine starts
// late still hands over the events after the position taken before it
// started (agent.Session.Run's follower, on a loaded machine, missed the
// first events of a turn).
func TestFollowFromSeesWhatCameBeforeItRan(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		mustSpawn(t, top, "shell", noop) // before the position: not seen
		synctest.Wait()
		from := tb.Events().Last()
		id := mustSpawn(t, top, "shell", noop) // after it, before the follower runs
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		var got []string
		followed := make(chan struct{})
		go func() {
			defer close(followed)
			tb.Events().FollowFrom(ctx, from, func(e *task.Event, err error) {
				if e != nil && e.Type == task.EventSpawned {
					got = append(got, e.ID)
				}
			})
		}()
		synctest.Wait()
		cancel()
		<-followed
		if len(got) != 1 || got[0] != id {
			t.Errorf("followed spawns %q, want just %s", got, id)
		}
	})
}
