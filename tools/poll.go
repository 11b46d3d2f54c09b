package tools

import (
	"fmt"
	"strings"

	"github.com/offstage/offstage/task"
)

// A poll is a read of a running task's status or output (task_list,
// task_inspect, task_output) that finds nothing new since the same
// caller's last read of it: the model spends a turn to learn nothing, and
// models do it hundreds of times while a build runs. The read is always
// answered; its note says that nothing changed and how to stop spending
// turns, more plainly after pollPlainly polls in a row.

// pollPlainly is how many polls in a row make the note plain.
const pollPlainly = 3

// pollKey names what a caller read: one task, or its whole list ("").
type pollKey struct {
	caller
	id string
}

// pollState is what a caller saw at its last read, and how many reads in
// a row saw the same.
type pollState struct {
	seen    string
	repeats int
}

// fingerprint sums up what a read of a task can show that may change
// while it runs: its state, progress, output written, and a prompt it
// waits on.
func fingerprint(v *task.View, i task.Info) string {
	var written int64
	var prompt string
	if p, ok := Shell(v, i.ID); ok {
		written = p.Written()
		prompt, _ = p.WaitingForInput()
	}
	return fmt.Sprintf("%s|%d|%q|%d|%d|%q", i.State, i.Iteration, i.Activity, i.LastActivity.UnixNano(), written, prompt)
}

// noteRead records that owner read key and saw seen (a fingerprint; ""
// when nothing it read can still change, which ends the count), and
// returns how many reads in a row before this one saw the same.
func (s *Set) noteRead(key pollKey, seen string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen == "" {
		delete(s.polls, key)
		return 0
	}
	st, ok := s.polls[key]
	if ok && st.seen == seen {
		st.repeats++
	} else {
		st = pollState{seen: seen}
	}
	if !ok && len(s.polls) >= maxCursors {
		clear(s.polls) // bounded: a poll may then go unnoticed once
	}
	s.polls[key] = st
	return st.repeats
}

// taskPollNote returns the note for a read of task i by v's owner: "" if
// something changed since its last read, or the task has finished.
func (s *Set) taskPollNote(v *task.View, i task.Info) string {
	seen := ""
	if !i.State.Finished() {
		seen = fingerprint(v, i)
	}
	return s.pollNote(v, i.ID, seen, i.ID, []string{i.ID})
}

// listPollNote returns the note for a task_list that shows briefs.
func (s *Set) listPollNote(v *task.View, briefs []task.Brief) string {
	var b strings.Builder
	var running []string
	for _, i := range briefs {
		if !i.State.Finished() {
			running = append(running, i.ID)
		}
		// A finished task counts too: one that ends changes the list.
		var written int64
		var prompt string
		if i.State == task.Running && i.Kind == "shell" {
			if p, ok := Shell(v, i.ID); ok {
				written = p.Written()
				prompt, _ = p.WaitingForInput()
			}
		}
		fmt.Fprintf(&b, "%s:%s:%d:%d:%q;", i.ID, i.State, i.LastActivity.UnixNano(), written, prompt)
	}
	seen := b.String()
	if len(running) == 0 {
		seen = ""
	}
	return s.pollNote(v, "", seen, "your tasks", running)
}

// pollNote counts a read of key, and words the note of a poll of what
// (a task id, or "your tasks") whose running tasks are ids.
func (s *Set) pollNote(v *task.View, key, seen, what string, ids []string) string {
	owner := v.Owner()
	n := s.noteRead(pollKey{callerOf(v), key}, seen)
	if n == 0 {
		return ""
	}
	wait := fmt.Sprintf("task_wait {\"task_ids\": [%q]}", ids[0])
	if len(ids) > 1 {
		wait = fmt.Sprintf("task_wait {\"task_ids\": [%q, …]}", ids[0])
	}
	then := " or end your turn: a result comes back to you by itself when the task finishes."
	if !s.pushes(owner) {
		then = ": it returns as soon as a task finishes, or the line appears, and costs one turn however long it waits."
	}
	if n < pollPlainly {
		return fmt.Sprintf("Nothing has changed in %s since you last looked. Rather than reading again, wait with %s (with until, a regular expression, to wait for a line of output)%s", what, wait, then)
	}
	return fmt.Sprintf("You have read %s %d times in a row and nothing changed: each read spends a turn and learns nothing. Stop polling. Wait with %s (with until to wait for a line of output)%s", what, n+1, wait, then)
}
