package journal

import (
	"fmt"
	"strings"

	"github.com/offstage/offstage/task"
)

// State is a recorded task's state: one of task.State's, by its name, or
// Orphaned. The zero value, "", is no state: a TaskFilter without one
// selects every state.
//
// It is a string, as the journal stores it, rather than a number: a state
// a newer offstage records reads back as itself instead of failing the
// read or turning into another.
type State string

// The states a task can be recorded in. All but Orphaned are task.State's
// names (StateOf).
const (
	Queued    State = "queued"
	Running   State = "running"
	Completed State = "completed"
	Failed    State = "failed"
	Canceled  State = "canceled"
	TimedOut  State = "timed_out"
	// Orphaned is the state of a task found unfinished after its host died.
	Orphaned State = "orphaned"
)

// States returns every state, in task.State's order with Orphaned last:
// for listing the choices to a person.
func States() []State {
	return []State{Queued, Running, Completed, Failed, Canceled, TimedOut, Orphaned}
}

// StateOf returns the recorded state of a task in state s.
func StateOf(s task.State) State { return State(s.String()) }

// ParseState returns the state named name, or an error that lists the
// states.
func ParseState(name string) (State, error) {
	for _, s := range States() {
		if string(s) == name {
			return s, nil
		}
	}
	return "", fmt.Errorf("%q is not a state: use %s", name, stateChoices())
}

// stateChoices lists the states as a sentence does: "a, b or c".
func stateChoices() string {
	names := make([]string, 0, len(States()))
	for _, s := range States() {
		names = append(names, string(s))
	}
	last := len(names) - 1
	return strings.Join(names[:last], ", ") + " or " + names[last]
}

// Task returns the task.State s names, and false for Orphaned (or a state
// this version does not know), which no task.State names.
func (s State) Task() (task.State, bool) {
	for t := task.Queued; t <= task.TimedOut; t++ {
		if StateOf(t) == s {
			return t, true
		}
	}
	return 0, false
}

// Finished reports whether s is terminal: a state other than Queued and
// Running (the zero State is none, so not finished either).
func (s State) Finished() bool { return s != "" && s != Queued && s != Running }

func (s State) String() string { return string(s) }
