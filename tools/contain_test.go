//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/tools"
)

// TestTaskCancelEndsDaemons: what a background shell daemonizes is
// counted by task_inspect and ended by task_cancel, and the task is
// canceled only once none of it is left.
func TestTaskCancelEndsDaemons(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) not installed")
	}
	kv := "OFFSTAGE_TEST_DAEMONS=" + t.Name()
	e := newEnv(t, tools.Config{Process: proc.Config{Env: append(os.Environ(), kv)}})
	id := e.background(t, e.top, "setsid -f sleep 1000; (setsid sh -c 'sleep 1000 & exit' &); exec sleep 1000")
	var out tools.InspectOutput
	deadline := time.Now().Add(20 * time.Second)
	for out.Processes != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("task_inspect = %+v, want processes 3 (the shell and two daemons); /proc shows %v", out, proctest.Marked(kv))
		}
		time.Sleep(10 * time.Millisecond)
		ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &out)
	}
	if proc.Containment().Mode == "cgroup" && out.MemoryMiB <= 0 {
		t.Errorf("task_inspect = %+v, want the memory of its 3 processes (memory_mib) from its cgroup", out)
	}
	var cancelled tools.CancelOutput
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+id+`"}`, &cancelled)
	waitDone(t, e.top, id)
	if left := proctest.Marked(kv); len(left) != 0 {
		t.Errorf("after task_cancel the task ended with processes %v alive", left)
	}
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &out)
	if out.Status != "canceled" || out.Processes != 0 {
		t.Errorf("task_inspect after cancel = %+v, want canceled with no processes", out)
	}
}

// TestBashSaysWhatItLeftBehind: a foreground command that daemonizes and
// exits has its daemon killed, and the model is told.
func TestBashSaysWhatItLeftBehind(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) not installed")
	}
	kv := "OFFSTAGE_TEST_LEFT=" + t.Name()
	e := newEnv(t, tools.Config{Process: proc.Config{Env: append(os.Environ(), kv)}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "setsid -f sleep 1000; echo started"}`, &out)
	if !strings.Contains(out.Output+out.Note, "left") || !strings.Contains(out.Output+out.Note, "run_in_background") {
		t.Errorf("bash = %+v, want it to say what the command left running was killed, and how to keep a server", out)
	}
	if left := proctest.Marked(kv); len(left) != 0 {
		t.Errorf("the daemon outlived its command: %v", left)
	}
}

// TestTaskInspectShowsPorts: the port a background server listens on.
func TestTaskInspectShowsPorts(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "exec python3 -u -m http.server 0 --bind 127.0.0.1")
	var out tools.InspectOutput
	// The server listens, then says so: wait for both.
	for deadline := time.Now().Add(20 * time.Second); len(out.Listening) == 0 || !strings.Contains(out.OutputTail, "port "); {
		if time.Now().After(deadline) {
			t.Fatalf("task_inspect = %+v, want the server's port in listening", out)
		}
		time.Sleep(10 * time.Millisecond)
		ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &out)
	}
	if !strings.Contains(out.OutputTail, "port "+strconv.Itoa(out.Listening[0])) {
		t.Errorf("listening %v, but the server said %q", out.Listening, out.OutputTail)
	}
	var cancelled tools.CancelOutput
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+id+`"}`, &cancelled)
	waitDone(t, e.top, id)
}

// TestAStoppedCommandLeftNothing (an outsider's finding): a foreground
// command stopped with its turn, whose children outlived its shell for
// the stop's grace, was told "The command left 2 processes running …
// they were killed when it exited", advice for a command that exits and
// leaves daemons, which this one did not.
func TestAStoppedCommandLeftNothing(t *testing.T) {
	kv := "OFFSTAGE_TEST_STOPPED=" + t.Name()
	e := newEnv(t, tools.Config{Process: proc.Config{Env: append(os.Environ(), kv), Grace: 200 * time.Millisecond}})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for len(proctest.Marked(kv)) < 3 { // the shell, the subshell and its sleep
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res, err := e.set.Tool("bash").Call(ctx, e.top, json.RawMessage(`{"command": "(trap '' TERM; sleep 1000) & sleep 1000"}`))
	if err != nil {
		t.Fatal(err)
	}
	var out tools.BashOutput
	if err := json.Unmarshal([]byte(res.Text), &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "canceled" || strings.Contains(out.Note, "left") || strings.Contains(out.Note, "run_in_background") {
		t.Errorf("bash stopped with its turn = %+v, want canceled with no note of what it left running", out)
	}
	if left := proctest.Marked(kv); len(left) != 0 {
		t.Errorf("processes of the stopped command outlived it: %v", left)
	}
}
