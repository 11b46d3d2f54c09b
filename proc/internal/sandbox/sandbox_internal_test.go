//go:build linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// What each host gives each mode: refused with what is missing, or, with
// best effort, started and saying what was not enforced.
func TestPlanSandboxDegrades(t *testing.T) {
	noNS := errors.New("unprivileged user namespaces are off")
	ws := t.TempDir()
	cases := []struct {
		name     string
		host     sandboxHost
		network  bool
		refuse   string // in the strict error
		enforced string // in Enforced
		notEnf   string // in NotEnforced (best effort)
		gap      string
	}{
		{name: "abi 7 and namespaces", host: sandboxHost{abi: 7}, enforced: "own network namespace"},
		{name: "no landlock", host: sandboxHost{abi: 0, abiErr: errors.New("no Landlock here")}, refuse: "no Landlock here", notEnf: "the file system fence"},
		{name: "abi 2", host: sandboxHost{abi: 2}, enforced: "truncating files outside the writable places: read-only mounts", gap: "signals"},
		{name: "abi 1", host: sandboxHost{abi: 1}, enforced: "truncating files outside the writable places: read-only mounts", gap: "renaming or linking a file into another directory fails"},
		{name: "abi 2 without mounts", host: sandboxHost{abi: 2, mountErr: noNS}, refuse: "truncating", notEnf: "truncating", gap: "signals"},
		{name: "abi 4 without namespaces", host: sandboxHost{abi: 4, netnsErr: noNS}, refuse: "cutting UDP and DNS", enforced: "Landlock TCP rules", notEnf: "unprivileged user namespaces are off", gap: "Landlock ABI 6 scopes signals, have 4"},
		{name: "abi 10 without namespaces", host: sandboxHost{abi: 10, netnsErr: noNS}, enforced: "Landlock TCP and UDP rules"},
		{name: "abi 3 without namespaces", host: sandboxHost{abi: 3, netnsErr: noNS}, refuse: "the network fence", notEnf: "the network fence", gap: "signals"},
		{name: "network on needs no namespace", host: sandboxHost{abi: 6, netnsErr: noNS}, network: true, enforced: "signals and ptrace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Policy{Mode: WorkspaceWrite, Network: c.network}
			st, sp, err := planSandbox(s, ws, c.host)
			if c.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), c.refuse) || !strings.Contains(err.Error(), "--sandbox-best-effort") {
					t.Errorf("strict: err = %v, want it to name %q and the way out", err, c.refuse)
				}
				s.BestEffort = true
				st, sp, err = planSandbox(s, ws, c.host)
			}
			if err != nil {
				t.Fatalf("planSandbox = %v", err)
			}
			if got := strings.Join(st.Enforced, "|"); !strings.Contains(got, c.enforced) {
				t.Errorf("Enforced = %q, want %q", got, c.enforced)
			}
			if got := strings.Join(st.NotEnforced, "|"); (c.notEnf == "") != (got == "") || !strings.Contains(got, c.notEnf) {
				t.Errorf("NotEnforced = %q, want %q", got, c.notEnf)
			}
			if got := strings.Join(st.Gaps, "|"); !strings.Contains(got, c.gap) || (c.gap == "") != (got == "") {
				t.Errorf("Gaps = %q, want %q", got, c.gap)
			}
			if c.notEnf != "" && !strings.Contains(st.String(), "NOT enforced") {
				t.Errorf("String() = %q does not say what was not enforced", st)
			}
			if sp.Loopback == (c.host.netnsErr != nil || c.network) {
				t.Errorf("Loopback = %v for netns error %v, network %v", sp.Loopback, c.host.netnsErr, c.network)
			}
			if len(sp.Write) != 1 || sp.Write[0] != ws {
				t.Errorf("Write = %v, want the workspace", sp.Write)
			}
		})
	}
}

func TestSandboxNarrow(t *testing.T) {
	parent := Policy{Mode: WorkspaceWrite, Write: []string{"/cache"}, Network: true}
	got := parent.Narrow(Policy{Mode: Off})
	if got.Mode != WorkspaceWrite || !got.Network {
		t.Errorf("off under workspace-write = %+v, want the parent's", got)
	}
	got = parent.Narrow(Policy{Mode: WorkspaceWrite, Write: []string{"/cache/go", "/etc"}, Network: true})
	if len(got.Write) != 1 || got.Write[0] != "/cache/go" {
		t.Errorf("Write = %v, want /cache/go alone", got.Write)
	}
	got = Policy{Mode: ReadOnly}.Narrow(Policy{Mode: WorkspaceWrite, Network: true})
	if got.Mode != ReadOnly || got.Network {
		t.Errorf("workspace-write under read-only = %+v, want read-only, no network", got)
	}
	if got := (Policy{}).Narrow(Policy{Mode: ReadOnly}); got.Mode != ReadOnly {
		t.Errorf("read-only under off = %+v", got)
	}
}

// A workspace that holds the home directory ("--dir /", or the home
// itself) lets a command plant what runs outside later: the status says
// so, to the user at start-up and to the model.
func TestPlanSandboxSaysAWorkspaceHoldsTheHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	project := t.TempDir()
	for _, c := range []struct {
		workspace string
		write     []string
		gap       bool
	}{
		{workspace: project},
		{workspace: "/", gap: true},
		{workspace: home, gap: true},
		{workspace: project, write: []string{home}, gap: true},
	} {
		st, _, err := planSandbox(Policy{Mode: WorkspaceWrite, Write: c.write}, c.workspace, sandboxHost{abi: 7})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got := strings.Contains(strings.Join(st.Gaps, "|"), "home directory "+home+" is writable"); got != c.gap {
			t.Errorf("workspace %s, write %v: gaps %q, want the home named: %v", c.workspace, c.write, st.Gaps, c.gap)
		}
	}
}

// TestGateClosedWithoutALine: a command whose host gave its start up (or
// died) before opening the gate never runs: the forker may have forked
// it when the host stopped waiting for the answer.
func TestGateClosedWithoutALine(t *testing.T) {
	for _, open := range []bool{true, false} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", gateCommand("echo ran"))
		cmd.ExtraFiles = []*os.File{r}
		if open {
			w.Write([]byte{'\n'})
		}
		w.Close()
		out, err := cmd.CombinedOutput()
		r.Close()
		if open && (err != nil || string(out) != "ran\n") {
			t.Errorf("gate opened: %q, %v; want the command run", out, err)
		}
		if !open && (cmd.ProcessState.ExitCode() != 126 || len(out) > 0) {
			t.Errorf("gate closed: %q, exit %d; want nothing run, exit 126", out, cmd.ProcessState.ExitCode())
		}
	}
}
