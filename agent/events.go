package agent

import (
	"encoding/json"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// EventType is the kind of an Event.
type EventType string

const (
	TurnStart       EventType = "turn_start"        // a turn begins (Autonomous says whether the user started it)
	TurnEnd         EventType = "turn_end"          // a turn ended (Text: the final answer, Stop: why the model stopped; Err if it failed)
	TextDelta       EventType = "text_delta"        // assistant text, streamed
	ThinkingDelta   EventType = "thinking_delta"    // assistant reasoning, streamed
	ToolCallEvent   EventType = "tool_call"         // the model called a tool
	ToolResultEvent EventType = "tool_result"       // a tool returned
	Reflow          EventType = "background_reflow" // finished background results (TaskIDs) and notices (NoticeIDs) were added to the history
	TaskEvent       EventType = "task"              // a change in the task table (Task)
	// BudgetStop: a budget stopped autonomous turns (Err is the
	// *BudgetError, the session's or the autonomous chain's); results
	// wait for the next user turn. Said once per chain.
	BudgetStop EventType = "budget_stop"
)

// Event is something a session did, for a UI or a log. Sub-agents report
// through task events (progress, finished), not through their deltas.
type Event struct {
	Type       EventType       `json:"type"`
	Autonomous bool            `json:"autonomous,omitempty"`
	Text       string          `json:"text,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
	Task       *task.Event     `json:"task,omitempty"`
	TaskIDs    []string        `json:"task_ids,omitempty"`
	NoticeIDs  []string        `json:"notice_ids,omitempty"`
	// Stop is why the model ended a turn that ended without error
	// (provider.EndTurn, provider.Refusal, provider.MaxTokens).
	Stop provider.StopReason `json:"stop,omitempty"`
	// Usage is, on TurnEnd, what the turn's top-level model calls spent
	// (its sub-agents' calls count in their tasks, see task.Info.Usage;
	// Session.Usage has the session's).
	Usage *task.Usage `json:"usage,omitempty"`
	Err   error       `json:"-"`
	Error string      `json:"error,omitempty"`
}

// Sink receives a session's events. Event is called from several
// goroutines (the turn, tool calls, the task-event follower), so a Sink
// must be safe for concurrent use, and should return quickly.
type Sink interface {
	Event(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

func (f SinkFunc) Event(e Event) { f(e) }

// Discard is a Sink that drops everything.
var Discard Sink = SinkFunc(func(Event) {})

func emit(s Sink, e Event) {
	if e.Err != nil {
		e.Error = e.Err.Error()
	}
	if s != nil {
		s.Event(e)
	}
}
