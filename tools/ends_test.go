package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestEveryShellEndHasAName: real shells ended each way a tool can end
// them record who ended them, and the model's result says so (issue 38).
func TestEveryShellEndHasAName(t *testing.T) {
	e := newEnv(t, tools.Config{})

	// self: it exited; the foreground result says ended_by self.
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "exit 3"}`, &out)
	if out.EndedBy != task.BySelf || out.EndReason != "" {
		t.Errorf("an exit: ended_by %q (%q), want self and no reason (its exit says it)", out.EndedBy, out.EndReason)
	}

	// model: task_cancel.
	id := e.background(t, e.top, "sleep 100")
	var cancelled tools.CancelOutput
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+id+`"}`, &cancelled)
	waitDone(t, e.top, id)
	var inspect tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &inspect)
	if inspect.EndedBy != task.ByModel || inspect.EndReason != "task_cancel" {
		t.Errorf("task_cancel: task_inspect says ended_by %q (%q), want model (task_cancel)", inspect.EndedBy, inspect.EndReason)
	}

	// timeout: timeout_seconds.
	ok(t, e, e.top, "bash", `{"command": "sleep 100", "timeout_seconds": 0.2}`, &out)
	if out.Status != "timed_out" || out.EndedBy != task.ByTimeout || !strings.Contains(out.EndReason, "timeout of 200ms") {
		t.Errorf("timeout_seconds: %+v, want timed_out by timeout of 200ms", out)
	}

	// user: the turn that ran it in the foreground was cancelled (Ctrl-C,
	// ACP session/cancel).
	turn, cancelTurn := context.WithCancelCause(t.Context())
	cancelTurn(context.Canceled)
	res, err := e.set.Tool("bash").Call(turn, e.top, json.RawMessage(`{"command": "sleep 100"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(res.Text), &out); err != nil {
		t.Fatal(err)
	}
	if out.EndedBy != task.ByUser || !strings.Contains(out.EndReason, "turn") {
		t.Errorf("a cancelled turn's foreground command: ended_by %q (%q), want user", out.EndedBy, out.EndReason)
	}

	// session: the session closed, with why.
	id = e.background(t, e.top, "sleep 100")
	if err := e.tb.CloseCause(t.Context(), task.Closed("mcp: the client went away")); err != nil {
		t.Fatal(err)
	}
	if info, _ := e.tb.Info(id); info.EndedBy != task.BySession || info.EndReason != "mcp: the client went away" {
		t.Errorf("closing the session: %s ended by %q (%q), want session (mcp: the client went away)", id, info.EndedBy, info.EndReason)
	}
}

// TestAShellKilledAtItsMemoryLimitEndedByALimit: the kernel's kill at the
// memory limit is the limit's, not the shell's own failure.
func TestAShellKilledAtItsMemoryLimitEndedByALimit(t *testing.T) {
	limits := proc.Limits{Memory: 64 << 20}
	if err := proc.CheckLimits(limits); err != nil {
		if proc.Containment().Mode == proc.ModeCgroup {
			t.Fatalf("cgroup containment cannot enforce %v: %v", limits, err)
		}
		t.Logf("no memory limit here (%v): nothing to check", err)
		return
	}
	e := newEnv(t, tools.Config{Process: proc.Config{Limits: limits}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "head -c 200m /dev/zero | tail", "timeout_seconds": 60}`, &out)
	if out.EndedBy != task.ByLimit || !strings.Contains(out.EndReason, "memory") {
		t.Errorf("a shell over its memory limit: %+v, want ended_by limit (memory)", out)
	}
}
