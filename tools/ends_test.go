package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
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
	time.AfterFunc(200*time.Millisecond, func() { cancelTurn(context.Canceled) }) // once it runs: a call already cancelled starts nothing
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
	limits := resource.Limits{Memory: 64 << 20}
	if !enforced(t, limits) {
		return
	}
	e := newEnv(t, tools.Config{Process: proc.Config{Limits: limits}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "head -c 200m /dev/zero | tail", "timeout_seconds": 60}`, &out)
	if out.EndedBy != task.ByLimit || !strings.Contains(out.EndReason, "memory") {
		t.Errorf("a shell over its memory limit: %+v, want ended_by limit (memory)", out)
	}
}

// TestLifetimeTurn: a command started with lifetime turn is cancelled
// when its turn ends, by its declared limit, and its result is taken so
// the model is not woken for it; one of lifetime session, and one that
// ended by itself during the turn, are left alone (issue 38 item 4).
func TestLifetimeTurn(t *testing.T) {
	e := newEnv(t, tools.Config{})
	turn := tools.NewTurn()
	ctx := tools.WithTurn(t.Context(), turn)
	start := func(args string) string {
		t.Helper()
		res, err := e.set.Tool("bash").Call(ctx, e.top, json.RawMessage(args))
		var out tools.BashOutput
		if err != nil || res.IsError || json.Unmarshal([]byte(res.Text), &out) != nil {
			t.Fatalf("bash %s = %s, %v", args, res.Text, err)
		}
		return out.TaskID
	}
	short := start(`{"command": "sleep 100", "run_in_background": true, "lifetime": "turn"}`)
	long := start(`{"command": "sleep 100", "run_in_background": true, "lifetime": "session"}`)
	quick := start(`{"command": "echo done", "run_in_background": true, "lifetime": "turn"}`)
	waitDone(t, e.top, quick)

	if got := turn.End(t.Context(), nil); len(got) != 1 || got[0] != short {
		t.Errorf("End() cancelled %v, want [%s]", got, short)
	}
	info, _ := e.tb.Info(short)
	if info.State != task.Canceled || info.EndedBy != task.ByLimit || !strings.Contains(info.EndReason, "lifetime turn") || !info.Delivered {
		t.Errorf("the turn's command: %+v, want canceled by its limit (lifetime turn), its result taken", info)
	}
	if info, _ := e.tb.Info(long); info.State.Finished() {
		t.Errorf("the session's command ended with the turn: %+v", info)
	}
	drained := e.top.Drain()
	if len(drained) != 1 || drained[0].ID != quick {
		t.Errorf("Drain() after the turn = %v, want only %s, which ended by itself", drained, quick)
	}
	// A command started with lifetime turn after its turn ended is
	// cancelled at once.
	late := start(`{"command": "sleep 100", "run_in_background": true, "lifetime": "turn"}`)
	waitDone(t, e.top, late)
	if info, _ := e.tb.Info(late); info.EndedBy != task.ByLimit {
		t.Errorf("a command started after its turn: %+v, want ended by its limit", info)
	}
}

// TestLifetimeIsChecked: an unknown lifetime, and turn where there are
// no turns (an MCP client's calls), are refused before anything runs.
func TestLifetimeIsChecked(t *testing.T) {
	e := newEnv(t, tools.Config{})
	if msg := e.refused(t, e.top, "bash", `{"command": "true", "lifetime": "forever"}`); !strings.Contains(msg, `"session"`) {
		t.Errorf("an unknown lifetime: %s", msg)
	}
	if msg := e.refused(t, e.top, "bash", `{"command": "true", "lifetime": "turn"}`); !strings.Contains(msg, "has none") {
		t.Errorf("lifetime turn without turns: %s", msg)
	}
	if n := len(e.tb.List()); n != 0 {
		t.Errorf("refused calls started %d tasks", n)
	}
}

// TestAShellAtItsPidsLimitIsSaidSo: a command whose forks fail at the
// pids limit is told why: the kernel's "Resource temporarily unavailable"
// does not say (an outsider's finding).
func TestAShellAtItsPidsLimitIsSaidSo(t *testing.T) {
	l := resource.Limits{Pids: 16}
	if !enforced(t, l) {
		return
	}
	e := newEnv(t, tools.Config{Process: proc.Config{Limits: l}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command":"i=0; while [ $i -lt 40 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; kill $(jobs -p) 2>/dev/null; true"}`, &out)
	if !strings.Contains(out.Note, "the most processes a shell may have (16") {
		t.Errorf("bash at its pids limit: %+v; want the note to say the limit was reached", out)
	}
}

// enforced says whether this host enforces l: where it does not, there is
// nothing to check (said in the log), unless shells are contained by
// cgroup, which enforces every limit (then t fails).
func enforced(t *testing.T, l resource.Limits) bool {
	t.Helper()
	if err := resource.Check(l); err != nil {
		if proc.Containment().Mode == "cgroup" {
			t.Fatalf("cgroup containment cannot enforce %v: %v", l, err)
		}
		t.Logf("no such limit here (%v): nothing to check", err)
		return false
	}
	return true
}
