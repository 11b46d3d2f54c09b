package agent_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestATurnEndsItsLifetimeTurnTasks: a real shell started with lifetime
// turn ends when the turn does, by its limit; one of lifetime session
// runs on; the session's close then ends it, naming why (issue 38).
func TestATurnEndsItsLifetimeTurnTasks(t *testing.T) {
	model := modelFunc(func(req provider.Request) provider.Response {
		switch len(req.Messages) {
		case 1:
			return toolCall("bash", `{"command": "sleep 100", "run_in_background": true, "lifetime": "turn"}`)
		case 3:
			return toolCall("bash", `{"command": "sleep 100", "run_in_background": true}`)
		}
		return text("done")
	})
	s, err := agent.New(context.Background(), agent.Config{Model: model, NoContinuation: true,
		Tools: tools.Config{Process: proc.Config{Dir: t.TempDir(), Env: os.Environ()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	turnTask, _ := s.Table().Info("shell:1")
	if turnTask.State != task.Canceled || turnTask.EndedBy != task.ByLimit || !strings.Contains(turnTask.EndReason, "lifetime turn") {
		t.Errorf("the lifetime turn shell after its turn: %+v", turnTask)
	}
	if sessionTask, _ := s.Table().Info("shell:2"); sessionTask.State != task.Running {
		t.Errorf("the lifetime session shell after the turn: %+v, want running", sessionTask)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.CloseCause(ctx, task.Closed("run: /quit")); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Table().Info("shell:2"); info.EndedBy != task.BySession || info.EndReason != "run: /quit" {
		t.Errorf("the session's shell after /quit: %+v, want ended by the session (run: /quit)", info)
	}
}

// TestASubAgentsShellEndsByItsParent: cancelling a sub-agent (the model's
// task_cancel) ends the shell it started as its parent's, naming it; the
// sub-agent itself by the model.
func TestASubAgentsShellEndsByItsParent(t *testing.T) {
	started := make(chan struct{})
	model := modelFunc(func(req provider.Request) provider.Response {
		switch {
		case req.Agent == "" && len(req.Messages) == 1:
			return toolCall("spawn_agent", `{"profile": "worker", "prompt": "go", "run_in_background": true}`)
		case req.Agent == "worker" && len(req.Messages) == 1:
			return toolCall("bash", `{"command": "sleep 100", "run_in_background": true}`)
		case req.Agent == "worker" && len(req.Messages) == 3:
			close(started)
			return toolCall("bash", `{"command": "sleep 100"}`) // runs until cancelled
		case req.Agent == "" && len(req.Messages) == 3:
			<-started
			return toolCall("task_cancel", `{"task_id": "agent:1"}`)
		}
		return text("done")
	})
	s, err := agent.New(context.Background(), agent.Config{Model: model, NoContinuation: true,
		Tools:    tools.Config{Process: proc.Config{Dir: t.TempDir(), Env: os.Environ()}},
		Profiles: []agent.Profile{{Name: "worker", Description: "works"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	done, _ := s.Table().Done("agent:1")
	<-done
	var shell task.Info
	for _, i := range s.Table().List() {
		if i.Owner == "agent:1" && i.Kind == "shell" && i.Label == "sleep 100" {
			shell = i
			break
		}
	}
	d, _ := s.Table().Done(shell.ID)
	<-d
	shell, _ = s.Table().Info(shell.ID)
	if shell.EndedBy != task.ByParent || !strings.Contains(shell.EndReason, "its owner agent:1 ended (model: task_cancel)") {
		t.Errorf("the sub-agent's shell: %+v, want ended by its parent agent:1", shell)
	}
	if a, _ := s.Table().Info("agent:1"); a.EndedBy != task.ByModel {
		t.Errorf("the sub-agent: %+v, want ended by the model", a)
	}
}

// TestSlashCancelIsAUsers: /cancel (the CLI's and the ACP client's) ends
// a real shell by a user.
func TestSlashCancelIsAUsers(t *testing.T) {
	model := modelFunc(func(req provider.Request) provider.Response {
		if len(req.Messages) == 1 {
			return toolCall("bash", `{"command": "sleep 100", "run_in_background": true}`)
		}
		return text("done")
	})
	s, err := agent.New(context.Background(), agent.Config{Model: model, NoContinuation: true,
		Tools: tools.Config{Process: proc.Config{Dir: t.TempDir(), Env: os.Environ()}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	s.Command(t.Context(), "/cancel shell:1", func(string) {})
	done, _ := s.Table().Done("shell:1")
	<-done
	if info, _ := s.Table().Info("shell:1"); info.EndedBy != task.ByUser || info.EndReason != "/cancel" {
		t.Errorf("after /cancel: %+v, want ended by a user (/cancel)", info)
	}
}

// TestASubAgentAtItsIterationCapEndsByALimit: a sub-agent still calling
// tools at its profile's max_iterations ends by a limit that says so.
func TestASubAgentAtItsIterationCapEndsByALimit(t *testing.T) {
	model := modelFunc(func(req provider.Request) provider.Response {
		switch {
		case req.Agent == "worker":
			return toolCall("task_list", `{}`) // never done
		case len(req.Messages) == 1:
			return toolCall("spawn_agent", `{"profile": "worker", "prompt": "go"}`)
		}
		return text("done")
	})
	s, err := agent.New(context.Background(), agent.Config{Model: model, NoContinuation: true,
		Tools:    tools.Config{Process: proc.Config{Dir: t.TempDir(), Env: os.Environ()}},
		Profiles: []agent.Profile{{Name: "worker", Description: "works", MaxIterations: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Table().Info("agent:1"); info.State != task.Failed || info.EndedBy != task.ByLimit || !strings.Contains(info.EndReason, "iterations") {
		t.Errorf("the sub-agent at its cap: %+v, want failed, ended by a limit (iterations)", info)
	}
}
