package task_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/offstage/offstage/task"
)

// Benchmark names are fixed so results can be compared over time; run them
// with: go test -run '^$' -bench . -benchmem ./task/

func noop(context.Context, *task.Handle) (string, error) { return "", nil }

// BenchmarkBaselineGoroutine is the yardstick for BenchmarkSpawnDrain: start
// a goroutine that sends a result on a channel, receive it.
func BenchmarkBaselineGoroutine(b *testing.B) {
	ch := make(chan string, 1)
	f := func() { ch <- "" }
	for b.Loop() {
		go f()
		<-ch
	}
}

// BenchmarkSpawnDrain: spawn a no-op task, wait for the wake-up, drain its
// result.
func BenchmarkSpawnDrain(b *testing.B) {
	tb := task.New(b.Context(), task.Options{})
	defer tb.Close(context.Background())
	top := tb.View("")
	ready := top.Ready()
	for b.Loop() {
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, noop); err != nil {
			b.Fatal(err)
		}
		<-ready
		if rs := top.Drain(); len(rs) != 1 {
			b.Fatalf("Drain() returned %d results, want 1", len(rs))
		}
	}
}

// fill starts n tasks that run until the table closes.
func fill(b *testing.B, n int) (*task.Table, *task.View) {
	b.Helper()
	tb := task.New(b.Context(), task.Options{MaxRunning: n, MaxTasks: n + 1})
	top := tb.View("")
	for range n {
		if _, err := top.Spawn(task.Spec{Kind: "agent"}, block); err != nil {
			b.Fatal(err)
		}
	}
	return tb, top
}

// BenchmarkDrainIdle: drain when nothing has finished, with n tasks
// running. It must not depend on n.
func BenchmarkDrainIdle(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprint("running=", n), func(b *testing.B) {
			tb, top := fill(b, n)
			defer tb.Close(context.Background())
			for b.Loop() {
				if rs := top.Drain(); rs != nil {
					b.Fatal("Drain() returned results")
				}
			}
		})
	}
}

// BenchmarkWaitWake: spawn a task that finishes at once; Wait on it
// returns with its result.
func BenchmarkWaitWake(b *testing.B) {
	tb := task.New(b.Context(), task.Options{})
	defer tb.Close(context.Background())
	top := tb.View("")
	ctx := b.Context()
	ids := make([]string, 1)
	for b.Loop() {
		id, err := top.Spawn(task.Spec{Kind: "shell"}, noop)
		if err != nil {
			b.Fatal(err)
		}
		ids[0] = id
		r, err := top.Wait(ctx, ids, task.Any)
		if err != nil || len(r.Done) != 1 {
			b.Fatalf("Wait() = %+v, %v", r, err)
		}
	}
}

// BenchmarkList: the global list of a table of 10,000 tasks, in id order.
func BenchmarkList(b *testing.B) {
	const n = 10000
	b.Run(fmt.Sprint("tasks=", n), func(b *testing.B) {
		tb, _ := fill(b, n)
		defer tb.Close(context.Background())
		for b.Loop() {
			if got := tb.List(); len(got) != n {
				b.Fatalf("List() has %d tasks, want %d", len(got), n)
			}
		}
	})
}

// BenchmarkRunningTaskMemory reports the bytes held per idle running task,
// its goroutine's stack included.
func BenchmarkRunningTaskMemory(b *testing.B) {
	const n = 10000
	var perTask float64
	for b.Loop() {
		before := heldBytes()
		tb, _ := fill(b, n)
		after := heldBytes()
		perTask = float64(after-before) / n
		b.StopTimer()
		tb.Close(context.Background())
		b.StartTimer()
	}
	b.ReportMetric(perTask, "B/task")
}

func heldBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

type nopRecorder struct{}

func (nopRecorder) Record(*task.Change) {}

// BenchmarkSpawnDrainRecorder: BenchmarkSpawnDrain with a Recorder that
// keeps nothing: what handing every change to a recorder costs the table.
func BenchmarkSpawnDrainRecorder(b *testing.B) {
	tb := task.New(b.Context(), task.Options{Recorder: nopRecorder{}})
	defer tb.Close(context.Background())
	top := tb.View("")
	ready := top.Ready()
	for b.Loop() {
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, noop); err != nil {
			b.Fatal(err)
		}
		<-ready
		if rs := top.Drain(); len(rs) != 1 {
			b.Fatalf("Drain() returned %d results, want 1", len(rs))
		}
	}
}

// BenchmarkAppendBriefs: the same list as BenchmarkList, as compact
// Briefs into the slice of the last call.
func BenchmarkAppendBriefs(b *testing.B) {
	const n = 10000
	b.Run(fmt.Sprint("tasks=", n), func(b *testing.B) {
		tb, _ := fill(b, n)
		defer tb.Close(context.Background())
		var buf []task.Brief
		for b.Loop() {
			if buf, _ = tb.AppendBriefs(buf[:0], task.Query{}); len(buf) != n {
				b.Fatalf("AppendBriefs() has %d tasks, want %d", len(buf), n)
			}
		}
	})
}

// BenchmarkAppendBriefsPage: one page of 50 of the 10,000, running ones,
// as task_list asks for.
func BenchmarkAppendBriefsPage(b *testing.B) {
	const n = 10000
	tb, _ := fill(b, n)
	defer tb.Close(context.Background())
	var buf []task.Brief
	q := task.Query{States: []task.State{task.Queued, task.Running}, Limit: 50}
	for b.Loop() {
		if buf, _ = tb.AppendBriefs(buf[:0], q); len(buf) != 50 {
			b.Fatalf("AppendBriefs() has %d tasks, want 50", len(buf))
		}
	}
}
