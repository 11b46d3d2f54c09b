package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
)

//go:embed task_list.md
var taskListMD string

type listInput struct {
	Status string `json:"status,omitempty" jsonschema:"only tasks in this state: unfinished (queued or running), finished, or one of queued, running, completed, failed, canceled, timed_out; default all"`
	Kind   string `json:"kind,omitempty" jsonschema:"only tasks of this kind, such as shell or agent; default all"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many tasks; default 50, at most 100"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the cursor of the list before, to see the page after it"`
}

// listStatuses are the values of task_list's status.
var listStatuses = []string{"unfinished", "finished", "queued", "running", "completed", "failed", "canceled", "timed_out"}

// ListedTask is a task as task_list shows it: one short row. Progress,
// what a shell uses and the ports it listens on are task_inspect's.
type ListedTask struct {
	ID         string  `json:"task_id"`
	Kind       string  `json:"kind"`
	Status     string  `json:"status"`
	AgeSeconds float64 `json:"age_seconds"`
	Label      string  `json:"label"`
	ExitCode   *int    `json:"exit_code,omitempty"`
	// WaitingForInput is the prompt a running shell seems to wait on.
	WaitingForInput string `json:"waiting_for_input,omitempty"`
	// Tokens is what a sub-agent spent so far, input and output, with
	// its own sub-agents'.
	Tokens int64 `json:"tokens,omitempty"`
	// Ports are the ports leased for a running shell (bash with port).
	Ports []int `json:"ports,omitempty"`
}

// ListOutput is the task_list tool's result.
type ListOutput struct {
	Tasks []ListedTask `json:"tasks"`
	// Count is how many tasks the list selects, on this page and after.
	Count int `json:"count"`
	// Cursor, set when more tasks follow, is what to pass as cursor for
	// the next page.
	Cursor string `json:"cursor,omitempty"`
	Note   string `json:"note,omitempty"`
}

const (
	defaultListed = 50 // task_list's default limit
	listLabel     = 80 // bytes of a label in a row
)

// query turns task_list's input into a table query, or a tool error.
func (in listInput) query() (task.Query, error) {
	q := task.Query{Kind: in.Kind, Limit: in.Limit}
	switch c := strings.TrimSpace(in.Cursor); {
	case c == "":
	case task.ValidID(c):
		q.After = c
	case isNumber(c): // the number alone, as task ids take it
		q.After = "task:" + c
	default:
		return q, fail("cursor %q is not one task_list gives: pass the cursor of the page before (a task id, such as shell:3), or none for the first page.", shorten(in.Cursor, 40))
	}
	switch {
	case in.Limit < 0:
		return q, fail("limit must not be negative (default %d, at most %d).", defaultListed, maxListed)
	case in.Limit == 0:
		q.Limit = defaultListed
	case in.Limit > maxListed:
		q.Limit = maxListed
	}
	switch in.Status {
	case "":
	case "unfinished":
		q.States = []task.State{task.Queued, task.Running}
	case "finished":
		q.States = []task.State{task.Completed, task.Failed, task.Canceled, task.TimedOut}
	default:
		i := slices.IndexFunc([]task.State{task.Queued, task.Running, task.Completed, task.Failed, task.Canceled, task.TimedOut},
			func(s task.State) bool { return s.String() == in.Status })
		if i < 0 {
			return q, fail("status %q is not one task_list knows; pass one of %v, or none for every task.", shorten(in.Status, 40), listStatuses)
		}
		q.States = []task.State{task.State(i)}
	}
	return q, nil
}

func (s *Set) taskList(_ context.Context, v *task.View, in listInput) (ListOutput, error) {
	q, err := in.query()
	if err != nil {
		return ListOutput{}, err
	}
	briefs, more := v.AppendBriefs(nil, q) // grown as rows come: most lists are short
	now := time.Now()
	out := ListOutput{Tasks: make([]ListedTask, 0, len(briefs)), Count: len(briefs) + more}
	// Rows go in while they fit the budget, with room for the notes; the
	// rest are left to the next page, never cut.
	room := s.cfg.ResultBudget - 1024
	for i, b := range briefs {
		row := listed(v, b, now)
		if b.State == task.Running && b.Kind == "shell" {
			row.Ports = s.portsOf(v, b.ID) // a lookup: leases are few
		}
		size, _ := json.Marshal(row)
		if room -= len(size) + 1; room < 0 && i > 0 {
			more += len(briefs) - i
			briefs = briefs[:i]
			break
		}
		out.Tasks = append(out.Tasks, row)
	}
	switch {
	case out.Count == 0 && in == (listInput{}):
		out.Note = "You have no background tasks."
	case out.Count == 0 && q.After != "":
		out.Note = fmt.Sprintf("None of your tasks selected by this list comes after cursor %q; task_list without a cursor starts from the first.", shorten(strings.TrimSpace(in.Cursor), 40))
	case out.Count == 0 && q.Kind != "" && !slices.Contains(kindsOf(v), q.Kind):
		// Kinds are open (an embedder adds its own), so an unknown one
		// is not refused; but a typo must not read as "nothing runs".
		kinds := kindsOf(v)
		out.Note = fmt.Sprintf("None of your tasks is of kind %q; ", shorten(q.Kind, 40))
		if len(kinds) == 0 {
			out.Note += "you have no background tasks."
		} else {
			out.Note += "yours are of kind " + strings.Join(kinds, ", ") + "."
		}
		switch lower := strings.ToLower(q.Kind); {
		case slices.Contains(listStatuses, lower):
			out.Note += fmt.Sprintf(" %q is a status: pass status %q.", lower, lower)
		case text.Nearest(lower, kinds) != "":
			out.Note += fmt.Sprintf(" Did you mean kind %q?", text.Nearest(lower, kinds))
		}
	case out.Count == 0:
		out.Note = "None of your tasks is selected by this list; task_list without arguments shows them all."
	case more > 0:
		out.Cursor = briefs[len(briefs)-1].ID
		out.Note = fmt.Sprintf("Showing %d of %d tasks; %d more: pass cursor=%q for the next page, or narrow the list with status or kind.", len(briefs), out.Count, more, out.Cursor)
	}
	out.Note = joinNotes(out.Note, s.listPollNote(v, briefs))
	return out, nil
}

// kindsOf lists the kinds of v's tasks, sorted.
func kindsOf(v *task.View) []string {
	var kinds []string
	for _, i := range v.List() {
		if !slices.Contains(kinds, i.Kind) {
			kinds = append(kinds, i.Kind)
		}
	}
	slices.Sort(kinds)
	return kinds
}

// listed is a task's row.
func listed(v *task.View, b task.Brief, now time.Time) ListedTask {
	row := ListedTask{ID: b.ID, Kind: b.Kind, Status: b.State.String(), AgeSeconds: seconds(now.Sub(b.Created)), Label: shorten(b.Label, listLabel), Tokens: b.Tokens}
	if b.HasExit {
		code := b.ExitCode
		row.ExitCode = &code
	}
	if b.State == task.Running && b.Kind == "shell" {
		row.WaitingForInput = waitingFor(v, b.ID)
	}
	return row
}

// isNumber says whether s is a number from 0, in decimal digits.
func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
