//go:build linux

package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/tools"
)

func sandboxed(t *testing.T, escalate tools.Escalate) *env {
	t.Helper()
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		t.Skipf("no sandbox on this host: %v", err)
	}
	return newEnv(t, tools.Config{Process: proc.Config{Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite}}, Escalate: escalate})
}

// The model knows its fence: bash's description and its first result say
// the mode, where it may write and the network.
func TestSandboxIsToldToTheModel(t *testing.T) {
	e := sandboxed(t, nil)
	desc := e.set.Tool("bash").Description
	for _, want := range []string{"sandbox (workspace-write)", "write only under $TMPDIR", "network is off", "not allowed here"} {
		if !strings.Contains(desc, want) {
			t.Errorf("bash's description lacks %q:\n%s", want, desc)
		}
	}
	var first, second tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "true"}`, &first)
	ok(t, e, e.top, "bash", `{"command": "true"}`, &second)
	if !strings.Contains(first.Note, "Commands run in a sandbox (workspace-write)") || !strings.Contains(first.Note, "network is off") {
		t.Errorf("first result's note = %q, want the sandbox", first.Note)
	}
	if strings.Contains(second.Note, "sandbox") {
		t.Errorf("second result's note = %q, want the sandbox told once", second.Note)
	}
	off := newEnv(t, tools.Config{})
	if strings.Contains(off.set.Tool("bash").Description, "Commands run in a sandbox") {
		t.Error("without a sandbox, bash's description claims one")
	}
}

// A sandboxed touch /etc/x comes back saying the sandbox refused it, in
// the foreground and as a background result; task_inspect shows the
// sandbox.
func TestSandboxRefusalNote(t *testing.T) {
	e := sandboxed(t, nil)
	target := "/etc/offstage-refusal-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { os.Remove(target) })
	var out tools.BashOutput
	args, _ := json.Marshal(map[string]any{"command": "touch " + target})
	ok(t, e, e.top, "bash", string(args), &out)
	if !strings.Contains(out.Note, "The sandbox (workspace-write) refused this: "+target+" is outside") || !strings.Contains(out.Note, "not allowed here") {
		t.Errorf("foreground note = %q", out.Note)
	}
	id := e.background(t, e.top, "touch "+target)
	waitDone(t, e.top, id)
	var in tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &in)
	if !strings.Contains(in.Result, "The sandbox (workspace-write) refused this") {
		t.Errorf("background result = %q", in.Result)
	}
	if !strings.HasPrefix(in.Sandbox, "workspace-write; writes only under: ") {
		t.Errorf("task_inspect sandbox = %q", in.Sandbox)
	}
	// A failure of its own inside the fence gets no such note.
	ok(t, e, e.top, "bash", `{"command": "ls /nonexistent-offstage"}`, &out)
	if strings.Contains(out.Note, "sandbox") {
		t.Errorf("a missing file's note = %q", out.Note)
	}
}

// sandbox: false is the user's to grant: refused with no one to ask, a
// tool error when the user says no, and outside the fence when yes.
func TestSandboxEscalation(t *testing.T) {
	outside := t.TempDir()
	target := filepath.Join(outside, "x")
	args, _ := json.Marshal(map[string]any{"command": "touch " + target, "sandbox": false})

	e := sandboxed(t, nil)
	if msg := e.refused(t, e.top, "bash", string(args)); !strings.Contains(msg, "not allowed here (the user did not allow escalation)") || strings.Contains(msg, "--") {
		t.Errorf("without Escalate: %q, want the refusal in general words, naming no flag", msg)
	}
	advised := newEnv(t, tools.Config{Process: proc.Config{Sandbox: sandbox.Policy{Mode: sandbox.WorkspaceWrite}},
		Advice: tools.Advice{Escalation: "--let-it-out"}})
	if msg := advised.refused(t, advised.top, "bash", string(args)); !strings.Contains(msg, "did not allow escalation: --let-it-out)") {
		t.Errorf("with Advice.Escalation: %q, want the caller's advice", msg)
	}

	var asked []string
	no := sandboxed(t, func(_ context.Context, owner, command string) error {
		asked = append(asked, command)
		return errors.New("the user rejected it")
	})
	if msg := no.refused(t, no.top, "bash", string(args)); !strings.Contains(msg, "the user rejected it") {
		t.Errorf("rejected: %q", msg)
	}
	if len(asked) != 1 || asked[0] != "touch "+target {
		t.Errorf("asked %q", asked)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("a rejected command ran")
	}

	yes := sandboxed(t, func(context.Context, string, string) error { return nil })
	var out tools.BashOutput
	ok(t, yes, yes.top, "bash", string(args), &out)
	if _, err := os.Stat(target); err != nil || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Errorf("an allowed command did not write outside: %+v, %v", out, err)
	}
	// Issue 37 item 15: its result said only that commands run in the
	// sandbox (the first result's description of it).
	if !strings.HasPrefix(out.Note, "This command ran outside the sandbox, as the user allowed") {
		t.Errorf("an escalated command's note = %q", out.Note)
	}
	// And the same command, sandboxed, cannot.
	os.Remove(target)
	args, _ = json.Marshal(map[string]any{"command": "touch " + target})
	ok(t, yes, yes.top, "bash", string(args), &out)
	if _, err := os.Stat(target); err == nil || !strings.Contains(out.Note, "run it again with sandbox: false") {
		t.Errorf("sandboxed: %v, note %q", err, out.Note)
	}
}

// A call's cwd does not move the fence: the workspace is the session's
// directory.
func TestSandboxCwdDoesNotMoveTheFence(t *testing.T) {
	e := sandboxed(t, nil)
	elsewhere := t.TempDir()
	var out tools.BashOutput
	args, _ := json.Marshal(map[string]any{"command": "touch here", "cwd": elsewhere})
	ok(t, e, e.top, "bash", string(args), &out)
	if _, err := os.Stat(filepath.Join(elsewhere, "here")); err == nil {
		t.Errorf("a cwd outside the workspace was writable: %+v", out)
	}
}
