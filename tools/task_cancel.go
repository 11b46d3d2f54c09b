package tools

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/offstage/offstage/task"
)

//go:embed task_cancel.md
var taskCancelMD string

type cancelInput struct {
	TaskID string `json:"task_id" jsonschema:"the task id, such as shell:3"`
}

// CancelOutput is the task_cancel tool's result.
type CancelOutput struct {
	TaskID          string `json:"task_id"`
	AlreadyFinished bool   `json:"already_finished"`
	Status          string `json:"status,omitempty"` // when already finished
	Note            string `json:"note"`
}

func (s *Set) taskCancel(_ context.Context, v *task.View, in cancelInput) (CancelOutput, error) {
	id, err := resolve(v, in.TaskID)
	if err != nil {
		return CancelOutput{}, err
	}
	already, err := v.Cancel(id)
	if err != nil {
		return CancelOutput{}, idFail(id, err)
	}
	out := CancelOutput{TaskID: id, AlreadyFinished: already}
	if already {
		out.Status = status(v, id)
		out.Note = fmt.Sprintf("It had already finished (%s); nothing was changed.", out.Status)
	} else {
		out.Note = "Cancellation requested: it stops shortly, and its final status will come back to you."
		if !s.pushes(v.Owner()) {
			out.Note = "Cancellation requested: it stops shortly; task_wait returns its final status."
		}
	}
	return out, nil
}
