package tools_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestSetSharedByTwoTables pins the bug where one Set serving two
// conversations (each its own table, both with a shell:1) started the
// second conversation's first task_output at the first's read position,
// silently skipping its output.
func TestSetSharedByTwoTables(t *testing.T) {
	a := newEnv(t, tools.Config{})
	tb := task.New(context.Background(), task.Options{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := tb.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	b := &env{tb: tb, set: a.set, top: tb.View("")}

	idA := a.background(t, a.top, "printf 'A-one\\nA-two\\n'")
	idB := b.background(t, b.top, "printf 'B-one\\nB-two\\nB-three\\n'")
	if idA != idB {
		t.Fatalf("ids %s and %s: want the same id in both tables", idA, idB)
	}
	waitDone(t, a.top, idA)
	waitDone(t, b.top, idB)
	var out tools.TaskOutputResult
	ok(t, a, a.top, "task_output", `{"task_id": "`+idA+`"}`, &out)
	if out.Output != "A-one\nA-two\n" {
		t.Fatalf("A's task_output = %q, want all of A's output", out.Output)
	}
	ok(t, b, b.top, "task_output", `{"task_id": "`+idB+`"}`, &out)
	if !strings.HasPrefix(out.Output, "B-one\n") || out.SkippedBytes != 0 {
		t.Fatalf("B's first task_output = %q (skipped %d), want it from the start of B's output", out.Output, out.SkippedBytes)
	}
	// And A's next read goes on from where A stopped.
	ok(t, a, a.top, "task_output", `{"task_id": "`+idA+`"}`, &out)
	if out.Output != "" || out.NextCursor != int64(len("A-one\nA-two\n")) {
		t.Fatalf("A's second task_output = %q at %d, want nothing new at %d", out.Output, out.NextCursor, len("A-one\nA-two\n"))
	}
}
