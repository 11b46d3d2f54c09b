package agent_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/tools"
)

// TestProfileLimitsForItsShellsOnly: a profile's Limits cap that
// sub-agent's shells, not the session's other shells (issue 22 item 3).
func TestProfileLimitsForItsShellsOnly(t *testing.T) {
	const hog = "head -c 200m /dev/zero | tail; echo hog done"
	var mu sync.Mutex
	results := map[string]string{} // agent → its bash result
	model := modelFunc(func(req provider.Request) provider.Response {
		last := req.Messages[len(req.Messages)-1]
		for _, b := range last.Content {
			if b.Type == provider.ToolResult && strings.Contains(b.Text, "shell:") {
				mu.Lock()
				results[req.Agent] = b.Text
				mu.Unlock()
			}
		}
		switch {
		case req.Agent == "" && len(req.Messages) == 1:
			return toolCall("bash", `{"command": "`+hog+`"}`)
		case req.Agent == "" && len(req.Messages) == 3:
			return toolCall("spawn_agent", `{"profile": "small", "prompt": "go"}`)
		case req.Agent == "small" && len(req.Messages) == 1:
			return toolCall("bash", `{"command": "`+hog+`"}`)
		}
		return text("done")
	})
	limits := resource.Limits{Memory: 64 << 20}
	s, err := agent.New(context.Background(), agent.Config{Model: model,
		Tools:    tools.Config{Process: proc.Config{Dir: t.TempDir(), Env: os.Environ()}},
		Profiles: []agent.Profile{{Name: "small", Description: "runs small", Limits: limits}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if top := results[""]; !strings.Contains(top, "hog done") || strings.Contains(top, "memory limit") {
		t.Errorf("the top level's shell: %s\nwant it unlimited", top)
	}
	sub := results["small"]
	if err := resource.Check(limits); err != nil {
		if !strings.Contains(sub, "limit") {
			t.Errorf("the sub-agent's shell, where %v cannot be enforced: %s\nwant an error that says so", limits, sub)
		}
		return
	}
	if !strings.Contains(sub, "memory limit of 64 MiB") {
		t.Errorf("the sub-agent's shell: %s\nwant it killed at its memory limit", sub)
	}
}

func TestProfileLimitsFromFrontMatter(t *testing.T) {
	p, _, err := agent.ParseProfile("small.md", []byte("---\nname: small\ndescription: small\ntask_memory: 1G\ntask_pids: 64\ntask_cpus: 0.5\n---\nBe small.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (resource.Limits{Memory: 1 << 30, Pids: 64, CPUs: 0.5}); p.Limits != want {
		t.Errorf("Limits = %+v, want %+v", p.Limits, want)
	}
	for _, bad := range []string{"task_memory: lots", "task_pids: -1", "task_cpus: many", "task_pids: 1"} {
		_, _, err := agent.ParseProfile("bad.md", []byte("---\nname: bad\ndescription: bad\n"+bad+"\n---\n"))
		var pe *agent.ProfileProblem
		if !errors.As(err, &pe) || !pe.Skipped {
			t.Errorf("ParseProfile(%s) = %v, want the file skipped", bad, err)
		}
	}
}
