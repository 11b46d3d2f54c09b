package proc

import (
	"os"
	"slices"
	"strings"
)

// DefaultSecrets returns the environment variables removed from every
// child's environment unless Config.KeepSecrets is set: provider API keys
// a model could otherwise read with "env", offstage's own MCP token, and
// the credentials of a shared journal (its URL, PostgreSQL's password).
func DefaultSecrets() []string {
	return []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OFFSTAGE_MCP_TOKEN", "OFFSTAGE_JOURNAL_URL", "PGPASSWORD"}
}

// childEnv returns env (os.Environ() when nil) without the secret names.
func childEnv(env []string, secrets []string, keep bool) []string {
	if env == nil {
		env = os.Environ()
	}
	if keep {
		return env
	}
	secrets = append(DefaultSecrets(), secrets...)
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(secrets, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// markedEnv returns env with the task's mark in it, in place of any mark
// inherited from a host that itself runs as someone's task.
func markedEnv(env []string, m mark) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, markEnv+"=") {
			out = append(out, kv)
		}
	}
	return append(out, m.env())
}
