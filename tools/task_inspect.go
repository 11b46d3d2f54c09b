package tools

import (
	"context"
	_ "embed"
	"time"

	"github.com/offstage/offstage/task"
)

//go:embed task_inspect.md
var taskInspectMD string

type inspectInput struct {
	TaskID string `json:"task_id" jsonschema:"the task id, such as shell:3"`
	Recent int    `json:"recent,omitempty" jsonschema:"how many recent steps or output lines; default 10, at most 50"`
}

// Step is one step of a sub-agent's history, as task_inspect shows it.
type Step struct {
	Kind string `json:"kind"`
	Tool string `json:"tool,omitempty"`
	Text string `json:"text,omitempty"`
}

// InspectOutput is the task_inspect tool's result.
type InspectOutput struct {
	TaskInfo
	Result     string `json:"result,omitempty"`
	Error      string `json:"error,omitempty"`
	TotalSteps int    `json:"total_steps,omitempty"`
	Recent     []Step `json:"recent,omitempty"`
	OutputTail string `json:"output_tail,omitempty"`
	// Processes counts a running shell's live processes: the shell and
	// every descendant, whatever session or group it moved to.
	Processes int    `json:"processes,omitempty"`
	Note      string `json:"note,omitempty"`
}

func (s *Set) taskInspect(_ context.Context, v *task.View, in inspectInput) (any, error) {
	id, err := resolve(v, in.TaskID)
	if err != nil {
		return nil, err
	}
	n := in.Recent
	switch {
	case n < 0:
		return nil, fail("recent must not be negative (default %d, at most %d).", defaultRecent, maxRecent)
	case n == 0:
		n = defaultRecent
	case n > maxRecent:
		n = maxRecent
	}
	info, err := v.Info(id) // before reading: what arrives after shows as news next time
	if err != nil {
		return nil, idFail(id, err)
	}
	poll := s.taskPollNote(v, info)
	p, err := v.Peek(id, n)
	if err != nil {
		return nil, idFail(id, err)
	}
	now := time.Now()
	out := InspectOutput{TaskInfo: liveInfo(v, p.Info, now), TotalSteps: p.TotalBlocks, OutputTail: shortenTail(p.Output, tailBytes)}
	for _, b := range p.Blocks {
		out.Recent = append(out.Recent, Step{Kind: b.Kind.String(), Tool: b.Tool, Text: shorten(b.Text, fieldBytes)})
	}
	if p.Kind == "shell" && !p.State.Finished() {
		if sh, err := processOf(v, id); err == nil && sh != nil {
			out.Processes = sh.Processes()
		}
	}
	if p.State.Finished() {
		if r, ok := consume(v, id); ok {
			res := resultOf(r, now, resultBytes)
			out.TaskInfo, out.Result, out.Error = res.TaskInfo, res.Result, res.Error
			out.Note = "Its result is included here and will not be sent to you again."
		} else {
			out.Note = "Its result was already given to you earlier in the conversation."
		}
	}
	out.Note = joinNotes(out.Note, poll)
	return out, nil
}
