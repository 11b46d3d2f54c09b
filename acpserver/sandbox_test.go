package acpserver_test

import (
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/tools"
)

// TestOutsideTheSandboxIsAskedEveryTime: with a sandbox, bash with
// sandbox: false is a permission request saying "outside the sandbox",
// even when every call is allowed (AllowAll); a rejection is the
// model's tool error, and the command does not run.
func TestOutsideTheSandboxIsAskedEveryTime(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	script := `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo fenced"}}]},
		{"expect": "fenced", "tool_calls": [{"name": "bash", "input": {"command": "echo free", "sandbox": false}}]},
		{"expect": "the user rejected this call", "tool_calls": [{"name": "bash", "input": {"command": "echo again", "sandbox": false}}]},
		{"expect": "again", "text": "done"}
	]}`
	h := start(t, script, acpserver.Config{AllowAll: true,
		Agent: agent.Config{Tools: tools.Config{Process: proc.Config{Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite}}}}})
	first := true
	h.client.choose = func(p acp.RequestPermissionRequest) acp.PermissionOptionId {
		if first {
			first = false
			return "reject"
		}
		return "allow_once"
	}
	id := h.session(t)
	if got := h.prompt(t, id, "go"); got != acp.StopReasonEndTurn {
		t.Fatalf("stopReason = %s; updates:\n%s", got, strings.Join(h.lines(id), "\n"))
	}
	want := []string{"Run: echo free (outside the sandbox)", "Run: echo again (outside the sandbox)"}
	if got := h.client.titles(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("asked %q, want %q", got, want)
	}
}
