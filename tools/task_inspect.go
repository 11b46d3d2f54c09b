package tools

import (
	"context"
	_ "embed"
	"math"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
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
	Ending
	Result     string `json:"result,omitempty"`
	Error      string `json:"error,omitempty"`
	TotalSteps int    `json:"total_steps,omitempty"`
	Recent     []Step `json:"recent,omitempty"`
	OutputTail string `json:"output_tail,omitempty"`
	// Sandbox is a shell's sandbox: its mode, where it may write, its
	// network ("" for a shell without one).
	Sandbox string `json:"sandbox,omitempty"`
	// Ports are the ports leased for a running shell (bash with port).
	Ports []int `json:"ports,omitempty"`
	ShellUsage
	// Usage is what a sub-agent spent calling the model, with its own
	// sub-agents; nil for a shell.
	Usage *task.Usage `json:"usage,omitempty"`
	Note  string      `json:"note,omitempty"`
}

func (s *Set) taskInspect(ctx context.Context, v *task.View, in inspectInput) (InspectOutput, error) {
	id, err := resolve(v, in.TaskID)
	if err != nil {
		return InspectOutput{}, err
	}
	n := in.Recent
	switch {
	case n < 0:
		return InspectOutput{}, fail("recent must not be negative (default %d, at most %d).", defaultRecent, maxRecent)
	case n == 0:
		n = defaultRecent
	case n > maxRecent:
		n = maxRecent
	}
	info, err := v.Info(id) // before reading: what arrives after shows as news next time
	if err != nil {
		return InspectOutput{}, idFail(id, err)
	}
	poll := s.taskPollNote(v, info)
	p, err := v.Peek(id, n)
	if err != nil {
		return InspectOutput{}, idFail(id, err)
	}
	now := time.Now()
	out := InspectOutput{TaskInfo: liveInfo(v, p.Info, now), TotalSteps: p.TotalBlocks, OutputTail: shortenTail(p.Output, tailBytes), Ports: s.portsOf(v, id)}
	if u := p.Info.Usage; !u.IsZero() {
		out.Usage = &u
	}
	for _, b := range p.Blocks {
		out.Recent = append(out.Recent, Step{Kind: b.Kind.String(), Tool: b.Tool, Text: shorten(b.Text, fieldBytes)})
	}
	if p.Kind == "shell" {
		if sh, err := processOf(v, id); err == nil && sh != nil {
			if st := sh.Sandbox(); st.Mode != sandbox.Off {
				out.Sandbox = shorten(st.String(), fieldBytes)
			}
		}
	}
	if p.Kind == "shell" && !p.State.Finished() {
		if sh, err := processOf(v, id); err == nil && sh != nil {
			var unmeasured bool
			out.ShellUsage, unmeasured = usageOf(sh)
			if unmeasured {
				out.Note = joinNotes(out.Note, unmeasuredNote)
			}
		}
	}
	if p.State.Finished() {
		out.Ending = endingOf(p.Info)
		if r, ok := consume(ctx, v, id); ok {
			res := resultOf(r, now, resultBytes)
			out.TaskInfo, out.Ending, out.Result, out.Error = res.TaskInfo, res.Ending, res.Result, res.Error
			out.Note = "Its result is included here and will not be sent to you again."
			if !s.pushes(v.Owner()) {
				out.Note = "Its result is included here and will not be returned again."
			}
		} else {
			out.Note = "Its result was already given to you earlier in the conversation."
		}
	}
	out.Note = joinNotes(out.Note, poll)
	return out, nil
}

// round2 rounds to two decimals: enough for a model, short in JSON.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// ShellUsage is what a running shell uses, and the ports it listens on,
// as task_inspect and task_list show them.
type ShellUsage struct {
	// Processes counts a running shell's live processes: the shell and
	// every descendant, whatever session or group it moved to.
	Processes int `json:"processes,omitempty"`
	// CPUSeconds, MemoryMiB and MemoryPeakMiB are a running shell's CPU
	// time and memory, where the host can tell (see resource.Usage). Where a
	// cgroup measures memory it charges the page cache of the files the
	// shell read or wrote, so the figures can be far above what its
	// processes hold; the description says so.
	CPUSeconds    float64 `json:"cpu_seconds,omitempty"`
	MemoryMiB     float64 `json:"memory_mib,omitempty"`
	MemoryPeakMiB float64 `json:"memory_peak_mib,omitempty"`
	// Listening is the TCP ports a running shell's processes listen on.
	Listening []int `json:"listening,omitempty"`
}

// usageOf measures a running shell; unmeasured says the host cannot tell
// its CPU time and memory (no /proc), which are then left out.
func usageOf(p *proc.Process) (_ ShellUsage, unmeasured bool) {
	u := p.Usage()
	return ShellUsage{
		Processes:     u.Processes,
		CPUSeconds:    round2(u.CPU.Seconds()),
		MemoryMiB:     round2(float64(u.Memory) / (1 << 20)),
		MemoryPeakMiB: round2(float64(u.MemoryPeak) / (1 << 20)),
		Listening:     p.Ports(),
	}, u.Processes > 0 && !u.Measured
}

// unmeasuredNote says why a running shell shows no CPU time or memory.
const unmeasuredNote = "This system does not tell a shell's CPU time and memory (no /proc), so they are left out."
