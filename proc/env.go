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
// inherited from a host that itself runs as someone's task. The result is
// a new slice with room for spare more variables, for withDefaults.
func markedEnv(env []string, mark string, spare int) []string {
	name, _, _ := strings.Cut(mark, "=")
	prefix := mark[:len(name)+1] // "NAME="
	out := make([]string, 0, len(env)+1+spare)
	for _, kv := range env {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return append(out, mark)
}

// withDefaults returns env with each of defaults (NAME=value) that env
// does not set appended: in place, where env has the room (markedEnv's
// result, which is the caller's to change).
func withDefaults(env, defaults []string) []string {
	n := len(env)
	for _, kv := range defaults {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(env[:n], func(e string) bool {
			return len(e) > len(name) && e[len(name)] == '=' && e[:len(name)] == name
		}) {
			env = append(env, kv)
		}
	}
	return env
}

// nonInteractive is environ.NonInteractive, made once.
var nonInteractive = environ.NonInteractive()
