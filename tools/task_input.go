package tools

import (
	"context"
	_ "embed"
	"errors"
	"strings"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

//go:embed task_input.md
var taskInputMD string

type inputInput struct {
	TaskID     string   `json:"task_id" jsonschema:"the shell task id, such as shell:3"`
	Text       string   `json:"text,omitempty" jsonschema:"the text to write; add a newline to end a line"`
	Keys       []string `json:"keys,omitempty" jsonschema:"named keys to send after the text, such as ctrl-c, enter, up"`
	CloseStdin bool     `json:"close_stdin,omitempty" jsonschema:"close its input after writing"`
}

// keyBytes are the named keys task_input sends: what a terminal's
// keyboard sends for them.
var keyBytes = func() map[string]string {
	m := map[string]string{
		"enter": "\r", "tab": "\t", "escape": "\x1b", "backspace": "\x7f", "space": " ",
		"up": "\x1b[A", "down": "\x1b[B", "right": "\x1b[C", "left": "\x1b[D",
		"home": "\x1b[H", "end": "\x1b[F", "delete": "\x1b[3~", "page-up": "\x1b[5~", "page-down": "\x1b[6~",
	}
	for c := 'a'; c <= 'z'; c++ {
		m["ctrl-"+string(c)] = string(rune(c - 'a' + 1))
	}
	return m
}()

// keyNames lists the named keys, for error messages.
const keyNames = "ctrl-a … ctrl-z, enter, tab, escape, backspace, space, up, down, left, right, home, end, delete, page-up, page-down"

// keyEnum is the named keys in keyNames' order, for the schema's enum:
// made once, not by every Set (per session).
var keyEnum = namedKeys()

// namedKeys lists the named keys in keyNames' order.
func namedKeys() []string {
	var keys []string
	for c := 'a'; c <= 'z'; c++ {
		keys = append(keys, "ctrl-"+string(c))
	}
	return append(keys, "enter", "tab", "escape", "backspace", "space", "up", "down", "left", "right", "home", "end", "delete", "page-up", "page-down")
}

// TaskInputResult is the task_input tool's result.
type TaskInputResult struct {
	TaskID       string `json:"task_id"`
	BytesWritten int    `json:"bytes_written"`
	StdinClosed  bool   `json:"stdin_closed,omitempty"`
	Note         string `json:"note,omitempty"`
}

func (s *Set) taskInput(ctx context.Context, v *task.View, in inputInput) (TaskInputResult, error) {
	id, err := resolve(v, in.TaskID)
	if err != nil {
		return TaskInputResult{}, err
	}
	text := in.Text
	for _, k := range in.Keys {
		b, ok := keyBytes[strings.ToLower(strings.TrimSpace(k))]
		if !ok {
			return TaskInputResult{}, fail("There is no key %q; the keys are %s.", shorten(k, 40), keyNames)
		}
		text += b
	}
	if text == "" && !in.CloseStdin {
		return TaskInputResult{}, fail("text and keys are empty; pass the text to write (with \"\\n\" to end a line), keys such as [\"ctrl-c\"], or close_stdin: true.")
	}
	p, err := processOf(v, id)
	if err != nil {
		return TaskInputResult{}, err
	}
	if p == nil {
		if info, _ := v.Info(id); info.State.Finished() {
			return TaskInputResult{}, fail("%s has finished (%s), so its input is closed.", id, info.State)
		}
		return TaskInputResult{}, fail("%s has not started yet (it is queued); try again once task_list shows it running.", id)
	}
	out := TaskInputResult{TaskID: id}
	if text != "" {
		wctx, cancel := context.WithTimeout(ctx, inputTimeout)
		defer cancel()
		out.BytesWritten, err = p.Input(wctx, []byte(text))
		switch {
		case errors.Is(err, proc.ErrNoStdin):
			return TaskInputResult{}, fail("%s was not started with interactive: true, so it has no input; start the command again with bash {\"interactive\": true}.", id)
		case errors.Is(err, proc.ErrExited):
			return TaskInputResult{}, fail("%s has exited, so its input is closed; task_output shows what it printed.", id)
		case errors.Is(err, proc.ErrInputClosed):
			return TaskInputResult{}, fail("The input of %s was already closed with close_stdin.", id)
		case errors.Is(err, context.DeadlineExceeded):
			out.Note = "It is not reading its input: only part of the text was written. Check task_output."
		case err != nil:
			return TaskInputResult{}, err
		}
	}
	if in.CloseStdin {
		cctx, cancel := context.WithTimeout(ctx, inputTimeout)
		defer cancel()
		switch err := p.CloseInput(cctx); {
		case errors.Is(err, proc.ErrNoStdin):
			return TaskInputResult{}, fail("%s was not started with interactive: true, so it has no input to close.", id)
		case errors.Is(err, proc.ErrExited):
			return TaskInputResult{}, fail("%s has exited, so its input is closed; task_output shows what it printed.", id)
		case errors.Is(err, context.DeadlineExceeded):
			out.Note = joinNotes(out.Note, "It is not reading its input: its input was not closed. Check task_output.")
			return out, nil
		case err != nil:
			return TaskInputResult{}, err
		}
		out.StdinClosed = true
	}
	return out, nil
}
