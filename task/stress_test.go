package task_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/offstage/offstage/task"
)

// TestStressEveryResultDeliveredExactlyOnce runs thousands of tasks with
// concurrent spawns, completions, failures, panics, cancels, drains and
// waits, and checks that every task's result reached its owner exactly once
// and that nothing runs after Close.
func TestStressEveryResultDeliveredExactlyOnce(t *testing.T) {
	const (
		spawners    = 8
		perSpawner  = 600
		drainers    = 3
		waiters     = 4
		cancellers  = 2
		totalSpawns = spawners * perSpawner
	)
	tb := task.New(t.Context(), task.Options{MaxRunning: 16, MaxTasks: totalSpawns, MaxRetained: 100})
	top := tb.View("")

	var (
		mu        sync.Mutex
		spawned   []string
		dones     []<-chan struct{}
		delivered = make(map[string]int)
		states    = make(map[task.State]int)
	)
	record := func(rs []task.Result) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			delivered[r.ID]++
			states[r.State]++
			if !r.State.Finished() {
				t.Errorf("delivered %s in state %v", r.ID, r.State)
			}
		}
	}
	pick := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(spawned) == 0 {
			return ""
		}
		return spawned[r.IntN(len(spawned))]
	}

	bodies := []task.Func{
		returns("ok"),
		func(context.Context, *task.Handle) (string, error) { return "", errors.New("failed") },
		func(context.Context, *task.Handle) (string, error) { panic("boom") },
		block,
		func(ctx context.Context, h *task.Handle) (string, error) {
			h.Progress(1, "sleeping")
			select {
			case <-time.After(time.Duration(rand.IntN(200)) * time.Microsecond):
				return "slept", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		},
	}

	stop := make(chan struct{})
	var helpers sync.WaitGroup
	loop := func(seed uint64, f func(r *rand.Rand)) {
		helpers.Go(func() {
			r := rand.New(rand.NewPCG(seed, 7))
			for {
				select {
				case <-stop:
					return
				default:
					f(r)
				}
			}
		})
	}
	for i := range drainers {
		loop(uint64(i), func(*rand.Rand) {
			record(top.Drain())
			select {
			case <-top.Ready():
			case <-time.After(time.Millisecond):
			}
		})
	}
	for i := range waiters {
		loop(uint64(100+i), func(r *rand.Rand) {
			ids := []string{pick(r), pick(r)}
			if ids[0] == "" {
				time.Sleep(10 * time.Microsecond)
				return
			}
			mode := task.Any
			if r.IntN(2) == 0 {
				mode = task.All
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(500))*time.Microsecond)
			defer cancel()
			res, err := top.Wait(ctx, ids, mode)
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, task.ErrNotFound) {
				t.Errorf("Wait(%v) = %v", ids, err)
			}
			record(res.Done)
		})
	}
	for i := range cancellers {
		loop(uint64(200+i), func(r *rand.Rand) {
			if id := pick(r); id != "" {
				if _, err := top.Cancel(id); err != nil && !errors.Is(err, task.ErrNotFound) {
					t.Errorf("Cancel(%s) = %v", id, err)
				}
			}
			time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
		})
	}

	var spawning sync.WaitGroup
	for i := range spawners {
		spawning.Go(func() {
			r := rand.New(rand.NewPCG(uint64(300+i), 7))
			for range perSpawner {
				// Tasks that block until cancelled time out soon, or the
				// run queue would stall behind them.
				spec := task.Spec{Kind: "stress", Timeout: time.Duration(100+r.IntN(400)) * time.Microsecond}
				id, err := top.Spawn(spec, bodies[r.IntN(len(bodies))])
				if err != nil {
					t.Errorf("Spawn() = %v", err)
					return
				}
				done, err := top.Done(id)
				if err != nil {
					t.Errorf("Done(%s) = %v", id, err)
					return
				}
				mu.Lock()
				spawned = append(spawned, id)
				dones = append(dones, done)
				mu.Unlock()
			}
		})
	}
	spawning.Wait()
	for _, done := range dones {
		<-done
	}
	if err := tb.Close(t.Context()); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	close(stop)
	helpers.Wait()
	record(top.Drain())

	for _, info := range tb.List() {
		if !info.State.Finished() {
			t.Errorf("%s is %v after Close", info.ID, info.State)
		}
	}
	if len(spawned) != totalSpawns {
		t.Fatalf("spawned %d tasks, want %d", len(spawned), totalSpawns)
	}
	for _, id := range spawned {
		if n := delivered[id]; n != 1 {
			t.Errorf("%s delivered %d times, want exactly once", id, n)
		}
	}
	if len(delivered) != totalSpawns {
		t.Errorf("%d distinct results delivered, want %d", len(delivered), totalSpawns)
	}
	t.Logf("final states: %v", states)
	for _, s := range []task.State{task.Completed, task.Failed, task.Canceled, task.TimedOut} {
		if states[s] == 0 {
			t.Errorf("no task ended %v: the stress mix does not exercise it", s)
		}
	}
}
