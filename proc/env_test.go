package proc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
)

// default rule's variables nor the dropped ones, and sees the kept ones.
func TestCommandsDoNotSeeSecrets(t *testing.T) {
	env := append(os.Environ(), "GITHUB_TOKEN=ghp_secret1", "AWS_SECRET_ACCESS_KEY=aws_secret2", "OPENAI_API_KEY=sk-secret3",
		"DATABASE_URL=postgres://app:db_secret4@db/app", "CORP_VPN=vpn_secret5", "NPM_TOKEN=npm_kept", "PLAIN=plain_kept")
	p := mustStart(t, proc.Config{Command: "env", Env: env,
		EnvPolicy: environ.Policy{Keep: []string{"NPM_TOKEN"}, Drop: []string{"CORP_VPN"}}})
	mustWait(t, p)
	out := string(p.Read(proc.Combined, 0, 1<<20).Data)
	for _, secret := range []string{"secret1", "secret2", "secret3", "secret4", "secret5"} {
		if strings.Contains(out, secret) {
			t.Errorf("the command saw %s:\n%s", secret, out)
		}
	}
	for _, kept := range []string{"NPM_TOKEN=npm_kept", "PLAIN=plain_kept"} {
		if !strings.Contains(out, kept+"\n") {
			t.Errorf("the command lost %s:\n%s", kept, out)
		}
	}
	q := mustStart(t, proc.Config{Command: "env", Env: env, EnvPolicy: environ.Policy{KeepAll: true}})
	mustWait(t, q)
	if !strings.Contains(string(q.Read(proc.Combined, 0, 1<<20).Data), "OPENAI_API_KEY=sk-secret3\n") {
		t.Error("KeepAll did not pass the key through")
	}
}

// TestNonInteractiveEnv: issue 25 item 1. A command nothing can answer
// got the host's environment as is, so git opened an editor or asked for
// a password and the command hung until its timeout. Now it gets
// NonInteractiveEnv, except for what the environment sets itself; a
// command with input open, or on a terminal, gets none of it.
func TestNonInteractiveEnv(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "PAGER=most"}
	p := mustStart(t, proc.Config{Command: "env", Env: env})
	mustWait(t, p)
	out := string(p.Read(proc.Combined, 0, 1<<20).Data)
	for _, kv := range environ.NonInteractive() {
		name, _, _ := strings.Cut(kv, "=")
		want := kv
		if name == "PAGER" {
			want = "PAGER=most" // the user's value wins
		}
		if !strings.Contains(out, "\n"+want+"\n") && !strings.HasPrefix(out, want+"\n") {
			t.Errorf("the command's environment lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "PAGER="); n != 2 { // GIT_PAGER=cat, PAGER=most
		t.Errorf("%d PAGER= variables, want 2 (PAGER set twice?):\n%s", n, out)
	}
	for _, cfg := range []proc.Config{{Command: "env", Env: env, Stdin: true}, {Command: "env", Env: env, TTY: true}} {
		q := mustStart(t, cfg)
		if cfg.Stdin {
			q.CloseInput(t.Context())
		}
		mustWait(t, q)
		if got := string(q.Read(proc.Combined, 0, 1<<20).Data); strings.Contains(got, "GIT_TERMINAL_PROMPT") {
			t.Errorf("Stdin %v, TTY %v: the command got the non-interactive settings:\n%s", cfg.Stdin, cfg.TTY, got)
		}
	}
}
