package environ_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/proc/environ"
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
		if got := (environ.Policy{}).Withholds(tc.name, tc.value); got != tc.withheld {
			t.Errorf("Withholds(%s=%s) = %v, want %v", tc.name, tc.value, got, tc.withheld)
		}
	}
}

func TestEnvPolicyKeepDrop(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		policy environ.Policy
		name   string
		want   bool
	}{
		{"kept by name", environ.Policy{Keep: []string{"GITHUB_TOKEN"}}, "GITHUB_TOKEN", false},
		{"keeping one keeps no other", environ.Policy{Keep: []string{"GITHUB_TOKEN"}}, "NPM_TOKEN", true},
		{"kept by pattern", environ.Policy{Keep: []string{"AWS_*"}}, "AWS_SECRET_ACCESS_KEY", false},
		{"names are case sensitive", environ.Policy{Keep: []string{"github_token"}}, "GITHUB_TOKEN", true},
		{"dropped by name", environ.Policy{Drop: []string{"CORP_VPN"}}, "CORP_VPN", true},
		{"dropped by pattern", environ.Policy{Drop: []string{"CORP_*"}}, "CORP_VPN", true},
		{"drop beats keep", environ.Policy{Keep: []string{"X"}, Drop: []string{"X"}}, "X", true},
		{"keep all", environ.Policy{KeepAll: true}, "OPENAI_API_KEY", false},
		{"keep all still drops", environ.Policy{KeepAll: true, Drop: []string{"OPENAI_API_KEY"}}, "OPENAI_API_KEY", true},
		{"a later keep undoes a drop", environ.Policy{Drop: []string{"X"}}.Then(environ.Policy{Keep: []string{"X"}}), "X", false},
		{"a later drop undoes a keep", environ.Policy{Keep: []string{"GITHUB_TOKEN"}}.Then(environ.Policy{Drop: []string{"GITHUB_TOKEN"}}), "GITHUB_TOKEN", true},
		{"layers add up", environ.Policy{Keep: []string{"GITHUB_TOKEN"}}.Then(environ.Policy{Keep: []string{"NPM_TOKEN"}}), "GITHUB_TOKEN", false},
	} {
		if got := tc.policy.Withholds(tc.name, "v"); got != tc.want {
			t.Errorf("%s: %+v.Withholds(%s) = %v, want %v", tc.desc, tc.policy, tc.name, got, tc.want)
		}
	}
}

func TestEnvPolicyValidate(t *testing.T) {
	for _, name := range []string{"", "A=B", "[AB", "A\x00"} {
		if err := (environ.Policy{Keep: []string{name}}).Validate(); err == nil {
			t.Errorf("Validate(Keep %q) = nil, want an error", name)
		}
	}
	if err := (environ.Policy{Keep: []string{"AWS_*", "GITHUB_TOKEN"}, Drop: []string{"X?"}}).Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestEnvPolicyWithheld(t *testing.T) {
	env := []string{"PATH=/bin", "NPM_TOKEN=n", "GITHUB_TOKEN=g", "DATABASE_URL=postgres://a:b@c/d", "NPM_TOKEN=again"}
	got := environ.Policy{}.Withheld(env)
	if diff := cmp.Diff([]string{"DATABASE_URL", "GITHUB_TOKEN", "NPM_TOKEN"}, got); diff != "" {
		t.Errorf("Withheld() (-want +got):\n%s", diff)
	}
	if strings.Contains(strings.Join(got, ","), "postgres") {
		t.Errorf("Withheld() returned a value: %q", got)
	}
}

// TestEnvPolicyApplyAgain: Apply remembers its last answer; the answer
// must follow a change of the environment (in the caller's own slice
// too) or of the policy, and what a caller does to an answer must not
// reach the next one.
func TestEnvPolicyApplyAgain(t *testing.T) {
	env := []string{"PATH=/bin", "GITHUB_TOKEN=g", "HOME=/root"}
	p := environ.Policy{}
	check := func(what string, p environ.Policy, env []string, wantKept, wantWithheld []string) {
		t.Helper()
		kept, withheld := p.Apply(env)
		if diff := cmp.Diff(wantKept, kept); diff != "" {
			t.Errorf("%s: kept (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(wantWithheld, withheld); diff != "" {
			t.Errorf("%s: withheld (-want +got):\n%s", what, diff)
		}
		// The caller's to change: the next answer stays whole.
		for i := range kept {
			kept[i] = "CHANGED=1"
		}
		for i := range withheld {
			withheld[i] = "CHANGED"
		}
	}
	check("first", p, env, []string{"PATH=/bin", "HOME=/root"}, []string{"GITHUB_TOKEN"})
	check("again", p, env, []string{"PATH=/bin", "HOME=/root"}, []string{"GITHUB_TOKEN"})
	check("and again", p, env, []string{"PATH=/bin", "HOME=/root"}, []string{"GITHUB_TOKEN"})
	env[2] = "AWS_SECRET_ACCESS_KEY=s" // the same slice, changed in place
	check("changed in place", p, env, []string{"PATH=/bin"}, []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"})
	check("another policy", environ.Policy{Keep: []string{"GITHUB_TOKEN"}}, env,
		[]string{"PATH=/bin", "GITHUB_TOKEN=g"}, []string{"AWS_SECRET_ACCESS_KEY"})
	check("KeepAll", environ.Policy{KeepAll: true}, env, env, nil)
	check("back", p, env, []string{"PATH=/bin"}, []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"})
	check("empty", p, []string{}, []string{}, nil)
	check("one more", p, env[:1], []string{"PATH=/bin"}, nil)
}

// BenchmarkEnvPolicyApply is the policy's share of every Start: the
// host's environment filtered (compare BenchmarkSpawn).
func BenchmarkEnvPolicyApply(b *testing.B) {
	env := append(os.Environ(), "GITHUB_TOKEN=x", "DATABASE_URL=postgres://a:b@c/d", "HTTPS_PROXY=http://proxy:3128")
	p := environ.Policy{Keep: []string{"NPM_*"}, Drop: []string{"CORP_VPN"}}
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
		p := environ.Policy{Keep: []string{keep}}
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
