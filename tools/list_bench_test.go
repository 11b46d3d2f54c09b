package tools_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// BenchmarkTaskList1000Running: task_list, as the model calls it (no
// arguments), over 1,000 running shells (each a real sleeping process).
// answer-bytes is the size of the result's text, error/op whether it was
// an error result (a list too large to show is one).
func BenchmarkTaskList1000Running(b *testing.B) {
	const n = 1000
	tb := task.New(context.Background(), task.Options{MaxRunning: n, MaxTasks: 2 * n})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		tb.Close(ctx)
	}()
	v := tb.View("")
	for range n {
		if _, _, err := tools.SpawnShell(v, proc.Config{Command: "exec sleep 1000"}, tools.ShellOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	list := tools.New(tools.Config{}).Tool("task_list")
	var size, errs int
	for b.Loop() {
		r, err := list.Call(context.Background(), v, json.RawMessage(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		size = len(r.Text)
		if r.IsError {
			errs++
		}
	}
	b.ReportMetric(float64(size), "answer-bytes")
	b.ReportMetric(float64(errs)/float64(b.N), "error/op")
}
