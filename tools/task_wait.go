package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/task"
)

//go:embed task_wait.md
var taskWaitMD string

type waitInput struct {
	TaskIDs        []string `json:"task_ids" jsonschema:"the tasks to wait for"`
	Mode           string   `json:"mode,omitempty" jsonschema:"any (default) or all"`
	TimeoutSeconds float64  `json:"timeout_seconds,omitempty" jsonschema:"default 30, at most 300"`
	Until          string   `json:"until,omitempty" jsonschema:"a regular expression: return as soon as a new line of output of one of the shells matches it"`
}

// maxUntilChars bounds an until pattern.
const maxUntilChars = 1000

// Match is the line a task_wait with until found.
type Match struct {
	TaskID string `json:"task_id"`
	Line   string `json:"line"`
	Cursor int64  `json:"cursor"` // just after the line: task_output since it reads what came next
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
	Matched         *Match        `json:"matched,omitempty"`
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
	if in.Until != "" {
		m, err := s.waitUntil(wctx, v, ids, mode, in.Until)
		if err != nil {
			return nil, err
		}
		if m != nil {
			return s.matchOutput(v, ids, m, note), nil
		}
		// No line matched: the tasks met the mode, or the time is up.
	}
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

// waitUntil waits for a new line matching pattern in the output of the
// shells among ids, until the mode's condition is met or ctx ends. Lines
// count from where the caller last read or matched each shell. It returns
// the match, or nil when none came; it consumes no result.
func (s *Set) waitUntil(ctx context.Context, v *task.View, ids []string, mode task.WaitMode, pattern string) (*Match, error) {
	if len(pattern) > maxUntilChars {
		return nil, fail("until is longer than %d characters; use a shorter regular expression.", maxUntilChars)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fail("until is not a valid regular expression (Go syntax): %s.", shorten(err.Error(), 200))
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // every goroutine below ends with ctx
	}()
	matches := make(chan Match, len(ids))
	finished := make(chan struct{}, len(ids))
	shells := 0
	for _, id := range ids {
		done, err := v.Done(id)
		if err != nil {
			return nil, idFail(id, err)
		}
		wg.Go(func() {
			select {
			case <-done:
				finished <- struct{}{}
			case <-ctx.Done():
			}
		})
		p, err := processOf(v, id)
		if err != nil || p == nil {
			continue // not a shell, or queued: only its end counts
		}
		shells++
		from := max(s.cursor(v.Owner(), id), s.matchCursor(v.Owner(), id))
		wg.Go(func() {
			if m, err := p.WaitLine(ctx, from, re); err == nil && m.Found {
				matches <- Match{TaskID: id, Line: m.Line, Cursor: m.Next}
			}
		})
	}
	if shells == 0 {
		return nil, fail("until waits for a line of a shell's output, and none of %s is a running shell; wait without until.", strings.Join(ids, ", "))
	}
	need := 1
	if mode == task.All {
		need = len(ids)
	}
	for n := 0; n < need; {
		select {
		case m := <-matches:
			s.setMatchCursor(v.Owner(), m.TaskID, m.Cursor)
			return &m, nil
		case <-finished:
			n++
		case <-ctx.Done():
			return nil, nil
		}
	}
	select { // a line of a shell that finished counts if it came first
	case m := <-matches:
		s.setMatchCursor(v.Owner(), m.TaskID, m.Cursor)
		return &m, nil
	default:
	}
	return nil, nil
}

// matchOutput reports a matched line: the awaited tasks' states, nothing
// consumed.
func (s *Set) matchOutput(v *task.View, ids []string, m *Match, note string) WaitOutput {
	now := time.Now()
	out := WaitOutput{Done: []TaskResult{}, Matched: m}
	m.Line = shorten(m.Line, fieldBytes)
	for _, id := range ids {
		if i, err := v.Info(id); err == nil && !i.State.Finished() {
			out.Running = append(out.Running, RunningTask{TaskInfo: infoOf(i, now)})
		}
	}
	out.Note = joinNotes(fmt.Sprintf("%s printed a line matching until. Nothing was consumed: its result still comes to you when it finishes. Read what follows with task_output {\"task_id\": %q, \"since\": %d}; a next wait with until starts after this line.", m.TaskID, m.TaskID, m.Cursor), note)
	return out
}
