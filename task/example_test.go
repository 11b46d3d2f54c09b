package task_test

import (
	"context"
	"fmt"
	"time"

	"github.com/offstage/offstage/task"
)

func Example() {
	tb := task.New(context.Background(), task.Options{})
	defer tb.Close(context.Background())
	top := tb.View("")

	id, _ := top.Spawn(task.Spec{Kind: "agent", Label: "review"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.Progress(1, "reading the diff")
		return "looks good", nil
	})
	fmt.Println("spawned", id)

	<-top.Ready() // woken when a task of the top level finishes
	for _, r := range top.Drain() {
		fmt.Println(r.ID, r.State, r.Text)
	}
	fmt.Println("again:", len(top.Drain()))
	// Output:
	// spawned agent:1
	// agent:1 completed looks good
	// again: 0
}

func ExampleView_Wait() {
	tb := task.New(context.Background(), task.Options{})
	defer tb.Close(context.Background())
	top := tb.View("")
	a, _ := top.Spawn(task.Spec{Kind: "shell", Label: "make test"}, func(context.Context, *task.Handle) (string, error) {
		return "ok", nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := top.Wait(ctx, []string{a}, task.All)
	fmt.Println(len(r.Done), r.Done[0].State, err)
	// Output: 1 completed <nil>
}
