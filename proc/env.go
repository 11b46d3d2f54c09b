package proc

import (
	"slices"
	"strings"

	"github.com/offstage/offstage/proc/environ"
)

// childEnv returns env (os.Environ() when nil) without what policy
// withholds.
func childEnv(env []string, policy environ.Policy) []string {
	kept, _ := policy.Apply(env)
	return kept
}

// markedEnv returns env with the task's mark in it, in place of any mark
// inherited from a host that itself runs as someone's task.
func markedEnv(env []string, mark string) []string {
	name, _, _ := strings.Cut(mark, "=")
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, mark)
}

// withDefaults returns env with each of defaults (NAME=value) that env
// does not set appended.
func withDefaults(env, defaults []string) []string {
	set := make(map[string]bool, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	out := slices.Clip(env) // env's backing array is never written
	for _, kv := range defaults {
		name, _, _ := strings.Cut(kv, "=")
		if !set[name] {
			out = append(out, kv)
		}
	}
	return out
}
