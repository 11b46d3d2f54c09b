package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
)

// Issue 37 item 12: the trace was rough. task_wait and task_list results
// were cut one-line JSON with literal \n; "all background work is done"
// came after foreground work alone; the user's own Ctrl-C read "✗ the
// turn failed: turn canceled"; a one-shot's failure was printed twice;
// the demo showed ten heartbeat lines.
func TestTheTraceReadsWell(t *testing.T) {
	var b bytes.Buffer
	p := &printer{w: &b, errorsLater: true}
	p.Event(agent.Event{Type: agent.ToolResultEvent, Tool: "bash", Text: `{"task_id":"shell:1","status":"completed","exit_code":0,"output":"hi\n"}`})
	p.Event(agent.Event{Type: agent.TaskEvent, Task: &task.Event{Type: task.EventIdle}})
	p.Event(agent.Event{Type: agent.ToolResultEvent, Tool: "task_wait", Text: `{"done":[{"task_id":"shell:2","status":"completed","exit_code":0,"label":"make","result":"a\nb\nc\nd\n"}],"running":[{"task_id":"shell:3","status":"running","label":"serve"}]}`})
	p.Event(agent.Event{Type: agent.ToolResultEvent, Tool: "bash", Text: `{"task_id":"shell:4","status":"running","note":"Started"}`})
	p.Event(agent.Event{Type: agent.TaskEvent, Task: &task.Event{Type: task.EventIdle}})
	for _, beat := range []string{"waiting for the model", "running tool bash", "waiting for the model", "finished"} {
		p.Event(agent.Event{Type: agent.TaskEvent, Task: &task.Event{Type: task.EventProgress, ID: "agent:1", Kind: agent.TaskKind, Iteration: 1, Text: beat}})
	}
	p.Event(agent.Event{Type: agent.TurnEnd, Err: fmt.Errorf("x: %w", agent.ErrTurnCanceled)})
	p.Event(agent.Event{Type: agent.TurnEnd, Err: errors.New("the model broke")})
	got := b.String()
	for _, want := range []string{"← task_wait: shell:2 completed, exit code 0: make\n", "      │ d\n", "      shell:3 running: serve\n", "⏹ interrupted\n", "  · agent:1 step 1: bash\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the trace lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "all background work is done"); n != 1 {
		t.Errorf("\"all background work is done\" %d times, want once (after shell:4 only):\n%s", n, got)
	}
	for _, unwanted := range []string{`\n`, "turn failed", "model broke", "{", "waiting for the model", "finished"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("the trace shows %q:\n%s", unwanted, got)
		}
	}
}
