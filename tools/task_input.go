package tools

import (
	"context"
	_ "embed"
	"errors"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

//go:embed task_input.md
var taskInputMD string

type inputInput struct {
	TaskID     string `json:"task_id" jsonschema:"the shell task id, such as shell:3"`
	Text       string `json:"text" jsonschema:"the text to write; add a newline to end a line"`
	CloseStdin bool   `json:"close_stdin,omitempty" jsonschema:"close its input after writing"`
}

// InputOutput is the task_input tool's result.
type InputOutput struct {
	TaskID       string `json:"task_id"`
	BytesWritten int    `json:"bytes_written"`
	StdinClosed  bool   `json:"stdin_closed,omitempty"`
	Note         string `json:"note,omitempty"`
}

func (s *Set) taskInput(ctx context.Context, v *task.View, in inputInput) (any, error) {
	id, err := resolve(v, in.TaskID)
	if err != nil {
		return nil, err
	}
	if in.Text == "" && !in.CloseStdin {
		return nil, fail("text is empty; pass the text to write (with \"\\n\" to end a line), or close_stdin: true.")
	}
	p, err := processOf(v, id)
	if err != nil {
		return nil, err
	}
	if p == nil {
		if info, _ := v.Info(id); info.State.Finished() {
			return nil, fail("%s has finished (%s), so its input is closed.", id, info.State)
		}
		return nil, fail("%s has not started yet (it is queued); try again once task_list shows it running.", id)
	}
	out := InputOutput{TaskID: id}
	if in.Text != "" {
		wctx, cancel := context.WithTimeout(ctx, inputTimeout)
		defer cancel()
		out.BytesWritten, err = p.Input(wctx, []byte(in.Text))
		switch {
		case errors.Is(err, proc.ErrNoStdin):
			return nil, fail("%s was not started with interactive: true, so it has no input; start the command again with bash {\"interactive\": true}.", id)
		case errors.Is(err, proc.ErrExited):
			return nil, fail("%s has exited, so its input is closed; task_output shows what it printed.", id)
		case errors.Is(err, proc.ErrInputClosed):
			return nil, fail("The input of %s was already closed with close_stdin.", id)
		case errors.Is(err, context.DeadlineExceeded):
			out.Note = "It is not reading its input: only part of the text was written. Check task_output."
		case err != nil:
			return nil, err
		}
	}
	if in.CloseStdin {
		if err := p.CloseInput(); errors.Is(err, proc.ErrNoStdin) {
			return nil, fail("%s was not started with interactive: true, so it has no input to close.", id)
		} else if err != nil {
			return nil, err
		}
		out.StdinClosed = true
	}
	return out, nil
}
