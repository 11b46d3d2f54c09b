package agent_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/tools"
)

// TestProfileEnvKeepsForItsShellsOnly: a profile's Env applies on top of
// the session's policy, to that sub-agent's shells only.
func TestProfileEnvKeepsForItsShellsOnly(t *testing.T) {
	var mu sync.Mutex
	results := map[string]string{} // agent → its bash result
	model := modelFunc(func(req provider.Request) provider.Response {
		last := req.Messages[len(req.Messages)-1]
		for _, b := range last.Content {
			if b.Type == provider.ToolResult && strings.Contains(b.Text, `"task_id":"shell:`) {
				mu.Lock()
				results[req.Agent] = b.Text
				mu.Unlock()
			}
		}
		switch {
		case req.Agent == "" && len(req.Messages) == 1:
			return toolCall("bash", `{"command": "echo token=$GITHUB_TOKEN corp=$CORP_VPN"}`)
		case req.Agent == "" && len(req.Messages) == 3:
			return toolCall("spawn_agent", `{"profile": "deployer", "prompt": "go"}`)
		case req.Agent == "deployer" && len(req.Messages) == 1:
			return toolCall("bash", `{"command": "echo token=$GITHUB_TOKEN corp=$CORP_VPN"}`)
		}
		return text("done")
	})
	env := append(os.Environ(), "GITHUB_TOKEN=ghp_kept", "CORP_VPN=vpn_plain")
	s, err := agent.New(context.Background(), agent.Config{Model: model,
		Tools: tools.Config{Process: proc.Config{Dir: t.TempDir(), Env: env}},
		Profiles: []agent.Profile{{Name: "deployer", Description: "deploys",
			Env: environ.Policy{Keep: []string{"GITHUB_TOKEN"}, Drop: []string{"CORP_VPN"}}}},
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
	if top := results[""]; !strings.Contains(top, "token= corp=vpn_plain") || !strings.Contains(top, "GITHUB_TOKEN") {
		t.Errorf("the top level's shell: %s\nwant no token, the plain variable, and a note naming GITHUB_TOKEN", top)
	}
	if sub := results["deployer"]; !strings.Contains(sub, "token=ghp_kept corp=\\n") || strings.Contains(sub, "GITHUB_TOKEN") {
		t.Errorf("the deployer's shell: %s\nwant the kept token, no CORP_VPN, and no note naming GITHUB_TOKEN", sub)
	}
}

func TestProfileEnvFromFrontMatter(t *testing.T) {
	p, _, err := agent.ParseProfile("deployer.md", []byte("---\nname: deployer\ndescription: deploys\nenv_keep: GITHUB_TOKEN, AWS_*\nenv_drop: [CORP_VPN]\n---\nDeploy.\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := environ.Policy{Keep: []string{"GITHUB_TOKEN", "AWS_*"}, Drop: []string{"CORP_VPN"}}
	if diff := cmp.Diff(want, p.Env); diff != "" {
		t.Errorf("Env (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"env_keep: A=B", "env_drop: {x: 1}", "env_keep: [\"[AB\"]"} {
		_, _, err := agent.ParseProfile("bad.md", []byte("---\nname: bad\ndescription: bad\n"+bad+"\n---\n"))
		var pe *agent.ProfileProblem
		if !errors.As(err, &pe) || !pe.Skipped || pe.Line != 4 {
			t.Errorf("ParseProfile(%s) = %v, want the file skipped, pointing at line 4", bad, err)
		}
	}
}
