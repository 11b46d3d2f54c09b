package tools_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestPollNoticed: issue 25 item 3. Reading a silent running shell again
// and again cost a turn each and said nothing about it; now the second
// and later reads say nothing changed and point to task_wait, plainly
// after a few, and news resets the count.
func TestPollNoticed(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var started tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "read line; echo \"got $line\"; sleep 1000", "run_in_background": true, "interactive": true}`, &started)
	id := started.TaskID
	waitAttached(t, e.top, id)
	var out tools.TaskOutputResult
	var notes []string
	for range 4 {
		ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &out)
		notes = append(notes, out.Note)
	}
	if strings.Contains(notes[0], "changed") {
		t.Errorf("the first read says nothing changed: %q", notes[0])
	}
	for i, n := range notes[1:] {
		if !strings.Contains(n, "Nothing has changed") && !strings.Contains(n, "nothing changed") || !strings.Contains(n, "task_wait") || !strings.Contains(n, "end your turn") {
			t.Errorf("read %d: note = %q, want it to say nothing changed and point to task_wait", i+2, n)
		}
	}
	if !strings.Contains(notes[3], "4 times in a row") || !strings.Contains(notes[3], "Stop polling") {
		t.Errorf("the 4th read is not plainer: %q", notes[3])
	}
	// task_inspect counts with task_output.
	var in tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &in)
	if !strings.Contains(in.Note, "5 times in a row") {
		t.Errorf("task_inspect note = %q, want the 5th poll in a row", in.Note)
	}
	// News resets the count: the next read is not a poll.
	var inp tools.TaskInputResult
	ok(t, e, e.top, "task_input", `{"task_id": "`+id+`", "text": "x\n"}`, &inp)
	waitOutput(t, e.top, id, "got x")
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "since": 0}`, &out)
	if strings.Contains(out.Note, "changed") {
		t.Errorf("a read after new output says nothing changed: %q", out.Note)
	}
	// task_list notices a poll of the whole list. The shell's activity
	// may still move once after its output (its heartbeat reports the
	// output it already printed), so the list is read until it holds
	// still.
	var list tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &list)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok(t, e, e.top, "task_list", `{}`, &list)
		if strings.Contains(list.Note, "Nothing has changed in your tasks") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(list.Note, "Nothing has changed in your tasks") || !strings.Contains(list.Note, id) {
		t.Errorf("task_list note = %q", list.Note)
	}
}

// TestPollNoteOverMCP: where results do not come back by themselves, the
// note does not tell the caller to end its turn and wait for them.
func TestPollNoteOverMCP(t *testing.T) {
	e := newEnv(t, tools.Config{NoPush: true})
	id := e.background(t, e.top, "sleep 1000")
	var out tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &out)
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`"}`, &out)
	if !strings.Contains(out.Note, "task_wait") || strings.Contains(out.Note, "end your turn") {
		t.Errorf("note = %q, want task_wait and no promise of a result by itself", out.Note)
	}
}

// TestPollsAreCountedPerOwner pins the poll counter's key (issue 34,
// item 10): each caller's reads are its own. The top level and a
// sub-agent each list their own running task in turn: each one's second
// look is a poll of its own tasks, though the other looked in between at
// something else; keyed by the task list alone, the two would reset each
// other's count forever.
func TestPollsAreCountedPerOwner(t *testing.T) {
	e := newEnv(t, tools.Config{})
	views := make(chan *task.View, 1)
	if _, err := e.top.Spawn(task.Spec{Kind: "agent"}, func(ctx context.Context, h *task.Handle) (string, error) {
		views <- h.View() // a sub-agent's view: its own tasks
		<-ctx.Done()
		return "", nil
	}); err != nil {
		t.Fatal(err)
	}
	agent := <-views
	ids := map[*task.View]string{}
	for _, v := range []*task.View{e.top, agent} {
		ids[v] = e.background(t, v, "sleep 1000")
	}
	var notes []string
	for range 2 {
		for _, v := range []*task.View{e.top, agent} {
			var list tools.ListOutput
			ok(t, e, v, "task_list", `{}`, &list)
			notes = append(notes, list.Note)
		}
	}
	if notes[0] != "" || notes[1] != "" {
		t.Errorf("first looks: %q, %q; want no note", notes[0], notes[1])
	}
	for i, v := range []*task.View{e.top, agent} {
		other := ids[agent]
		if v == agent {
			other = ids[e.top]
		}
		if n := notes[2+i]; !strings.Contains(n, "Nothing has changed in your tasks") || strings.Contains(n, `"`+other+`"`) {
			t.Errorf("owner %q's second look: note %q, want a poll of its own tasks, not of %s", v.Owner(), n, other)
		}
	}
}
