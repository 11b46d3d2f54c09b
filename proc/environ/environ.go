// Package environ decides what of the host's environment a command of
// package proc sees (proc.Config.EnvPolicy), and keeps the host's own
// secrets from its commands.
//
// A command sees the host's environment (or proc.Config.Env) without what
// a Policy withholds: by default whatever looks like a secret, by its
// name or the shape of its value; Keep and Drop correct the rule,
// Withheld lists the names withheld, Then layers one policy over
// another. A command that nothing can answer also gets NonInteractive's
// settings.
//
// Filtering a child's environment does not hide the host's own
// (/proc/PID/environ and its memory): ProtectHost does, as far as the
// kernel allows, and HideWithheld overwrites the withheld values in the
// host's environment block. A program that holds secrets its commands
// must not read calls ProtectHost early in main:
//
//	if err := environ.ProtectHost(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
//		log.Fatal(err)
//	}
//
// Everything here is safe for concurrent use; a Policy is a value, never
// modified by its methods.
package environ

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// Policy decides which of the host's environment variables a command
// sees. The zero value is the default rule: a variable is withheld when
//
//   - its name contains KEY, SECRET, TOKEN, PASSWORD, PASSWD or
//     CREDENTIAL, in any case (OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY,
//     GITHUB_TOKEN, PGPASSWORD, GOOGLE_APPLICATION_CREDENTIALS), or has
//     PASS, COOKIE, PRIVATE, DSN, AUTH, PAT, JWT or PWD as a part between
//     underscores (DB_PASS, SESSION_COOKIE, SENTRY_DSN, GH_PAT,
//     CI_JOB_JWT, DB_PWD; not PWD itself nor SSH_AUTH_SOCK);
//   - it is OFFSTAGE_JOURNAL_URL (the journal's URL, which names its
//     server and user even without a password);
//   - or its value holds a URL with a password in it
//     (postgres://app:pw@db/app), whatever its name: DATABASE_URL,
//     REDIS_URL, and also HTTPS_PROXY=http://user:pw@proxy, because the
//     password is the secret, not the name. A URL without a password
//     (DATABASE_URL=postgres://localhost/app) is passed;
//   - or its value sets a password as connection strings do
//     (PG_DSN='host=db password=pw', mongodb://db/app?password=pw);
//   - or its value has the shape of a well-known credential, whatever its
//     name: a GitHub (ghp_…, github_pat_…), GitLab (glpat-…), Stripe
//     (sk_live_…), Slack (xoxb-…), OpenAI (sk-proj-…) or Anthropic
//     (sk-ant-…) token, an AWS access key id (AKIA…), or an Authorization
//     value (Bearer …, Basic …).
//
// The rule goes by names and the shape of values, so it errs both ways:
// it withholds harmless names (TOKENIZERS_PARALLELISM, KEYTIMEOUT) and
// passes secrets with innocent names (a webhook URL with its secret in
// the path, a bare token in AUTH).
// Keep and Drop correct it; Withheld lists what it withheld, so a program
// that finds itself logged out can be explained.
//
// Names in Keep and Drop are matched exactly (environment names are case
// sensitive), or as a pattern with * and ? (path.Match: AWS_*). A name
// both kept and dropped is dropped.
type Policy struct {
	// Keep names variables a command sees even though the default rule
	// would withhold them.
	Keep []string
	// Drop names more variables to withhold.
	Drop []string
	// KeepAll turns the default rule off: only Drop is withheld.
	KeepAll bool
}

// defaultSecrets returns the variables the default rule withholds by name
// beyond its patterns: offstage's own secrets whose names the patterns do
// not catch.
func defaultSecrets() []string { return []string{"OFFSTAGE_JOURNAL_URL"} }

// secretWords are the name parts the default rule withholds, upper case.
var secretWords = []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"}

// Then returns p with q applied on top, as a more specific layer (flags
// over a config file, a profile over its session): q's Keep and Drop are
// added, and each undoes the same name in p's other list, so a layer can
// keep what an earlier one dropped. KeepAll holds if either sets it.
func (p Policy) Then(q Policy) Policy {
	out := Policy{KeepAll: p.KeepAll || q.KeepAll}
	for _, n := range p.Keep {
		if !slices.Contains(q.Drop, n) {
			out.Keep = append(out.Keep, n)
		}
	}
	for _, n := range p.Drop {
		if !slices.Contains(q.Keep, n) {
			out.Drop = append(out.Drop, n)
		}
	}
	out.Keep = append(out.Keep, q.Keep...)
	out.Drop = append(out.Drop, q.Drop...)
	return out
}

// Validate reports a name in Keep or Drop that cannot be one: empty,
// holding "=", or a malformed pattern.
func (p Policy) Validate() error {
	for _, n := range slices.Concat(p.Keep, p.Drop) {
		if err := ValidName(n); err != nil {
			return err
		}
	}
	return nil
}

// ValidName says why name (or pattern) cannot be in a Policy, or
// returns nil.
func ValidName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an empty variable name")
	case strings.ContainsAny(name, "=\x00"):
		return fmt.Errorf("%q: a variable name cannot hold = or NUL (give the name alone)", name)
	}
	if _, err := path.Match(name, ""); err != nil {
		return fmt.Errorf("%q: a malformed pattern (* and ? match, [ must be closed)", name)
	}
	return nil
}

// Withholds says whether the policy keeps variable name, whose value is
// value, from a command.
func (p Policy) Withholds(name, value string) bool {
	switch {
	case matchesAny(p.Drop, name):
		return true
	case p.KeepAll || matchesAny(p.Keep, name):
		return false
	}
	return defaultWithholds(name, value)
}

// defaultWithholds is the default rule.
func defaultWithholds(name, value string) bool {
	return secretName(name) || slices.Contains(defaultSecrets(), name) || hasURLPassword(value) || hasPasswordSetting(value) || tokenValue(value)
}

// verdicts remembers the default rule's verdict on each variable it
// judged: a command's environment is mostly the one the command before it
// had, and judging it afresh was a tenth of what a spawn costs us beyond
// os/exec. Bounded: variables longer than maxVerdictLen are not kept, and
// the whole is forgotten when it holds maxVerdictBytes; the last Apply
// (last) is kept up to maxAppliedBytes.
var verdicts struct {
	mu    sync.Mutex
	m     map[string]bool
	bytes int
	last  applied
}

const (
	maxVerdictLen   = 4 << 10
	maxVerdictBytes = 1 << 20
)

// withholds is Withholds for the variable kv ("name=value"), with
// verdicts.mu held.
func (p Policy) withholds(kv, name, value string) bool {
	switch {
	case matchesAny(p.Drop, name):
		return true
	case p.KeepAll || matchesAny(p.Keep, name):
		return false
	case len(kv) > maxVerdictLen:
		return defaultWithholds(name, value)
	}
	v, ok := verdicts.m[kv]
	if ok {
		return v
	}
	v = defaultWithholds(name, value)
	if verdicts.m == nil || verdicts.bytes+len(kv) > maxVerdictBytes {
		verdicts.m, verdicts.bytes = make(map[string]bool), 0
	}
	verdicts.m[kv] = v
	verdicts.bytes += len(kv)
	return v
}

// Apply returns env (os.Environ() when nil) without the variables the
// policy withholds, and the names it withheld, in the order found. env is
// not modified.
func (p Policy) Apply(env []string) (kept, withheld []string) {
	if env == nil {
		env = os.Environ()
	}
	// Held for the whole environment, not taken for each variable: the
	// judging is brief, and most of it is looking up verdicts.
	verdicts.mu.Lock()
	defer verdicts.mu.Unlock()
	last := &verdicts.last
	if last.ok && p.KeepAll == last.keepAll &&
		slices.Equal(p.Drop, last.drop) && slices.Equal(p.Keep, last.keep) && slices.Equal(env, last.env) {
		return slices.Clone(last.kept), slices.Clone(last.withheld)
	}
	kept = make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if p.withholds(kv, name, value) {
			withheld = append(withheld, name)
			continue
		}
		kept = append(kept, kv)
	}
	last.remember(p, env, kept, withheld)
	return kept, withheld
}

// remember keeps copies of an Apply's policy, environment and answer, in
// the arrays of the last ones (an Apply that finds another policy or
// environment does not allocate them afresh): the caller's slices are
// the caller's to change. An environment of more than maxAppliedBytes is
// not kept (it is left to the caller's memory alone), nor is the answer.
func (a *applied) remember(p Policy, env, kept, withheld []string) {
	size := 0
	for _, kv := range env {
		size += len(kv)
	}
	a.ok = size <= maxAppliedBytes
	if !a.ok {
		*a = applied{}
		return
	}
	a.keepAll = p.KeepAll
	a.drop = refill(a.drop, p.Drop)
	a.keep = refill(a.keep, p.Keep)
	a.env = refill(a.env, env)
	a.kept = refill(a.kept, kept)
	a.withheld = refill(a.withheld, withheld)
}

// refill returns src copied into dst's array, with nothing of dst left
// past it.
func refill(dst, src []string) []string {
	dst = append(dst[:0], src...)
	clear(dst[len(dst):cap(dst)])
	return dst
}

// applied is the last Apply's policy, environment and answer: one
// environment after another is mostly the same one (os.Environ(), for
// a command after a command), and comparing it (its strings are the
// same strings) is a fraction of looking up each variable's verdict.
type applied struct {
	ok                  bool // something is kept
	drop, keep          []string
	keepAll             bool
	env, kept, withheld []string
}

// maxAppliedBytes bounds the environment Apply remembers, in the bytes of
// its variables (a few KiB is usual; ARG_MAX is 2 MiB).
const maxAppliedBytes = 256 << 10

// Withheld returns the sorted names of the variables of env (os.Environ()
// when nil) the policy withholds: what to tell a model whose commands
// will not see them. It never returns a value.
func (p Policy) Withheld(env []string) []string {
	_, names := p.Apply(env)
	slices.Sort(names)
	return slices.Compact(names)
}

func matchesAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		if pat == name {
			return true
		}
		if !strings.ContainsAny(pat, `*?[\`) {
			continue // a plain name, compared above
		}
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// secretParts are words the default rule withholds when they stand as a
// whole part of a name between underscores (DB_PASS, SENTRY_DSN), where
// a substring would catch too much (PASSTHROUGH, COMPASS).
var secretParts = []string{"PASS", "COOKIE", "PRIVATE", "DSN", "AUTH", "PAT", "JWT", "PWD"}

// notSecretNames hold a secret part but no secret: the working
// directory, and ssh-agent's socket, a path git over ssh needs.
var notSecretNames = []string{"PWD", "SSH_AUTH_SOCK"}

// tokenPrefixes start the values of well-known credentials, whatever the
// variable holding them is called: GitHub's and GitLab's personal tokens,
// Stripe's, Slack's, OpenAI's and Anthropic's keys.
var tokenPrefixes = []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk_live_", "rk_live_", "sk-ant-", "sk-proj-", "xoxb-", "xoxp-", "xoxa-"}

// tokenValue says whether a value is a well-known credential by its
// shape: one of tokenPrefixes, an AWS access key id, or an HTTP
// Authorization value (Bearer, Basic).
func tokenValue(v string) bool {
	v = strings.TrimSpace(v)
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(v, p) && len(v) > len(p)+8 {
			return true
		}
	}
	lower := strings.ToLower(v)
	if (strings.HasPrefix(lower, "bearer ") || strings.HasPrefix(lower, "basic ")) && len(strings.TrimSpace(v[6:])) >= 8 {
		return true
	}
	if len(v) == 20 && strings.HasPrefix(v, "AKIA") && strings.IndexFunc(v, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) < 0 {
		return true
	}
	return false
}

// secretName says whether name contains one of secretWords, or has one of
// secretParts as a part, in any case.
func secretName(name string) bool {
	upper := strings.ToUpper(name)
	if slices.Contains(notSecretNames, upper) {
		return false
	}
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	for part := range strings.SplitSeq(upper, "_") {
		if slices.Contains(secretParts, part) {
			return true
		}
	}
	return false
}

// hasPasswordSetting says whether s sets a password the way connection
// strings do: "password=…" (PG_DSN='host=h password=pw',
// mongodb://h/db?password=pw), in any case.
func hasPasswordSetting(s string) bool {
	lower := strings.ToLower(s)
	for _, k := range []string{"password=", "passwd=", "pwd="} {
		if i := strings.Index(lower, k); i >= 0 && i+len(k) < len(s) && !strings.ContainsRune(" &;", rune(s[i+len(k)])) {
			return true
		}
	}
	return false
}

// hasURLPassword says whether s holds scheme://user:password@host with a
// password that is not empty, anywhere (a list of URLs included).
func hasURLPassword(s string) bool {
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			return false
		}
		s = s[i+3:]
		// The authority ends at the path, query, fragment, or a separator
		// of a list of URLs.
		end := strings.IndexAny(s, "/?#, \t\n;")
		if end < 0 {
			end = len(s)
		}
		auth := s[:end]
		at := strings.LastIndexByte(auth, '@')
		if at < 0 {
			continue
		}
		if _, pw, ok := strings.Cut(auth[:at], ":"); ok && pw != "" {
			return true
		}
	}
}

// NonInteractive returns the variables a command gets when nothing can
// answer it (proc.Config.Stdin and proc.Config.TTY both off): settings that make
// common tools fail at once, or answer for themselves, instead of waiting
// for a person who will never come:
//
//   - GIT_TERMINAL_PROMPT=0: git asks no user name or password on the
//     terminal ("terminal prompts disabled"); GCM_INTERACTIVE=never does
//     the same for Git Credential Manager;
//   - GIT_EDITOR=true: git commit without -m, git rebase --continue, git
//     merge and git tag -a take the message as it stands instead of
//     opening an editor (an empty message aborts the commit);
//   - GIT_PAGER=cat and PAGER=cat: nothing waits in a pager;
//   - DEBIAN_FRONTEND=noninteractive: apt and dpkg take the defaults;
//   - npm_config_yes=true: npx and npm init proceed without "Ok to
//     proceed?";
//   - PIP_NO_INPUT=1 and GH_PROMPT_DISABLED=1: pip and gh do not prompt.
//
// A variable the environment already sets (the host's, or proc.Config.Env) is
// left as it is: the user's value wins, so a user who wants another
// editor or pager for the agent's commands sets it. Commands with input
// open or on a terminal get none of these: someone can answer them.
func NonInteractive() []string {
	return []string{
		"GIT_TERMINAL_PROMPT=0",
		"GCM_INTERACTIVE=never",
		"GIT_EDITOR=true",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"DEBIAN_FRONTEND=noninteractive",
		"npm_config_yes=true",
		"PIP_NO_INPUT=1",
		"GH_PROMPT_DISABLED=1",
	}
}
