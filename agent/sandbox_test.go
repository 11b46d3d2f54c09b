package agent_test

import (
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc/sandbox"
)

// A profile's sandbox only narrows the session's.
func TestProfileSandboxOnlyNarrows(t *testing.T) {
	p, _, err := agent.ParseProfile("reviewer.md", []byte("---\nname: reviewer\ndescription: reads\nsandbox: read-only\n---\nRead."))
	if err != nil {
		t.Fatal(err)
	}
	if p.Sandbox != sandbox.ReadOnly {
		t.Fatalf("Sandbox = %q", p.Sandbox)
	}
	if _, _, err := agent.ParseProfile("bad.md", []byte("---\nname: bad\ndescription: x\nsandbox: everything\n---\n")); err == nil {
		t.Error("an unknown sandbox mode was accepted")
	}
	on, off := true, false
	ww := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Write: []string{"/cache"}, Network: true}
	cases := []struct {
		name    string
		p       agent.Profile
		session sandbox.Policy
		want    sandbox.Mode
		network bool
		writes  int
	}{
		{"read-only under workspace-write", agent.Profile{Sandbox: sandbox.ReadOnly}, ww, sandbox.ReadOnly, true, 0},
		{"network off under on", agent.Profile{SandboxNetwork: &off}, ww, sandbox.WorkspaceWrite, false, 1},
		{"off cannot lift", agent.Profile{Sandbox: sandbox.Off, SandboxNetwork: &on}, sandbox.Policy{Mode: sandbox.ReadOnly}, sandbox.ReadOnly, false, 0},
		{"workspace-write cannot widen read-only", agent.Profile{Sandbox: sandbox.WorkspaceWrite}, sandbox.Policy{Mode: sandbox.ReadOnly}, sandbox.ReadOnly, false, 0},
		{"a sandbox where the session has none", agent.Profile{Sandbox: sandbox.WorkspaceWrite}, sandbox.Policy{}, sandbox.WorkspaceWrite, false, 0},
		{"nothing set keeps the session's", agent.Profile{}, ww, sandbox.WorkspaceWrite, true, 1},
	}
	for _, c := range cases {
		got := agent.NarrowSandbox(c.p, c.session)
		if got.Mode != c.want || got.Network != c.network || len(got.Write) != c.writes {
			t.Errorf("%s: %+v, want %s, network %v, %d writable", c.name, got, c.want, c.network, c.writes)
		}
	}
}
