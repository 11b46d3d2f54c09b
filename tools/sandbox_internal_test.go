package tools

import (
	"strings"
	"testing"

	"github.com/offstage/offstage/proc/sandbox"
)

func TestSandboxNoteReadsRefusals(t *testing.T) {
	st := sandbox.Status{Mode: sandbox.WorkspaceWrite, Writable: []string{"/tmp/offstage-sandbox-1", "/src"}}
	cases := []struct{ output, want string }{
		{"touch: cannot touch '/etc/x': Permission denied", "/etc/x is outside"},
		{"sh: 1: cannot create /usr/local/bin/tool: Permission denied", "The sandbox (workspace-write) refused this: /usr/local/bin/tool is outside"},
		{"/bin/sh: 1: cannot create /opt/x: Permission denied", "this: /opt/x is outside"},
		{"/usr/bin/touch: cannot touch '/etc/y': Permission denied", "this: /etc/y is outside"},
		{"mkdir: cannot create directory ‘/opt/y’: Permission denied", "/opt/y is outside"},
		{"curl: (6) Could not resolve host: example.com", "network off"},
		{"fatal: unable to access 'https://github.com/x/y/': Could not resolve host: github.com", "network off"},
		{"dial tcp 93.184.215.14:443: connect: network is unreachable", "network off"},
		{"touch: cannot touch '/src/a': Permission denied", ""},      // inside: not the fence
		{"ls: cannot access '/nope': No such file or directory", ""}, // not a refusal
		{"cat: /dev/null: Permission denied", ""},                    // a device it may write
	}
	for _, c := range cases {
		got := sandboxNote(st, c.output, true, Advice{})
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("sandboxNote(%q) = %q, want %q", c.output, got, c.want)
		}
	}
	st.Network = true
	if got := sandboxNote(st, "curl: (6) Could not resolve host: example.com", true, Advice{}); got != "" {
		t.Errorf("with the network on, a lookup failure is blamed on the sandbox: %q", got)
	}
	if got := sandboxNote(sandbox.Status{Mode: sandbox.Off}, "touch: cannot touch '/etc/x': Permission denied", true, Advice{}); got != "" {
		t.Errorf("without a sandbox: %q", got)
	}
}

func TestBestEffortNoteSaysWhatDidNotHold(t *testing.T) {
	st := sandbox.Status{Mode: sandbox.WorkspaceWrite, NotEnforced: []string{"cutting UDP and DNS (no network namespace)"}}
	if got := bestEffortNote(st); got != "its sandbox (workspace-write, best effort) did not enforce cutting UDP and DNS (no network namespace)" {
		t.Errorf("bestEffortNote = %q", got)
	}
	if got := bestEffortNote(sandbox.Status{Mode: sandbox.ReadOnly}); got != "" {
		t.Errorf("a sandbox that holds: %q", got)
	}
}
