package proc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// table returns a task table closed (and checked) at the end of the test.
func table(t *testing.T) (*task.Table, *task.View) {
	t.Helper()
	tb := task.New(t.Context(), task.Options{})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tb.Close(ctx); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return tb, tb.View("")
}

func spawnShell(t *testing.T, v *task.View, cfg proc.Config, opts proc.ShellOptions) string {
	t.Helper()
	id, err := proc.SpawnShell(v, cfg, opts)
	if err != nil {
		t.Fatalf("SpawnShell(%q) = %v", cfg.Command, err)
	}
	return id
}

func waitResult(t *testing.T, v *task.View, id string) task.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		r, err := v.Wait(ctx, []string{id}, task.All)
		if err == nil && len(r.Done) == 0 && len(r.Notices) > 0 {
			continue // a notice ended the wait, not the task
		}
		if err != nil || len(r.Done) != 1 {
			t.Fatalf("Wait(%s) = %+v, %v", id, r, err)
		}
		return r.Done[0]
	}
}

// processOf returns the process behind a shell task, once it started.
func processOf(t *testing.T, v *task.View, id string) *proc.Process {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := v.Output(id)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := out.(*proc.Process); ok {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never attached its process", id)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestShellTaskCompletes(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "echo hello; echo world"}, proc.ShellOptions{})
	if !strings.HasPrefix(id, "shell:") {
		t.Errorf("id = %q, want shell:N", id)
	}
	r := waitResult(t, top, id)
	if r.State != task.Completed || r.Err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("result = %v %v exit %v", r.State, r.Err, r.ExitCode)
	}
	if r.Label != "echo hello; echo world" {
		t.Errorf("label = %q", r.Label)
	}
	if !strings.HasPrefix(r.Text, "exit status 0 after ") || !strings.HasSuffix(r.Text, ":\nhello\nworld\n") {
		t.Errorf("result text = %q", r.Text)
	}
}

func TestShellTaskFailures(t *testing.T) {
	_, top := table(t)
	for _, tc := range []struct {
		cmd, prefix string
	}{
		{"echo oops; exit 3", "exit status 3 after"},
		{"kill -KILL $$", "killed by SIGKILL after"}, // a signal we did not send
	} {
		r := waitResult(t, top, spawnShell(t, top, proc.Config{Command: tc.cmd}, proc.ShellOptions{}))
		var ee *proc.ExitError
		if r.State != task.Failed || !errors.As(r.Err, &ee) || ee.Stopped {
			t.Errorf("%q: %v %v, want failed with an ExitError not stopped by us", tc.cmd, r.State, r.Err)
		}
		if !strings.HasPrefix(r.Text, tc.prefix) {
			t.Errorf("%q: text %q, want prefix %q", tc.cmd, r.Text, tc.prefix)
		}
	}
}

func TestCancellingAShellTaskStopsItsGroup(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "sleep 1000 & sleep 1000 & wait"}, proc.ShellOptions{})
	p := processOf(t, top, id)
	waitGroupSize(t, p.PID(), 3, false, 5*time.Second)
	if already, err := top.Cancel(id); err != nil || already {
		t.Fatalf("Cancel() = %v, %v", already, err)
	}
	r := waitResult(t, top, id)
	if r.State != task.Canceled || !strings.HasPrefix(r.Text, "stopped (killed by SIGTERM)") {
		t.Errorf("result = %v %q, want canceled and stopped", r.State, r.Text)
	}
	if m := groupMembers(t, p.PID()); len(m) != 0 {
		t.Errorf("group %d survived the cancel: %v", p.PID(), m)
	}
}

func TestShellTaskTimeoutStopsTheGroup(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "sleep 1000 & wait"}, proc.ShellOptions{Timeout: 200 * time.Millisecond})
	p := processOf(t, top, id)
	r := waitResult(t, top, id)
	if r.State != task.TimedOut || !errors.Is(r.Err, task.ErrTimedOut) {
		t.Errorf("result = %v %v, want timed_out", r.State, r.Err)
	}
	if m := groupMembers(t, p.PID()); len(m) != 0 {
		t.Errorf("group %d survived the timeout: %v", p.PID(), m)
	}
}

func TestShellTaskPeekAndBoundedResult(t *testing.T) {
	_, top := table(t)
	id := spawnShell(t, top, proc.Config{Command: "seq 1 100000; echo \x1b[32mdone\x1b[0m; sleep 1000"},
		proc.ShellOptions{ResultLines: 5, ResultBytes: 100})
	p := processOf(t, top, id)
	readUntil(t, p, "done")
	peek, err := top.Peek(id, 3)
	if err != nil {
		t.Fatal(err)
	}
	if peek.Output != "99999\n100000\ndone\n" || peek.State != task.Running {
		t.Errorf("Peek = %v %q, want running and the cleaned last 3 lines", peek.State, peek.Output)
	}
	top.Cancel(id)
	r := waitResult(t, top, id)
	if len(r.Text) > 200 || !strings.HasSuffix(r.Text, "done\n") || !strings.Contains(r.Text, "last ") {
		t.Errorf("result text (%d bytes) = %q, want a short, marked tail", len(r.Text), r.Text)
	}
}

func TestClosingTheTableReapsEveryShell(t *testing.T) {
	tb := task.New(t.Context(), task.Options{})
	top := tb.View("")
	var pids []int
	for range 3 {
		id := spawnShell(t, top, proc.Config{Command: "sleep 1000 & sleep 1000 & wait", Grace: time.Second}, proc.ShellOptions{})
		pids = append(pids, processOf(t, top, id).PID())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if m := groupMembers(t, pid); len(m) != 0 {
			t.Errorf("group %d survived Close: %v", pid, m)
		}
	}
	for _, r := range top.Drain() {
		if r.State != task.Canceled {
			t.Errorf("%s = %v, want canceled", r.ID, r.State)
		}
	}
}

func TestLabel(t *testing.T) {
	for in, want := range map[string]string{
		"ls -la":                "ls -la",
		"  make \n  test\t-v ":  "make test -v",
		strings.Repeat("日", 70): strings.Repeat("日", 59) + "…",
	} {
		if got := proc.Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}
