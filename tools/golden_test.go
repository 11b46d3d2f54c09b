package tools_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// volatile matches what differs from run to run: ages, durations, pids.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"(age_seconds|silent_seconds|duration_seconds)":[0-9.e+-]+`), `"$1":0`},
	// A running shell's usage, left out: whether a 0 shows depends on the
	// machine (TestListShowsUsage looks at it).
	{regexp.MustCompile(`,"(processes|cpu_seconds|memory_mib|memory_peak_mib)":[0-9.e+-]+`), ``},
	{regexp.MustCompile(`pid [0-9]+`), `pid N`},
	{regexp.MustCompile(`after [0-9.]+(ns|µs|ms|s)`), `after T`},
}

// golden compares a result with testdata/golden/name.json, so any change to
// what the model sees is deliberate (go test -run Golden -update rewrites).
func golden(t *testing.T, name, text string) {
	t.Helper()
	for _, v := range volatile {
		text = v.re.ReplaceAllString(text, v.with)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(text), "", "  "); err != nil {
		t.Fatalf("%s: %v in %s", name, err, text)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), pretty.String()); diff != "" {
		t.Errorf("%s changed (-golden +now); if deliberate, run with -update:\n%s", name, diff)
	}
}

func TestGolden(t *testing.T) {
	// A fixed environment: the first result names what it withholds, and
	// must not depend on the machine's.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GITHUB_TOKEN=golden"}
	e := newEnv(t, tools.Config{Process: proc.Config{Env: env}})
	run := func(name, tool, args string) {
		t.Helper()
		golden(t, name, e.call(t, e.top, tool, args).Text)
	}
	run("bash_foreground", "bash", `{"command": "printf 'hello\\nworld\\n'; exit 2"}`)
	run("bash_background", "bash", `{"command": "echo started; sleep 100", "run_in_background": true}`) // shell:2
	waitOutput(t, e.top, "shell:2", "started")
	run("bash_bad_arguments", "bash", `{"command": 7}`)
	run("task_output", "task_output", `{"task_id": "shell:1", "since": 0}`)
	run("task_list", "task_list", `{}`)
	run("task_wait_timeout", "task_wait", `{"task_ids": ["shell:2"], "timeout_seconds": 0.2}`)
	run("task_inspect", "task_inspect", `{"task_id": "shell:1"}`)
	run("task_cancel", "task_cancel", `{"task_id": "2"}`)
	run("task_input_not_interactive", "task_input", `{"task_id": "shell:2", "text": "x"}`)
	run("unknown_task", "task_inspect", `{"task_id": "agent:42"}`)
	waitDone(t, e.top, "shell:2")
	run("task_wait_done", "task_wait", `{"task_ids": ["shell:2", "shell:1"], "mode": "all"}`)
}

// waitOutput polls a shell's output until it contains want, so what the
// golden files show does not depend on timing.
func waitOutput(t *testing.T, v *task.View, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, err := v.Peek(id, 10); err == nil && strings.Contains(p.Output, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never printed %q", id, want)
		}
		time.Sleep(time.Millisecond)
	}
}
