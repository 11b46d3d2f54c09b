package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// TestBashNamesWithheldVariablesOnce: issue 19 item 4. A model whose gh
// says "not logged in" is told, once, which variables its commands lack:
// names, never values; each agent (owner) is told in its own first
// result.
func TestBashNamesWithheldVariablesOnce(t *testing.T) {
	env := append(os.Environ(), "GITHUB_TOKEN=ghp_value1", "DATABASE_URL=postgres://a:pw_value2@db/a", "NPM_TOKEN=npm_value3")
	e := newEnv(t, tools.Config{Process: proc.Config{Env: env, EnvPolicy: environ.Policy{Keep: []string{"NPM_TOKEN"}}}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "echo $GITHUB_TOKEN $NPM_TOKEN"}`, &out)
	for _, name := range []string{"GITHUB_TOKEN", "DATABASE_URL"} {
		if !strings.Contains(out.Note, name) {
			t.Errorf("the first result's note does not name %s: %q", name, out.Note)
		}
	}
	if strings.Contains(out.Note, "NPM_TOKEN") || strings.Contains(out.Note, "_value") {
		t.Errorf("the note names a kept variable or a value: %q", out.Note)
	}
	if strings.TrimSpace(out.Output) != "npm_value3" {
		t.Errorf("output = %q, want only the kept token", out.Output)
	}
	ok(t, e, e.top, "bash", `{"command": "true"}`, &out)
	if strings.Contains(out.Note, "GITHUB_TOKEN") {
		t.Errorf("the second result names the variables again: %q", out.Note)
	}
	// A sub-agent: a task whose own view calls bash.
	notes := make(chan string, 1)
	e.top.Spawn(task.Spec{Kind: "agent"}, func(ctx context.Context, h *task.Handle) (string, error) {
		res, err := e.set.Tool("bash").Call(ctx, h.View(), json.RawMessage(`{"command": "true"}`))
		notes <- fmt.Sprint(res.Text, err)
		return "", nil
	})
	if text := <-notes; !strings.Contains(text, "GITHUB_TOKEN") {
		t.Errorf("a sub-agent's first result does not name them: %s", text)
	}
}

func TestBashSaysNothingWhenNothingIsWithheld(t *testing.T) {
	e := newEnv(t, tools.Config{Process: proc.Config{Env: []string{"PATH=" + os.Getenv("PATH")}}})
	var out tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "true"}`, &out)
	if out.Note != "" {
		t.Errorf("note = %q, want none", out.Note)
	}
}

// The library names no flag of offstage's CLI to the model: how the user
// lets a withheld variable through is the caller's advice (Config.Advice).
func TestWithheldNoteAdviceIsTheCallers(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "GITHUB_TOKEN=x"}
	for _, c := range []struct {
		advice tools.Advice
		want   string
	}{
		{tools.Advice{}, "who can pass one through."},
		{tools.Advice{KeepEnv: "--pass NAME"}, "who can pass one through (--pass NAME)."},
	} {
		e := newEnv(t, tools.Config{Process: proc.Config{Env: env}, Advice: c.advice})
		var out tools.BashOutput
		ok(t, e, e.top, "bash", `{"command": "true"}`, &out)
		if !strings.HasSuffix(out.Note, c.want) || strings.Contains(out.Note, "offstage") {
			t.Errorf("Advice %+v: note %q, want it to end %q and not name offstage", c.advice, out.Note, c.want)
		}
	}
}
