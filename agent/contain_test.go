//go:build linux

package agent_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/task"
)

// TestSubAgentsDaemonEndsWithIt: a daemon started by a sub-agent's
// background shell dies when the sub-agent ends, and its shell ends
// canceled.
func TestSubAgentsDaemonEndsWithIt(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid(1) not installed")
	}
	kv := "OFFSTAGE_TEST_SUBAGENT_DAEMON=" + t.Name()
	script := `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "starter", "prompt": "start the server"}}]},
		{"text": "The helper is done."}
	], "agents": {"starter": [
		{"tool_calls": [{"name": "bash", "input": {"command": "setsid -f sleep 1000; (setsid sh -c 'sleep 1000 & exit' &); echo up; exec sleep 1000", "run_in_background": true}}]},
		{"tool_calls": [{"name": "task_wait", "input": {"task_ids": ["shell:2"], "timeout_seconds": 1}}]},
		{"expect": "output_tail\":\"up", "text": "started"}
	]}}`
	cfg := agent.Config{Profiles: []agent.Profile{{Name: "starter", Description: "starts things", Tools: []string{"bash", "task_wait"}}}}
	cfg.Tools.Process.Env = append(os.Environ(), kv)
	s := newSession(t, script, cfg)
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	done, err := s.Table().Done("shell:2")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the sub-agent's shell outlived it")
	}
	if info, _ := s.Table().Info("shell:2"); info.State != task.Canceled {
		t.Errorf("shell:2 is %s, want canceled with its owner", info.State)
	}
	if left := proctest.Marked(kv); len(left) != 0 {
		t.Errorf("processes of the sub-agent's shell alive after it ended: %v", left)
	}
}
