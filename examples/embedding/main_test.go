package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if crashChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// TestRestart: a process dies with a session open and a shell running; the
// restart stops the shell, and the resumed session's model hears of it.
func TestRestart(t *testing.T) {
	var out strings.Builder
	if err := restart(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"the first process died with session ",
		"resumed; the model is told: offstage restarted, and these tasks of yours were still running when it stopped",
		"model: offstage restarted and the build was lost; I will start it again.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`model ran bash in the background: {"task_id":"shell:1","status":"running"`,
		`model ran bash in the foreground: {"task_id":"shell:2","status":"completed","exit_code":0`,
		"idle; waiting for background work",
		"reflow into the conversation: shell:1 (sleep 0.5; echo build ok) completed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
