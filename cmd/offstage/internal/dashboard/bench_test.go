package dashboard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// BenchmarkBrowserEventStream (issue 26): with 10,000 tasks in the
// journal and 100 running, measured in Chromium: the page's first render
// (from the navigation's start to the list drawn from the stream's
// snapshot, in the page's own clock) and a state change's arrival (from
// the journal's write of a running task's end to the page's row
// changing, both on this machine's clock). The dashboard reads the
// journal at its default interval (250ms), which bounds the second.
//
//	go test -run '^$' -bench BrowserEventStream -benchtime 20x ./internal/dashboard
func BenchmarkBrowserEventStream(b *testing.B) {
	ctx := browser(b)
	f := newFleetEvery(b, false, 0) // the default interval, as served
	const finished, running = 10000, 100
	at := time.Now().Add(-time.Hour)
	change := func(typ task.EventType, id string, state task.State, when time.Time) journal.Record {
		return &journal.TaskChange{Session: f.session, Change: task.Change{Label: "bench " + id,
			Event: task.Event{Type: typ, ID: id, Kind: "shell", State: state, Time: when}}}
	}
	var batch []journal.Record
	flush := func() {
		if err := f.store.Write(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range finished {
		id := fmt.Sprintf("bench:%d", i)
		when := at.Add(time.Duration(i) * 100 * time.Millisecond)
		batch = append(batch, change(task.EventSpawned, id, task.Running, when), change(task.EventStarted, id, task.Running, when),
			change(task.EventFinished, id, task.Completed, when.Add(50*time.Millisecond)))
		if len(batch) >= 1500 {
			flush()
		}
	}
	next := 0 // the running tasks, newest of all
	spawn := func() string {
		id := fmt.Sprintf("run:%d", next)
		next++
		now := time.Now()
		batch = append(batch, change(task.EventSpawned, id, task.Running, now), change(task.EventStarted, id, task.Running, now))
		return id
	}
	var live []string
	for range running {
		live = append(live, spawn())
	}
	flush()
	login(b, ctx, f.srv.URL)

	var render, arrival time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		run(b, ctx, "loading the page", chromedp.Navigate(f.srv.URL+"/ui/"), until(`window.offstage && window.offstage.snapshots > 0`))
		ms := value(b, ctx, "reading the render time", chromedp.Evaluate[float64](`window.offstage.snapshotAt`))
		render += time.Duration(ms * float64(time.Millisecond))
		if i == 0 {
			if n := value(b, ctx, "counting rows", chromedp.Evaluate[int](`document.querySelectorAll("#tasks tbody tr").length`)); n != 200 {
				b.Fatalf("the list has %d rows, want the newest 200", n)
			}
		}
		if len(live) == 0 {
			live = append(live, spawn())
			flush()
			run(b, ctx, "waiting for the new running task", until(fmt.Sprintf(`window.offstage.changedAt[%q]`, f.session+"/"+live[0]+"@running")))
		}
		id := live[0]
		live = live[1:]
		sent := time.Now()
		batch = append(batch, change(task.EventFinished, id, task.Completed, sent))
		flush()
		got := value(b, ctx, "waiting for the change", chromedp.Poll[float64](fmt.Sprintf(`window.offstage.changedAt[%q]`, f.session+"/"+id+"@completed")))
		arrival += time.UnixMilli(int64(got)).Sub(sent)
	}
	b.ReportMetric(float64(render.Milliseconds())/float64(b.N), "ms/first-render")
	b.ReportMetric(float64(arrival.Milliseconds())/float64(b.N), "ms/state-change")
	b.ReportMetric(0, "ns/op")
}
