package tools

import (
	"context"
	"sync"
	"time"

	"github.com/offstage/offstage/task"
)

// A task's declared lifetime (bash's and spawn_agent's lifetime
// parameter): how long it may outlive what started it.
const (
	// LifetimeSession, the default: until it ends by itself, is
	// cancelled, or its session closes.
	LifetimeSession = "session"
	// LifetimeTurn: cancelled when the turn that started it ends. A
	// sub-agent's turn is its whole run, so for a sub-agent's tasks it is
	// what the session lifetime is already: they end with it.
	LifetimeTurn = "turn"
)

// Turn holds the tasks a turn of a conversation started with lifetime
// "turn", to cancel them when it ends. A face with turns (the agent's
// Session: offstage run, ACP) makes one per turn with NewTurn, passes it
// to the turn's tool calls in their context (WithTurn), and calls End
// when the turn ends. A caller without turns (an MCP client calls tools
// one by one) has none, and lifetime "turn" is refused there. Its methods
// are safe for concurrent use.
type Turn struct {
	mu    sync.Mutex
	tasks []turnTask // guarded by mu
	ended bool       // guarded by mu
}

type turnTask struct {
	v  *task.View
	id string
}

// NewTurn returns an empty Turn.
func NewTurn() *Turn { return &Turn{} }

type turnKey struct{}

// WithTurn returns ctx carrying t, for the tool calls of its turn.
func WithTurn(ctx context.Context, t *Turn) context.Context {
	return context.WithValue(ctx, turnKey{}, t)
}

func turnOf(ctx context.Context) *Turn {
	t, _ := ctx.Value(turnKey{}).(*Turn)
	return t
}

// add ties task id of v to the turn; false if the turn has ended.
func (t *Turn) add(v *task.View, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.tasks = append(t.tasks, turnTask{v, id})
	return true
}

// lifetimeGrace bounds how long End waits for the tasks it cancelled.
const lifetimeGrace = 10 * time.Second

// End cancels the turn's unfinished tasks with cause (a nil cause: the
// turn ended, ending them by their declared lifetime, task.ByLimit) and
// waits, at most 10 seconds or until ctx ends, for them to finish; it
// then takes their results, so that the model, which asked for them to
// end with the turn, is not woken for them. Tasks that ended by
// themselves during the turn are left alone: their results are the
// model's. It returns the ids it cancelled, and is idempotent: a task
// started with the turn after End is cancelled at once (see add).
func (t *Turn) End(ctx context.Context, cause error) []string {
	t.mu.Lock()
	tasks := t.tasks
	t.tasks, t.ended = nil, true
	t.mu.Unlock()
	if len(tasks) == 0 {
		return nil // most turns: no timer to set and stop
	}
	if cause == nil {
		cause = lifetimeEnd
	}
	var ids []string
	byView := map[*task.View][]string{}
	for _, tt := range tasks {
		if already, err := tt.v.CancelCause(tt.id, cause); err == nil && !already {
			ids = append(ids, tt.id)
			byView[tt.v] = append(byView[tt.v], tt.id)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, lifetimeGrace)
	defer cancel()
	for v, ids := range byView {
		v.Wait(ctx, ids, task.All) // takes the results of those that ended
	}
	return ids
}

// lifetimeEnd is the cause of a task cancelled because the turn that
// started it with lifetime "turn" ended.
var lifetimeEnd = &task.EndError{By: task.ByLimit, Reason: "lifetime turn: the turn that started it ended"}

// checkLifetime refuses a lifetime the caller cannot have.
func checkLifetime(ctx context.Context, v *task.View, lifetime string) error {
	switch lifetime {
	case "", LifetimeSession:
		return nil
	case LifetimeTurn:
		if v.Owner() == "" && turnOf(ctx) == nil {
			return fail("lifetime turn needs a conversation with turns, and this caller has none (its tools are called one by one): leave lifetime out, and cancel the task with task_cancel when it is no longer needed.")
		}
		return nil
	}
	return fail("lifetime is %q; use \"session\" (the default: until the session closes) or \"turn\" (cancelled when this turn ends).", shorten(lifetime, 40))
}

// BindLifetime ties task id, just started by v's owner with lifetime, to
// what it may not outlive: for "turn" at the top level, the turn in ctx
// (a task started as its turn ends is cancelled at once); a sub-agent's
// tasks end with it anyway. Call checkLifetime (Check, for spawn_agent)
// first.
func BindLifetime(ctx context.Context, v *task.View, id, lifetime string) {
	if lifetime != LifetimeTurn || v.Owner() != "" {
		return
	}
	if t := turnOf(ctx); t != nil && !t.add(v, id) {
		v.CancelCause(id, lifetimeEnd)
	}
}

// CheckLifetime is checkLifetime for tools defined outside this package
// (spawn_agent): an error result for the model, or nil.
func CheckLifetime(ctx context.Context, v *task.View, lifetime string) error {
	return checkLifetime(ctx, v, lifetime)
}
