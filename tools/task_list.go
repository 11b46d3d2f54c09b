package tools

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/offstage/offstage/task"
)

//go:embed task_list.md
var taskListMD string

type listInput struct{}

// ListedTask is a task as task_list shows it: a running shell also says
// what it uses and the ports it listens on.
type ListedTask struct {
	TaskInfo
	ShellUsage
	// Tokens is what a sub-agent spent so far, input and output, with
	// its own sub-agents'.
	Tokens int64 `json:"tokens,omitempty"`
}

// ListOutput is the task_list tool's result.
type ListOutput struct {
	Tasks []ListedTask `json:"tasks"`
	Count int          `json:"count"`
	Note  string       `json:"note,omitempty"`
}

func (s *Set) taskList(_ context.Context, v *task.View, _ listInput) (ListOutput, error) {
	infos, now := v.List(), time.Now()
	out := ListOutput{Tasks: []ListedTask{}, Count: len(infos)}
	if len(infos) > maxListed {
		out.Note = fmt.Sprintf("Showing the newest %d of %d tasks.", maxListed, len(infos))
		infos = infos[len(infos)-maxListed:]
	}
	unmeasured := false
	for _, i := range infos {
		t := ListedTask{TaskInfo: liveInfo(v, i, now), Tokens: i.Usage.Tokens()}
		if i.Kind == "shell" && i.State == task.Running {
			if p, ok := Shell(v, i.ID); ok {
				var u bool
				t.ShellUsage, u = usageOf(p)
				unmeasured = unmeasured || u
			}
		}
		out.Tasks = append(out.Tasks, t)
	}
	if unmeasured {
		out.Note = joinNotes(out.Note, unmeasuredNote)
	}
	if len(infos) == 0 {
		out.Note = "You have no background tasks."
	}
	out.Note = joinNotes(out.Note, s.listPollNote(v, infos))
	return out, nil
}
