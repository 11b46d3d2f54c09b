package proc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
)

const hiddenValue = "sk-proj-hidden-e2e-value"

// TestHideWithheldClearsTheEnvironmentBlock: issue 33 item 5. After
// HideWithheld, neither the process itself (/proc/self/environ) nor a
// command it starts (/proc/$PPID/environ, readable when both are the same
// user, root included) finds a withheld value; os.Getenv still has it,
// and a variable the policy passes stays in the block.
func TestHideWithheldClearsTheEnvironmentBlock(t *testing.T) {
	cmd := exec.Command(os.Args[0], "hide")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "OPENAI_API_KEY="+hiddenValue, "PLAIN_SETTING=plain-e2e-value")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"hidden: [OPENAI_API_KEY], again: []", "getenv: " + hiddenValue} {
		if !strings.Contains(text, want) {
			t.Errorf("helper output lacks %q", want)
		}
	}
	for _, where := range []string{"self: ", "command: "} {
		seen := false
		for line := range strings.SplitSeq(text, "\n") {
			if !strings.HasPrefix(line, where) {
				continue
			}
			seen = true
			if strings.Contains(line, hiddenValue) {
				t.Errorf("%s still shows the withheld value", strings.TrimSuffix(where, ": "))
			}
			if !strings.Contains(line, "PLAIN_SETTING=plain-e2e-value") {
				t.Errorf("%s lost a variable the policy passes", strings.TrimSuffix(where, ": "))
			}
		}
		if !seen {
			t.Errorf("helper output has no %q line", where)
		}
	}
	if t.Failed() {
		t.Logf("helper output:\n%s", text)
	}
}

func hideHelper() int {
	names, err := proc.HideWithheld(proc.EnvPolicy{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	again, _ := proc.HideWithheld(proc.EnvPolicy{})
	fmt.Printf("hidden: %v, again: %v\n", names, again)
	fmt.Println("getenv:", os.Getenv("OPENAI_API_KEY"))
	self, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("self:", strings.ReplaceAll(string(self), "\x00", " "))
	// A command of the host's, unsandboxed, reading its host's block: as
	// the same user it may (as root, whatever the host's protections).
	p, err := proc.Start(context.Background(), proc.Config{Command: `tr '\0' ' ' </proc/$PPID/environ`})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	e, err := p.Wait(context.Background())
	out := p.Read(proc.Combined, 0, 1<<20)
	fmt.Printf("command: %s (exit %v %v)\n", out.Data, e.Code, err)
	return 0
}
