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

// ListOutput is the task_list tool's result.
type ListOutput struct {
	Tasks []TaskInfo `json:"tasks"`
	Count int        `json:"count"`
	Note  string     `json:"note,omitempty"`
}

func (s *Set) taskList(_ context.Context, v *task.View, _ listInput) (ListOutput, error) {
	infos, now := v.List(), time.Now()
	out := ListOutput{Tasks: []TaskInfo{}, Count: len(infos)}
	if len(infos) > maxListed {
		out.Note = fmt.Sprintf("Showing the newest %d of %d tasks.", maxListed, len(infos))
		infos = infos[len(infos)-maxListed:]
	}
	for _, i := range infos {
		out.Tasks = append(out.Tasks, liveInfo(v, i, now))
	}
	if len(infos) == 0 {
		out.Note = "You have no background tasks."
	}
	out.Note = joinNotes(out.Note, s.listPollNote(v, infos))
	return out, nil
}
