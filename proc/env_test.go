package proc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/proc"
)

// TestEnvPolicyDefault: issue 19 item 4. Only five names were withheld;
// every other key, token and password reached every command.
func TestEnvPolicyDefault(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		withheld    bool
	}{
		// Today's list.
		{"OPENAI_API_KEY", "sk-1", true},
		{"ANTHROPIC_API_KEY", "sk-2", true},
		{"OFFSTAGE_MCP_TOKEN", "t", true},
		{"OFFSTAGE_JOURNAL_URL", "postgres://offstage@db/offstage", true}, // by name, even without a password
		{"PGPASSWORD", "pw", true},
		// What the issue found passing.
		{"GEMINI_API_KEY", "g", true},
		{"OPENROUTER_API_KEY", "o", true},
		{"AWS_SECRET_ACCESS_KEY", "a", true},
		{"GITHUB_TOKEN", "ghp_x", true},
		{"NPM_TOKEN", "n", true},
		{"STRIPE_SECRET_KEY", "sk_live", true},
		{"MY_PASSWORD", "p", true},
		{"DATABASE_URL", "postgres://app:pw@db:5432/app?sslmode=disable", true},
		// The words in any case, anywhere in the name.
		{"aws_access_key_id", "x", true},
		{"Db_Passwd", "x", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", "/home/u/creds.json", true},
		{"HF_TOKEN", "x", true},
		// A password in a URL, whatever the name.
		{"HTTPS_PROXY", "http://user:pw@proxy:3128", true},
		{"REDIS_URL", "redis://:pw@cache:6379/0", true},
		{"MIRRORS", "https://a.example, https://u:pw@b.example/x", true},
		// Found passing by an outsider's trial.
		{"DB_PASS", "hunter2", true},
		{"api_pass", "x", true},
		{"SESSION_COOKIE", "c", true},
		{"PRIVATE_PEM", "-----BEGIN", true},
		{"SENTRY_DSN", "https://abc123@o1.ingest.sentry.io/1", true},
		{"PG_CONN", "host=h user=u password=hunter2", true},
		{"MONGO_URI", "mongodb://h/db?password=qq", true},
		{"ODBC", "Driver=x;UID=u;PWD=pw", true},
		// Found passing by an attacker's trial.
		{"CI_JOB_JWT", "eyJ", true},
		{"GH_PAT", "x", true},
		{"DB_PWD", "pw", true},
		{"SERVICE_AUTH", "x", true},
		{"GREETING", "ghp_0123456789abcdefABCDEF", true},
		{"X", "glpat-0123456789abcdef", true},
		{"X", "Bearer abcdefghijkl", true},
		{"X", "AKIAABCDEFGHIJKLMNOP", true},
		{"X", "sk_live_0123456789abcdef", true},
		{"X", "sk-ant-api03-0123456789", true},
		// Parts that only look like them pass.
		{"AUTHOR", "me", false},
		{"XAUTHORITY", "/home/u/.Xauthority", false},
		{"PATTERN", "*.go", false},
		{"X", "ghp_", false},
		{"X", "Bearer", false},
		{"PASSTHROUGH", "1", false},
		{"COMPASS_HOME", "/c", false},
		{"PWD", "/home/u", false},
		{"OLDPWD", "/home", false},
		{"HINT", "set password= to a value", false},
		// Addresses without a password, and the rest, pass.
		{"DATABASE_URL", "postgres://localhost/app", false},
		{"DATABASE_URL", "postgres://app@db/app", false},
		{"HTTPS_PROXY", "http://proxy:3128", false},
		{"GIT_URL", "git@github.com:o/r.git", false},
		{"NOTE", "mail me at a:b@c", false},
		{"PATH", "/usr/bin:/bin", false},
		{"HOME", "/home/u", false},
		{"SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1", false},
		{"LANG", "C.UTF-8", false},
	} {
		if got := (proc.EnvPolicy{}).Withholds(tc.name, tc.value); got != tc.withheld {
			t.Errorf("Withholds(%s=%s) = %v, want %v", tc.name, tc.value, got, tc.withheld)
		}
	}
}

func TestEnvPolicyKeepDrop(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		policy proc.EnvPolicy
		name   string
		want   bool
	}{
		{"kept by name", proc.EnvPolicy{Keep: []string{"GITHUB_TOKEN"}}, "GITHUB_TOKEN", false},
		{"keeping one keeps no other", proc.EnvPolicy{Keep: []string{"GITHUB_TOKEN"}}, "NPM_TOKEN", true},
		{"kept by pattern", proc.EnvPolicy{Keep: []string{"AWS_*"}}, "AWS_SECRET_ACCESS_KEY", false},
		{"names are case sensitive", proc.EnvPolicy{Keep: []string{"github_token"}}, "GITHUB_TOKEN", true},
		{"dropped by name", proc.EnvPolicy{Drop: []string{"CORP_VPN"}}, "CORP_VPN", true},
		{"dropped by pattern", proc.EnvPolicy{Drop: []string{"CORP_*"}}, "CORP_VPN", true},
		{"drop beats keep", proc.EnvPolicy{Keep: []string{"X"}, Drop: []string{"X"}}, "X", true},
		{"keep all", proc.EnvPolicy{KeepAll: true}, "OPENAI_API_KEY", false},
		{"keep all still drops", proc.EnvPolicy{KeepAll: true, Drop: []string{"OPENAI_API_KEY"}}, "OPENAI_API_KEY", true},
		{"a later keep undoes a drop", proc.EnvPolicy{Drop: []string{"X"}}.Then(proc.EnvPolicy{Keep: []string{"X"}}), "X", false},
		{"a later drop undoes a keep", proc.EnvPolicy{Keep: []string{"GITHUB_TOKEN"}}.Then(proc.EnvPolicy{Drop: []string{"GITHUB_TOKEN"}}), "GITHUB_TOKEN", true},
		{"layers add up", proc.EnvPolicy{Keep: []string{"GITHUB_TOKEN"}}.Then(proc.EnvPolicy{Keep: []string{"NPM_TOKEN"}}), "GITHUB_TOKEN", false},
	} {
		if got := tc.policy.Withholds(tc.name, "v"); got != tc.want {
			t.Errorf("%s: %+v.Withholds(%s) = %v, want %v", tc.desc, tc.policy, tc.name, got, tc.want)
		}
	}
}

func TestEnvPolicyValidate(t *testing.T) {
	for _, name := range []string{"", "A=B", "[AB", "A\x00"} {
		if err := (proc.EnvPolicy{Keep: []string{name}}).Validate(); err == nil {
			t.Errorf("Validate(Keep %q) = nil, want an error", name)
		}
	}
	if err := (proc.EnvPolicy{Keep: []string{"AWS_*", "GITHUB_TOKEN"}, Drop: []string{"X?"}}).Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestEnvPolicyWithheld(t *testing.T) {
	env := []string{"PATH=/bin", "NPM_TOKEN=n", "GITHUB_TOKEN=g", "DATABASE_URL=postgres://a:b@c/d", "NPM_TOKEN=again"}
	got := proc.EnvPolicy{}.Withheld(env)
	if diff := cmp.Diff([]string{"DATABASE_URL", "GITHUB_TOKEN", "NPM_TOKEN"}, got); diff != "" {
		t.Errorf("Withheld() (-want +got):\n%s", diff)
	}
	if strings.Contains(strings.Join(got, ","), "postgres") {
		t.Errorf("Withheld() returned a value: %q", got)
	}
}

// TestCommandsDoNotSeeSecrets: a spawned command sees neither the
// default rule's variables nor the dropped ones, and sees the kept ones.
func TestCommandsDoNotSeeSecrets(t *testing.T) {
	env := append(os.Environ(), "GITHUB_TOKEN=ghp_secret1", "AWS_SECRET_ACCESS_KEY=aws_secret2", "OPENAI_API_KEY=sk-secret3",
		"DATABASE_URL=postgres://app:db_secret4@db/app", "CORP_VPN=vpn_secret5", "NPM_TOKEN=npm_kept", "PLAIN=plain_kept")
	p := mustStart(t, proc.Config{Command: "env", Env: env,
		EnvPolicy: proc.EnvPolicy{Keep: []string{"NPM_TOKEN"}, Drop: []string{"CORP_VPN"}}})
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
	q := mustStart(t, proc.Config{Command: "env", Env: env, EnvPolicy: proc.EnvPolicy{KeepAll: true}})
	mustWait(t, q)
	if !strings.Contains(string(q.Read(proc.Combined, 0, 1<<20).Data), "OPENAI_API_KEY=sk-secret3\n") {
		t.Error("KeepAll did not pass the key through")
	}
}

// BenchmarkEnvPolicyApply is the policy's share of every Start: the
// host's environment filtered (compare BenchmarkSpawn).
func BenchmarkEnvPolicyApply(b *testing.B) {
	env := append(os.Environ(), "GITHUB_TOKEN=x", "DATABASE_URL=postgres://a:b@c/d", "HTTPS_PROXY=http://proxy:3128")
	p := proc.EnvPolicy{Keep: []string{"NPM_*"}, Drop: []string{"CORP_VPN"}}
	b.ReportAllocs()
	for b.Loop() {
		p.Apply(env)
	}
	b.ReportMetric(float64(len(env)), "vars")
}

// FuzzEnvPolicy: any variable is either kept whole or withheld by name,
// never both, never mangled, and the names withheld carry no value.
func FuzzEnvPolicy(f *testing.F) {
	for _, kv := range []string{"DATABASE_URL=postgres://a:b@c/d", "X=://:@", "Y=a://b:c@", "PATH=/bin", "=x", "NOEQUALS", "K=https://u:p@h, ftp://x"} {
		f.Add(kv, "AWS_*")
	}
	f.Fuzz(func(t *testing.T, kv, keep string) {
		p := proc.EnvPolicy{Keep: []string{keep}}
		kept, withheld := p.Apply([]string{kv})
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case len(kept)+len(withheld) != 1:
			t.Fatalf("Apply(%q) = %q, %q: want it kept or withheld", kv, kept, withheld)
		case len(kept) == 1 && kept[0] != kv:
			t.Fatalf("Apply(%q) kept %q", kv, kept[0])
		case len(withheld) == 1 && withheld[0] != name:
			t.Fatalf("Apply(%q) withheld %q, want the name %q", kv, withheld[0], name)
		case (len(withheld) == 1) != p.Withholds(name, value):
			t.Fatalf("Apply and Withholds disagree on %q", kv)
		}
	})
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
	for _, kv := range proc.NonInteractiveEnv() {
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
