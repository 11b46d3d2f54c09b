package task_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/task"
)

// briefIDs returns the ids of briefs.
func briefIDs(bs []task.Brief) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

// Issue 35: a list of a thousand tasks is read a page at a time, narrowed
// by state and kind, without copying every task.
func TestAppendBriefsSelectsAndPages(t *testing.T) {
	run(t, task.Options{MaxRunning: 2}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		a := mustSpawn(t, top, "shell", block)
		b := mustSpawn(t, top, "agent", returns("done"))
		synctest.Wait() // a runs, b has completed
		c := mustSpawn(t, top, "shell", block)
		d := mustSpawn(t, top, "shell", block) // queued behind a and c
		e := mustSpawn(t, top, "agent", block) // queued
		synctest.Wait()
		tests := []struct {
			q    task.Query
			want []string
			more int
		}{
			{task.Query{}, []string{a, b, c, d, e}, 0},
			{task.Query{Kind: "shell"}, []string{a, c, d}, 0},
			{task.Query{States: []task.State{task.Completed}}, []string{b}, 0},
			{task.Query{States: []task.State{task.Queued, task.Running}, Kind: "shell"}, []string{a, c, d}, 0},
			{task.Query{States: []task.State{task.Queued}}, []string{d, e}, 0},
			{task.Query{Limit: 2}, []string{a, b}, 3},
			{task.Query{After: b, Limit: 2}, []string{c, d}, 1},
			{task.Query{After: e}, []string{}, 0},
			{task.Query{After: "nonsense", Kind: "agent"}, []string{b, e}, 0},
		}
		for _, tt := range tests {
			got, more := tb.AppendBriefs(nil, tt.q)
			if diff := cmp.Diff(tt.want, briefIDs(got)); diff != "" || more != tt.more {
				t.Errorf("AppendBriefs(%+v): more %d, want %d; ids (-want +got):\n%s", tt.q, more, tt.more, diff)
			}
		}
		// A brief says what a row shows.
		got, _ := tb.AppendBriefs(nil, task.Query{After: a, Limit: 1})
		if got[0].ID != b || got[0].Kind != "agent" || got[0].Label != "agent task" || got[0].State != task.Completed || got[0].Created.IsZero() {
			t.Errorf("brief of %s = %+v", b, got[0])
		}
		// Paging through with the last id as the cursor visits each task once.
		var all []string
		for q := (task.Query{Limit: 2}); ; {
			page, more := tb.AppendBriefs(nil, q)
			all = append(all, briefIDs(page)...)
			if more == 0 {
				break
			}
			q.After = page[len(page)-1].ID
		}
		if diff := cmp.Diff([]string{a, b, c, d, e}, all); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
		tb.CancelAll()
	})
}

// A view's briefs are its owner's tasks only.
func TestAppendBriefsOfAView(t *testing.T) {
	run(t, task.Options{}, func(t *testing.T, tb *task.Table) {
		top := tb.View("")
		started := make(chan string, 1)
		owner := mustSpawn(t, top, "agent", func(ctx context.Context, h *task.Handle) (string, error) {
			id, err := h.View().Spawn(task.Spec{Kind: "shell"}, block)
			if err != nil {
				return "", err
			}
			started <- id
			<-ctx.Done()
			return "", nil
		})
		child := <-started
		if got, _ := top.AppendBriefs(nil, task.Query{}); !cmp.Equal(briefIDs(got), []string{owner}) {
			t.Errorf("top's briefs = %v, want [%s]", briefIDs(got), owner)
		}
		if got, _ := tb.View(owner).AppendBriefs(nil, task.Query{}); !cmp.Equal(briefIDs(got), []string{child}) {
			t.Errorf("%s's briefs = %v, want [%s]", owner, briefIDs(got), child)
		}
		tb.CancelAll()
	})
}

// A list into the slice of the last one allocates nothing.
func TestAppendBriefsReusesTheSlice(t *testing.T) {
	tb, top := task.New(context.Background(), task.Options{}), (*task.View)(nil)
	defer tb.Close(context.Background())
	top = tb.View("")
	for range 100 {
		if _, err := top.Spawn(task.Spec{Kind: "agent"}, block); err != nil {
			t.Fatal(err)
		}
	}
	buf, _ := tb.AppendBriefs(nil, task.Query{})
	if n := testing.AllocsPerRun(10, func() { buf, _ = tb.AppendBriefs(buf[:0], task.Query{}) }); n != 0 {
		t.Errorf("AppendBriefs into a reused slice allocates %v times, want 0", n)
	}
}

// TestEventLogGrowsAsEventsCome (issue 35, item 2): each table allocated
// its whole event log up front, 110 KB of an idle MCP session's memory. It
// grows as events come, and keeps the same events as before.
func TestEventLogGrowsAsEventsCome(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const tables = 20
	for range tables {
		tb := task.New(context.Background(), task.Options{})
		tb.Close(context.Background())
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / tables; per > 16<<10 {
		t.Errorf("a new table allocates %d bytes, want at most 16 KiB", per)
	}
	// Across the growth and the wrap: 50 events in a log of 40.
	tb := task.New(context.Background(), task.Options{EventLogSize: 40})
	defer tb.Close(context.Background())
	top := tb.View("")
	for range 10 { // 5 events each: spawned, started, finished, delivered, and one more spawn below
		id, err := top.Spawn(task.Spec{Kind: "agent"}, returns("x"))
		if err != nil {
			t.Fatal(err)
		}
		done, _ := top.Done(id)
		<-done
		top.Drain()
	}
	last := tb.Events().Last()
	evs, err := tb.Events().After(0)
	if !errors.Is(err, task.ErrEventsDropped) || len(evs) != 40 || evs[39].Seq != last || evs[0].Seq != last-39 {
		t.Fatalf("After(0) = %d events (%d..%d), %v; want the last 40 of %d and ErrEventsDropped", len(evs), evs[0].Seq, evs[len(evs)-1].Seq, err, last)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("events out of order at %d: %d after %d", i, evs[i].Seq, evs[i-1].Seq)
		}
	}
}
