package tools_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/tools"
)

// gitEnv is an environment for git in a test: no global or system
// configuration, an author, and an EDITOR that would hang, as a person's
// vi does when no one is there to quit it.
func gitEnv(t *testing.T) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com",
		"EDITOR=sleep 600;:"}
}

// fg runs a command in the foreground and returns its result, failing
// the test if it is still running after 60 seconds (it was adopted into
// the background: it waits for someone).
func fg(t *testing.T, e *env, command string) tools.BashOutput {
	t.Helper()
	var out tools.BashOutput
	args, _ := json.Marshal(map[string]any{"command": command, "yield_after_seconds": 60})
	ok(t, e, e.top, "bash", string(args), &out)
	if out.Status == "running" {
		t.Fatalf("%q is still running after 60s (waiting for a person?): %+v", command, out)
	}
	return out
}

// TestBashGitDoesNotWaitForAPerson: issue 25 item 1. A background git
// commit without -m opened the user's editor and waited for it until its
// timeout; now it ends at once.
func TestBashGitDoesNotWaitForAPerson(t *testing.T) {
	e := newEnv(t, tools.Config{Process: proc.Config{Env: gitEnv(t)}})
	fg(t, e, "git init -q . && echo x > f && git add f")
	id := e.background(t, e.top, "git commit")
	waitDone(t, e.top, id)
	var out tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "since": 0}`, &out)
	if !strings.Contains(out.Output, "Aborting commit due to empty commit message") {
		t.Errorf("git commit output = %q, want it aborted for an empty message", out.Output)
	}
	// git log over many commits does not page (git pages only on a
	// terminal, and would use cat here).
	// 300 commits in one process (a loop of git commit is slow on a
	// loaded machine).
	fg(t, e, `git init -q -b main log && cd log && for i in $(seq 300); do printf 'commit refs/heads/main\ncommitter a <a@example.com> %d +0000\ndata 4\nc%03d\n\n' $i $i; done | git fast-import --quiet`)
	if got := fg(t, e, "cd log && git log --oneline | wc -l; git var GIT_PAGER"); !strings.HasSuffix(got.Output, "\ncat\n") || !strings.HasPrefix(strings.TrimSpace(got.Output), "300\n") {
		t.Errorf("git log; git var GIT_PAGER = %q, want the log and cat", got.Output)
	}
}

// TestBashGitFetchAsksNoPassword: issue 25 item 1. A fetch from a remote
// that wants credentials asked for a user name on the terminal (from a
// host with one, the command stopped there for good); now it fails at
// once saying terminal prompts are disabled.
func TestBashGitFetchAsksNoPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, tools.Config{Process: proc.Config{Env: gitEnv(t)}})
	out := fg(t, e, "git init -q . && git fetch "+srv.URL+"/repo.git")
	if out.ExitCode == nil || *out.ExitCode == 0 || !strings.Contains(out.Output, "terminal prompts disabled") {
		t.Errorf("git fetch = %+v, want it failed because terminal prompts are disabled", out)
	}
}
