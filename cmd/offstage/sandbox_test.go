package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/offstage/offstage/proc/sandbox"
)

// TestSandboxFlags: --sandbox workspace-write reaches each shell: a write
// in the working directory lands, one outside it is refused and the model
// is told the sandbox refused it; the config file sets the same. The
// place outside is one this user may write (as root, /etc would do; not
// as anyone else, where the user's own permissions refuse it first and
// the model is rightly not told that the sandbox did).
func TestSandboxFlags(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "offstage-cli-"+strconv.Itoa(os.Getpid()))
	script := scriptRunning(t, "echo ok > inside; touch "+outside)
	for _, tc := range []struct {
		name   string
		args   []string
		config string
	}{
		{"flags", []string{"--sandbox", "workspace-write", "--sandbox-network", "off"}, ""},
		{"config", nil, "sandbox:\n  mode: workspace-write\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, config := t.TempDir(), t.TempDir()
			if tc.config != "" {
				os.MkdirAll(filepath.Join(config, "offstage"), 0o755)
				os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte(tc.config), 0o644)
			}
			args := append([]string{"run", "--no-journal", "--json", "--script", script, "--dir", ws}, tc.args...)
			cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + config}, append(args, "go")...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if code := exitOf(t, cmd.Run()); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
			}
			if _, err := os.Stat(filepath.Join(ws, "inside")); err != nil {
				t.Errorf("the write in the working directory: %v", err)
			}
			if _, err := os.Stat(outside); err == nil {
				t.Errorf("%s was written from the sandbox", outside)
			}
			for _, want := range []string{"The sandbox (workspace-write) refused this", "Commands run in a sandbox (workspace-write)"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the model was not told %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// TestSandboxBadValues: a bad sandbox setting is a usage error that says
// what is wrong, before anything runs.
func TestSandboxBadValues(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		config string
		want   string
	}{
		{[]string{"--sandbox", "everything"}, "", "-sandbox: give off, read-only or workspace-write"},
		{[]string{"--sandbox-network", "maybe"}, "", "-sandbox-network: give on or off"},
		{[]string{"--sandbox-escalation", "sometimes"}, "", "give allow, ask or deny"},
		{[]string{"--sandbox-write", "/tmp"}, "", "add --sandbox workspace-write"},
		{[]string{"--sandbox", "read-only", "--sandbox-write", "/tmp"}, "", "use --sandbox workspace-write"},
		{[]string{"--sandbox", "workspace-write", "--sandbox-write", "/nonexistent/offstage"}, "", "/nonexistent/offstage is not a directory"},
		{nil, "sandbox:\n  mode: open\n", "sandbox: mode"},
		{nil, "sandbox:\n  mode: workspace-write\n  write: [relative]\n", "not an absolute path"},
	} {
		config := t.TempDir()
		if tc.config != "" {
			os.MkdirAll(filepath.Join(config, "offstage"), 0o755)
			os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte(tc.config), 0o644)
		}
		args := append([]string{"run", "--no-journal", "--script", scriptRunning(t, "true")}, tc.args...)
		cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + config}, append(args, "go")...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if code := exitOf(t, cmd.Run()); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v with config %q: exit %d, stderr %q; want 2 and %q", tc.args, tc.config, code, errOut.String(), tc.want)
		}
	}
}

// TestMCPEscalation: over MCP nobody can be asked, so bash with sandbox:
// false is refused unless the server was started with
// --sandbox-escalation allow; then it runs outside the sandbox.
func TestMCPEscalation(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	outside := t.TempDir()
	for _, allow := range []bool{false, true} {
		args := []string{"mcp", "--no-journal", "--sandbox", "workspace-write", "--dir", t.TempDir()}
		if allow {
			args = append(args, "--sandbox-escalation", "allow")
		}
		cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + t.TempDir()}, args...)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(outside, "allowed-"+strconv.FormatBool(allow))
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "touch " + target, "sandbox": false}})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		_, statErr := os.Stat(target)
		switch {
		case !allow && (!res.IsError || !strings.Contains(text, "--sandbox-escalation allow") || statErr == nil):
			t.Errorf("without allow: %s (written: %v)", text, statErr == nil)
		case allow && (res.IsError || statErr != nil):
			t.Errorf("with allow: %s, %v", text, statErr)
		}
		cs.Close()
	}
}

// TestRunAsksInTheConversation: in an interactive offstage run on a
// terminal, bash with sandbox: false is a question in the conversation,
// whose next line answers it: n is the model's tool error, y runs the
// command outside the sandbox.
func TestRunAsksInTheConversation(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	outside := t.TempDir()
	no, yes := filepath.Join(outside, "no"), filepath.Join(outside, "yes")
	tm, done, mark := startTerm(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "touch `+no+`", "sandbox": false}}]},
		{"expect": "The user did not let this command run outside the sandbox", "text": "Refused, as asked."},
		{"tool_calls": [{"name": "bash", "input": {"command": "touch `+yes+`", "sandbox": false}}]},
		{"text": "Ran it outside."}
	]}`, "--sandbox", "workspace-write", "--dir", t.TempDir())
	tm.send("first\r")
	tm.expect("asks to run this command OUTSIDE the sandbox")
	tm.send("n\r")
	tm.expect("Refused, as asked.")
	tm.send("second\r")
	tm.expect("asks to run this command OUTSIDE the sandbox")
	tm.send("y\r")
	tm.expect("Ran it outside.")
	tm.send("/quit\r")
	tm.expect("bye.")
	tm.exits(done, mark)
	if _, err := os.Stat(no); err == nil {
		t.Error("the refused command ran")
	}
	if _, err := os.Stat(yes); err != nil {
		t.Errorf("the allowed command did not run outside the sandbox: %v", err)
	}
}

// TestVersionSaysSandbox: version -v says what a sandbox holds here.
func TestVersionSaysSandbox(t *testing.T) {
	cmd, _ := offstage(t, nil, "version", "-v")
	var out bytes.Buffer
	cmd.Stdout = &out
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("version -v: exit %d", code)
	}
	want := "\nsandbox: available; enforced by file system: Landlock ABI "
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite}); err != nil {
		want = "\nsandbox: the workspace-write sandbox cannot hold on this host"
	}
	if !strings.Contains(out.String(), want) {
		t.Errorf("version -v said %q, want %q", out.String(), want)
	}
}

// TestSandboxStartupLineNamesTheWorkspace (found trying it): mcp's
// start-up line named offstage's own directory as the writable one, not
// --dir; acp's named it too, where each session writes its own. A
// workspace that holds the home directory is called out.
func TestSandboxStartupLineNamesTheWorkspace(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	ws := t.TempDir()
	cwd, _ := os.Getwd()
	for _, c := range []struct {
		face string
		dir  string
		want string
	}{
		{"mcp", ws, "writes only under: $TMPDIR (its own), " + ws + ";"},
		{"acp", "", "writes only under: $TMPDIR (its own), each session's directory;"},
		{"mcp", "/", "the home directory"},
	} {
		s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
		got := sandboxStatus(s, c.dir)
		if !strings.Contains(got, c.want) || strings.Contains(got, cwd+";") && c.dir != cwd {
			t.Errorf("%s with --dir %q: %q, want %q in it and not offstage's own directory %s", c.face, c.dir, got, c.want, cwd)
		}
	}
}
