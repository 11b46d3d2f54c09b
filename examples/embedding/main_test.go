package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
