package agent

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/offstage/offstage/internal/tracing"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

//go:embed spawn_agent.md
var spawnAgentMD string

type spawnInput struct {
	Profile         string `json:"profile" jsonschema:"the sub-agent profile"`
	Prompt          string `json:"prompt" jsonschema:"the task, with all it needs to know"`
	RunInBackground bool   `json:"run_in_background,omitempty" jsonschema:"return its id at once"`
	Lifetime        string `json:"lifetime,omitempty" jsonschema:"session (the default: it may run until the session closes) or turn (cancelled when this turn ends)"`
	BudgetTokens    int64  `json:"budget_tokens,omitempty" jsonschema:"most tokens (input and output) it may spend, with its own sub-agents; within its profile's; 0 or absent: the profile's alone"`
	BudgetCalls     int64  `json:"budget_calls,omitempty" jsonschema:"most model calls it may make, with its own sub-agents; within its profile's; 0 or absent: the profile's alone"`
	BudgetSeconds   int64  `json:"budget_seconds,omitempty" jsonschema:"most seconds it may run; within its profile's; 0 or absent: the profile's alone"`
}

// SpawnOutput is the spawn_agent tool's result.
type SpawnOutput struct {
	TaskID string   `json:"task_id"`
	Status string   `json:"status"`
	Answer string   `json:"answer,omitempty"`
	Error  string   `json:"error,omitempty"`
	Trace  []string `json:"trace,omitempty"`
	Note   string   `json:"note,omitempty"`
}

// TaskKind is the task.Spec.Kind of sub-agents (their ids are agent:N):
// a UI that follows task events tells a sub-agent from a shell by
// comparing task.Event.Kind with it.
const TaskKind = "agent"

// errTimeBudget is the cause a sub-agent's time budget cancels its turn
// with; it becomes a *BudgetError.
var errTimeBudget = errors.New("time budget reached")

// answerBytes caps a foreground sub-agent's answer in the tool result.
const answerBytes = 8 << 10

// pushes reports whether results come back by themselves to a caller at
// depth: always to a sub-agent (reflow), to the top level unless
// Config.Tools.NoPush.
func (s *Session) pushes(depth int) bool { return depth > 0 || !s.cfg.Tools.NoPush }

// spawnTool returns spawn_agent for a caller at depth.
func (s *Session) spawnTool(depth int) *tools.Tool {
	var desc strings.Builder
	desc.WriteString(strings.TrimSpace(tools.Describe(spawnAgentMD, s.pushes(depth))))
	desc.WriteString("\n\nProfiles:\n")
	for _, p := range s.cfg.Profiles {
		fmt.Fprintf(&desc, "- `%s`: %s\n", p.Name, p.Description)
	}
	t := tools.DefineShared("spawn_agent", desc.String(), 0, func(ctx context.Context, v *task.View, in spawnInput) (SpawnOutput, error) {
		return s.spawn(ctx, v, depth, in)
	})
	// A sub-agent runs whatever its tools can run, and calls a model.
	t.Title, t.Safety, t.OpenWorld, t.StartsTasks = "Start a sub-agent", tools.Execute, true, true
	names := make([]string, len(s.cfg.Profiles))
	for i, p := range s.cfg.Profiles {
		names[i] = p.Name
	}
	return t.Enum("profile", names...)
}

func (s *Session) spawn(ctx context.Context, v *task.View, depth int, in spawnInput) (SpawnOutput, error) {
	var profile *Profile
	var names []string
	for i := range s.cfg.Profiles {
		names = append(names, s.cfg.Profiles[i].Name)
		if s.cfg.Profiles[i].Name == in.Profile {
			profile = &s.cfg.Profiles[i]
		}
	}
	switch {
	case profile == nil:
		return SpawnOutput{}, tools.Fail("There is no profile %q; the profiles are: %s.", in.Profile, strings.Join(names, ", "))
	case strings.TrimSpace(in.Prompt) == "":
		return SpawnOutput{}, tools.Fail("prompt is empty; say what the sub-agent should do, with everything it needs to know.")
	case in.BudgetTokens < 0 || in.BudgetCalls < 0 || in.BudgetSeconds < 0:
		return SpawnOutput{}, tools.Fail("budget_tokens, budget_calls and budget_seconds must not be negative; leave them out for no budget beyond the profile's.")
	}
	seconds, err := BudgetSeconds("budget_seconds", in.BudgetSeconds)
	if err != nil {
		return SpawnOutput{}, tools.Fail("%s; leave it out for no bound beyond the profile's.", err)
	}
	if err := tools.CheckLifetime(ctx, v, in.Lifetime); err != nil {
		return SpawnOutput{}, err
	}
	budget := profile.Budget.Narrow(Budget{Tokens: in.BudgetTokens, Calls: in.BudgetCalls, Time: seconds})
	model := profile.Model
	if model == nil {
		model = s.cfg.Model
	}
	maxIter := profile.MaxIterations
	if maxIter <= 0 {
		maxIter = s.cfg.MaxIterations
	}
	label := tools.Label(profile.Name + ": " + in.Prompt)
	parent := spawner(ctx)
	started := tools.TurnToStart(ctx)
	defer started()
	callCtx := ctx
	id, err := v.Spawn(task.Spec{Kind: TaskKind, Label: label}, func(ctx context.Context, h *task.Handle) (answer string, err error) {
		ctx, span := tracing.Task(ctx, callCtx, TaskKind, h.ID(), label)
		span.SetAttributes(tracing.AgentName.String(profile.Name))
		defer tracing.EndTask(span, v, h.ID())
		system := profile.System
		if !profile.NoProjectInstructions {
			system = withInstructions(system, s.cfg.ProjectInstructions)
		}
		sub := s.newLoop(profile.Name, system, model, h.View(), profile.Tools, depth+1, h, maxIter)
		sub.budget, sub.start, sub.parent = budget, time.Now(), parent
		ctx = context.WithValue(ctx, loopKey{}, sub) // what it spawns is bound by its budget too
		h.AttachHistory(sub.hist)
		if budget.Time > 0 {
			var cancel context.CancelFunc
			// A limit ended it, and what it runs in the foreground (a
			// shell, a sub-agent) ends by that limit too, not by a user.
			cause := &task.EndError{By: task.ByLimit, Reason: fmt.Sprintf("%s's time budget of %s was reached", h.ID(), budget.Time), Err: errTimeBudget}
			ctx, cancel = context.WithTimeoutCause(ctx, budget.Time, cause)
			defer cancel()
		}
		answer, _, err = sub.turn(ctx, []provider.Block{{Type: provider.Text, Text: in.Prompt}}, nil)
		if errors.Is(err, errTimeBudget) {
			err = &BudgetError{Scope: ScopeAgent, Budget: BudgetTime, Limit: int64(budget.Time), Used: h.Usage(), Elapsed: time.Since(sub.start)}
		}
		if errors.Is(err, ErrBudget) {
			answer = sub.partial() // what it found so far is kept
			h.Activity("stopped: " + err.Error())
			return answer, err
		}
		h.Activity("finished")
		return answer, err
	})
	switch {
	case errors.Is(err, task.ErrFull):
		return SpawnOutput{}, tools.Fail("Too many tasks are running or waiting to be read; wait for or cancel some first.")
	case err != nil:
		return SpawnOutput{}, err
	}
	started()
	tools.BindLifetime(ctx, v, id, in.Lifetime)
	if in.RunInBackground {
		state := task.Running
		if info, err := v.Info(id); err == nil {
			state = info.State
		}
		note := fmt.Sprintf("%s. Keep working: its report will come back to you when it finishes.", tools.StartedAs(id, state))
		if !s.pushes(depth) {
			note = fmt.Sprintf("%s. Keep working: its report does not come back by itself, so get it with task_wait when you need it.", tools.StartedAs(id, state))
		}
		return SpawnOutput{TaskID: id, Status: state.String(), Note: note}, nil
	}
	return s.waitAgent(ctx, v, id)
}

// waitAgent waits for a foreground sub-agent and takes its result; if the
// turn is cancelled, the sub-agent is cancelled with it.
func (s *Session) waitAgent(ctx context.Context, v *task.View, id string) (SpawnOutput, error) {
	r, err := v.Wait(ctx, []string{id}, task.All)
	if err != nil {
		v.CancelCause(id, task.EndCause(context.Cause(ctx), task.ByUser, "the turn that waited for it was cancelled"))
		stopped, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err = v.Wait(stopped, []string{id}, task.All)
		if err != nil {
			return SpawnOutput{TaskID: id, Status: "canceling", Note: "The turn was cancelled; the sub-agent is being stopped."}, nil
		}
	}
	if len(r.Done) != 1 {
		return SpawnOutput{TaskID: id, Status: "finished", Note: "Its report was already given to you."}, nil
	}
	res := r.Done[0]
	out := SpawnOutput{TaskID: id, Status: res.State.String(), Answer: shortenAnswer(res.Text), Trace: tools.ShortTrace(res.Trace)}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	return out, nil
}

func shortenAnswer(s string) string {
	if len(s) <= answerBytes {
		return s
	}
	return strings.ToValidUTF8(s[:answerBytes], "") + fmt.Sprintf("…(+%d more bytes)", len(s)-answerBytes)
}
