package tools_test

import (
	"strings"
	"testing"

	"github.com/offstage/offstage/tools"
)

// TestBashOnATerminal: tty: true gives the command a terminal, and
// task_input's keys drive it: text, then ctrl-d ends cat's input.
func TestBashOnATerminal(t *testing.T) {
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "test -t 0 && test -t 1 && echo TTY-$((2+3))", "tty": true}`, &out)
	if out.Status != "completed" || !strings.Contains(out.Output, "TTY-5") {
		t.Errorf("bash on a terminal = %+v", out)
	}
	ok(t, e, e.top, "bash", `{"command": "cat; echo CAT-$((1+1))", "tty": true, "run_in_background": true}`, &out)
	id := out.TaskID
	var in tools.TaskInputResult
	ok(t, e, e.top, "task_input", `{"task_id": "`+id+`", "text": "hello", "keys": ["enter", "ctrl-d"]}`, &in)
	if in.BytesWritten != len("hello\r\x04") {
		t.Errorf("task_input = %+v, want hello, enter and ctrl-d written", in)
	}
	var w tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "timeout_seconds": 20}`, &w)
	if len(w.Done) != 1 || w.Done[0].Status != "completed" || !strings.Contains(w.Done[0].Result, "CAT-2") || !strings.Contains(w.Done[0].Result, "hello") {
		t.Errorf("cat on a terminal after ctrl-d = %+v", w)
	}
}

func TestTerminalInputRefusals(t *testing.T) {
	e := newEnv(t, tools.Config{})
	if got := e.refused(t, e.top, "bash", `{"command": "true", "tty": true, "interactive": false}`); !strings.Contains(got, "tty: true keeps its input open") {
		t.Errorf("tty with interactive false = %q", got)
	}
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "sleep 100", "tty": true, "run_in_background": true}`, &out)
	if got := e.refused(t, e.top, "task_input", `{"task_id": "`+out.TaskID+`", "keys": ["ctrl-q", "hyper-x"]}`); !strings.Contains(got, `There is no key "hyper-x"`) || !strings.Contains(got, "page-down") {
		t.Errorf("an unknown key = %q", got)
	}
}
