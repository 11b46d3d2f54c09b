package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// TestPermitGatesEveryAgentsCalls: a refused call is not run and the
// model gets why; an allowed one runs; a sub-agent's calls are asked about
// too, naming the sub-agent, and a refusal reaches the sub-agent as its
// call's error; a call whose arguments do not fit its tool is refused
// without asking.
func TestPermitGatesEveryAgentsCalls(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "touch refused"}}, {"name": "task_list", "input": {}}]},
		{"expect": "not run: the user said no", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "worker", "prompt": "go", "bogus": true}}]},
		{"expect": "bogus", "tool_calls": [{"name": "spawn_agent", "input": {"profile": "worker", "prompt": "go"}}]},
		{"expect": "the sub-agent saw: .*not run: the user said no", "text": "done"}
	], "agents": {"worker": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo from the sub-agent"}}]},
		{"expect": "not run: the user said no", "text": "the sub-agent saw: This call was not run: the user said no"}
	]}}`
	var mu sync.Mutex
	var asked []string
	cfg := agent.Config{
		Profiles: []agent.Profile{{Name: "worker", Description: "works", Tools: []string{"bash"}}},
		Permit: func(ctx context.Context, c agent.ToolCall) error {
			mu.Lock()
			defer mu.Unlock()
			who := "top"
			if c.Agent != "" {
				who = c.Agent + "(" + c.Profile + ")"
			}
			asked = append(asked, who+":"+c.Tool.Name+":"+c.Tool.Safety.String())
			if c.Tool.Name == "bash" {
				return errors.New("the user said no")
			}
			return nil
		},
	}
	s := newSession(t, script, cfg)
	if answer, err := s.Turn(t.Context(), "go", agent.Discard); err != nil || answer != "done" {
		t.Fatalf("Turn() = %q, %v", answer, err)
	}
	mu.Lock()
	got := strings.Join(asked, " ")
	mu.Unlock()
	want := "top:bash:execute top:task_list:read_only top:spawn_agent:execute agent:1(worker):bash:execute"
	if got != want && got != "top:task_list:read_only top:bash:execute top:spawn_agent:execute agent:1(worker):bash:execute" {
		t.Errorf("Permit was asked about\n  %s\nwant\n  %s\n(the spawn_agent with an unknown field not at all)", got, want)
	}
	if res := s.History()[2].Content[0]; !res.IsError || !strings.Contains(res.Text, "the user said no") {
		t.Errorf("refused call's result = %+v, want an error saying why", res)
	}
	if res := s.History()[4].Content[0]; !res.IsError || !strings.Contains(res.Text, "bogus") {
		t.Errorf("ill-formed spawn_agent's result = %+v, want an error naming the field", res)
	}
}

// TestTurnEndSaysWhyTheModelStopped: a refusal reaches the sink.
func TestTurnEndSaysWhyTheModelStopped(t *testing.T) {
	s := newSession(t, `{"turns": [{"text": "I can't help with that.", "stop": "refusal"}]}`, agent.Config{})
	var mu sync.Mutex
	var stop provider.StopReason
	sink := agent.SinkFunc(func(e agent.Event) {
		if e.Type == agent.TurnEnd {
			mu.Lock()
			stop = e.Stop
			mu.Unlock()
		}
	})
	if _, err := s.Turn(t.Context(), "do something bad", sink); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if stop != provider.Refusal {
		t.Errorf("TurnEnd.Stop = %q, want refusal", stop)
	}
}

// TestCommands: the commands a person types see every task.
func TestCommands(t *testing.T) {
	script := `{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "echo hello; sleep 100", "run_in_background": true}}]}, {"text": "started"}]}`
	s := newSession(t, script, agent.Config{})
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	run := func(line string) (string, bool) {
		var lines []string
		ok := s.Command(t.Context(), line, func(l string) { lines = append(lines, l) })
		return strings.Join(lines, "\n"), ok
	}
	if out, ok := run("/tasks"); !ok || !strings.Contains(out, "shell:1") || !strings.Contains(out, "running") {
		t.Errorf("/tasks = %q, %v", out, ok)
	}
	// /inspect on a shell: no sub-agent's "iteration 0".
	if out, _ := run("/inspect shell:1"); !strings.HasPrefix(out, "shell:1 running: echo hello; sleep 100 (") || !strings.Contains(out, " ago)") || strings.Contains(out, "iteration") {
		t.Errorf("/inspect shell:1 = %q", out)
	}
	// /help says what each command does.
	if out, _ := run("/help"); !strings.Contains(out, "/cancel ID   cancel a task") || strings.Count(out, "\n") != len(agent.Commands())-1 {
		t.Errorf("/help = %q", out)
	}
	if out, _ := run("/cancel"); !strings.Contains(out, "usage: /cancel ID") {
		t.Errorf("/cancel without an id = %q", out)
	}
	if out, _ := run("/cancel shell:1"); out != "cancelling shell:1" {
		t.Errorf("/cancel shell:1 = %q", out)
	}
	if out, _ := run("/wait shell:1"); !strings.HasSuffix(out, "shell:1 canceled") {
		t.Errorf("/wait shell:1 = %q", out)
	}
	if out, ok := run("/bogus"); ok || !strings.Contains(out, "/help") {
		t.Errorf("/bogus = %q, %v; want false and a pointer to /help", out, ok)
	}
	if len(agent.Commands()) != 5 {
		t.Errorf("Commands() = %v", agent.Commands())
	}
}

// TestIsCommand: a surface tells a typed command (/help included, which
// Commands does not list) from a prompt with the same table Command
// dispatches on.
func TestIsCommand(t *testing.T) {
	for line, want := range map[string]bool{
		"/help":            true,
		"  /wait shell:1 ": true,
		"/cancel":          true, // Command answers it with its usage
		"/quit":            false,
		"/bogus":           false,
		"tasks":            false,
		"/tasks\tnow":      false,
		"please /tasks":    false,
		"":                 false,
	} {
		if got := agent.IsCommand(line); got != want {
			t.Errorf("IsCommand(%q) = %v, want %v", line, got, want)
		}
	}
	for _, c := range agent.Commands() {
		if !agent.IsCommand("/" + c.Name) {
			t.Errorf("Commands() lists %s, which IsCommand refuses", c.Name)
		}
	}
}

// TestTasksCommandPages (issue 35): /tasks printed every task, a thousand
// lines at a thousand tasks. It shows 50, says how many more and how to
// see them, and narrows by status and kind.
func TestTasksCommandPages(t *testing.T) {
	s := newSession(t, `{"turns": [{"text": "nothing"}]}`, agent.Config{Tasks: task.Options{MaxRunning: 100}})
	top := s.Table().View("")
	block := func(ctx context.Context, _ *task.Handle) (string, error) { <-ctx.Done(); return "", nil }
	for range 60 {
		if _, err := top.Spawn(task.Spec{Kind: "job", Label: "a job"}, block); err != nil {
			t.Fatal(err)
		}
	}
	defer s.Table().CancelAll()
	run := func(line string) []string {
		var lines []string
		s.Command(t.Context(), line, func(l string) { lines = append(lines, l) })
		return lines
	}
	first := run("/tasks")
	if len(first) != 51 || !strings.HasPrefix(first[50], "… 10 more: /tasks job:50 ") {
		t.Fatalf("/tasks = %d lines, last %q; want 50 and a line saying 10 more", len(first), first[len(first)-1])
	}
	if next := run("/tasks job:50"); len(next) != 10 || !strings.HasPrefix(next[0], "job:51 ") {
		t.Errorf("/tasks job:50 = %q, want the last 10", next)
	}
	if got := run("/tasks finished"); len(got) != 1 || got[0] != "no tasks" {
		t.Errorf("/tasks finished = %q", got)
	}
	if got := run("/tasks running job"); len(got) != 51 {
		t.Errorf("/tasks running job = %d lines, want 51", len(got))
	}
	// A word no task has as its kind is said so, not "no tasks" (an
	// outsider's /tasks runing read as nothing running).
	if got := run("/tasks runing"); len(got) != 1 || !strings.HasPrefix(got[0], `no tasks of kind "runing" (did you mean running?); the kinds here: job;`) {
		t.Errorf("/tasks runing = %q", got)
	}
	if got := run("/tasks shell"); len(got) != 1 || !strings.HasPrefix(got[0], `no tasks of kind "shell"; the kinds here: job;`) {
		t.Errorf("/tasks shell = %q", got)
	}
	if got := run("/tasks JOB"); len(got) != 1 || !strings.HasPrefix(got[0], `no tasks of kind "JOB" (did you mean job?)`) {
		t.Errorf("/tasks JOB = %q", got)
	}
	if got := run("/task"); len(got) != 1 || got[0] != "unknown command /task (did you mean /tasks?); /help lists them" {
		t.Errorf("/task = %q", got)
	}
	// A second word of a sort is refused, not silently the one kept, and
	// a word with a colon that is no task id is not a cursor (outsider
	// 16: /tasks finished unfinished listed the unfinished; /tasks bogus:1
	// listed every task).
	for line, want := range map[string]string{
		"/tasks finished unfinished": "/tasks takes one status; got finished and unfinished",
		"/tasks running failed":      "/tasks takes one status; got running and failed",
		"/tasks job shell":           "/tasks takes one kind; got job and shell",
		"/tasks bogus:1":             "no task bogus:1 here to page after; /tasks alone lists from the first",
		"/tasks job:x":               `"job:x" is not a task id (such as shell:3)`,
		"/tasks job:3 job:5":         "/tasks takes one task id to page after; got job:3 and job:5",
	} {
		if got := run(line); len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("%s = %q, want one line beginning %q", line, got, want)
		}
	}
	if got := run("/tasks job:55 running job"); len(got) != 5 || !strings.HasPrefix(got[0], "job:56 ") {
		t.Errorf("/tasks job:55 running job = %q, want job:56 to job:60", got)
	}
	if got := run("/tasks job:60"); len(got) != 1 || got[0] != "no tasks after job:60; /tasks alone lists from the first" {
		t.Errorf("/tasks job:60 (the last) = %q; want it said that none comes after it", got)
	}
	if got := run("/tasks job:58 job:58"); len(got) != 2 || !strings.HasPrefix(got[0], "job:59 ") {
		t.Errorf("/tasks job:58 job:58 = %q; want job:59 and job:60", got)
	}
	if got := run("/tasks running job running job"); len(got) != 51 || got[50] != "… 10 more: /tasks running job job:50 (narrow with unfinished, finished, a status or a kind)" {
		t.Errorf("/tasks running job running job = %d lines, last %q; want the words said twice taken once", len(got), got[len(got)-1])
	}
}

// Issue 37 item 10: three bash calls in one turn took their ids in
// whichever order their goroutines reached the table (shell:1 was the
// third call in 2 of 3 runs), and a task that waited for a place was
// said to have "Started in the background". Here the first call is held
// up before it starts (its permission is slow): the others wait for it,
// so ids follow the calls; with one task running at a time the others'
// notes say they are queued.
func TestParallelCallsTakeIdsInCallOrder(t *testing.T) {
	script := `{"turns": [
		{"tool_calls": [
			{"name": "bash", "input": {"command": "echo first; sleep 0.2", "run_in_background": true}},
			{"name": "bash", "input": {"command": "echo second", "run_in_background": true}},
			{"name": "bash", "input": {"command": "echo third", "run_in_background": true}}]},
		{"text": "done"}
	]}`
	var s *agent.Session // set before the turn that calls Permit
	cfg := agent.Config{
		Tasks: task.Options{MaxRunning: 1},
		Permit: func(ctx context.Context, c agent.ToolCall) error {
			if !strings.Contains(string(c.Input), "first") {
				return nil
			}
			// Held until another call has started a task, which it may not
			// before this one has: then for a while.
			deadline := time.Now().Add(300 * time.Millisecond)
			for len(s.Table().List()) == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			return nil
		},
	}
	s = newSession(t, script, cfg)
	if answer, err := s.Turn(t.Context(), "go", agent.Discard); err != nil || answer != "done" {
		t.Fatalf("Turn() = %q, %v", answer, err)
	}
	for _, i := range s.Table().List() {
		want := map[string]string{"shell:1": "first", "shell:2": "second", "shell:3": "third"}[i.ID]
		if !strings.Contains(i.Label, want) {
			t.Errorf("%s is %q, want the %s call", i.ID, i.Label, want)
		}
	}
	results := s.History()[2].Content
	for n, r := range results {
		queued := strings.Contains(r.Text, "Queued in the background as")
		if queued != (n > 0) || strings.Contains(r.Text, "Started") == (n > 0) {
			t.Errorf("call %d's result: %s", n+1, r.Text)
		}
	}
}
