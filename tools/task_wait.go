package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/offstage/offstage/task"
)

//go:embed task_wait.md
var taskWaitMD string

type waitInput struct {
	TaskIDs        []string `json:"task_ids" jsonschema:"the tasks to wait for"`
	Mode           string   `json:"mode,omitempty" jsonschema:"any (default) or all"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"default 30, at most 300"`
}

// RunningTask is a task still running when a wait returned.
type RunningTask struct {
	TaskInfo
	OutputTail string `json:"output_tail,omitempty"`
}

// WaitOutput is the task_wait tool's result.
type WaitOutput struct {
	Done            []TaskResult  `json:"done"`
	Running         []RunningTask `json:"running,omitempty"`
	DeliveredBefore []TaskInfo    `json:"delivered_before,omitempty"`
	TimedOut        bool          `json:"timed_out,omitempty"`
	Note            string        `json:"note,omitempty"`
}

func (s *Set) taskWait(ctx context.Context, v *task.View, in waitInput) (any, error) {
	mode := task.Any
	switch in.Mode {
	case "", "any":
	case "all":
		mode = task.All
	default:
		return nil, fail("mode must be \"any\" or \"all\", not %q.", shorten(in.Mode, 40))
	}
	switch {
	case len(in.TaskIDs) == 0:
		return nil, fail("task_ids is empty; pass the ids to wait for, such as [\"shell:3\"].")
	case len(in.TaskIDs) > maxWaitIDs:
		return nil, fail("Wait for at most %d tasks at a time (you passed %d).", maxWaitIDs, len(in.TaskIDs))
	case in.TimeoutSeconds < 0:
		return nil, fail("timeout_seconds must not be negative (default %d, at most %d).", defaultWaitSeconds, maxWaitSeconds)
	}
	var ids []string
	for _, raw := range in.TaskIDs {
		id, err := resolve(v, raw)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	timeout, note := seconds2d(in.TimeoutSeconds), ""
	switch {
	case timeout == 0:
		timeout = defaultWaitSeconds * time.Second
	case timeout > maxWaitSeconds*time.Second:
		timeout = maxWaitSeconds * time.Second
		note = fmt.Sprintf("timeout_seconds was capped at %d.", maxWaitSeconds)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := v.Wait(wctx, ids, mode)
	timedOut := false
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, fail("The wait was interrupted (the turn was cancelled); nothing was consumed.")
	case errors.Is(err, context.DeadlineExceeded):
		timedOut = true
		// Tasks that finished without meeting the condition are reported
		// now rather than later: take their results.
		for _, i := range r.Unconsumed {
			if res, ok := consume(v, i.ID); ok {
				r.Done = append(r.Done, res)
			}
		}
	default: // a task vanished between resolving and waiting
		return nil, fail("%s; task_list shows your tasks.", err)
	}
	return s.waitOutput(v, r, timedOut, timeout, note), nil
}

func (s *Set) waitOutput(v *task.View, r task.WaitResult, timedOut bool, timeout time.Duration, note string) WaitOutput {
	now := time.Now()
	n := len(r.Done) + len(r.Running) + len(r.Earlier)
	perText := min(resultBytes, s.cfg.ResultBudget/(n+1))
	perTail := min(tailBytes, s.cfg.ResultBudget/(2*n+2))
	out := WaitOutput{Done: []TaskResult{}, TimedOut: timedOut}
	for _, d := range r.Done {
		out.Done = append(out.Done, resultOf(d, now, perText))
	}
	for _, i := range r.Running {
		rt := RunningTask{TaskInfo: infoOf(i, now)}
		if p, _ := processOf(v, i.ID); p != nil {
			rt.OutputTail, _ = tail(p, perTail)
		}
		out.Running = append(out.Running, rt)
	}
	for _, i := range r.Earlier {
		out.DeliveredBefore = append(out.DeliveredBefore, infoOf(i, now))
	}
	if timedOut {
		note = joinNotes(fmt.Sprintf("Still running after %s; this is not an error. Keep working, or wait again.", timeout), note)
	}
	if len(out.DeliveredBefore) > 0 {
		note = joinNotes(note, "Tasks under delivered_before finished earlier and their results were already given to you.")
	}
	out.Note = note
	return out
}

func joinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}
