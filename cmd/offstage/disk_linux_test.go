package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/tools"
)

// smallDisk mounts a tmpfs of size bytes for the test, or skips the test
// when it may not mount one (it needs root, or CAP_SYS_ADMIN).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a %s tmpfs to fill (%v); proc's TestAFullDiskStopsTheLogWithAMark covers the log without a mount", size, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// TestMCPOnAFullDiskSaysTheLogStopped (issue 19, item 5), on a real full
// disk: offstage mcp with its state on a 2 MiB tmpfs runs a command that
// prints 10 MB. Before, the log ended at 1.96 MB with no closing line,
// nothing was said, and task_output blamed memory for the lost bytes. Now
// stderr says it once, the log ends with where and why it stopped, and
// task_output's note gives that reason and offset. And the log stops
// short of filling the disk (its reserve, 1 MiB here), so the journal
// beside it records the next task: before, the disk was full for it too.
func TestMCPOnAFullDiskSaysTheLogStopped(t *testing.T) {
	state := smallDisk(t, "2m")
	cmd, mark := offstage(t, nil, "mcp", "--state-dir", state)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-test"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, args map[string]any, out any) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s = %+v, %v", name, res, err)
		}
		if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), out); err != nil {
			t.Fatal(err)
		}
	}
	var ran tools.BashOutput
	call("bash", map[string]any{"command": `head -c 10000000 /dev/zero | tr '\0' x | fold -w 99`}, &ran)
	if ran.Status != "completed" {
		t.Fatalf("bash = %+v", ran)
	}
	var read tools.TaskOutputResult
	call("task_output", map[string]any{"task_id": ran.TaskID, "since": 3_000_000}, &read)
	note := regexp.MustCompile(`^\d+ bytes before this output are lost: the output log stopped at byte (\d+) because the disk is nearly full: `)
	m := note.FindStringSubmatch(read.Note)
	if read.SkippedBytes == 0 || m == nil {
		t.Errorf("task_output skipped %d bytes, note %q; want the full disk as the reason", read.SkippedBytes, read.Note)
	}
	// The log left its reserve: the journal beside it goes on recording.
	var after tools.BashOutput
	call("bash", map[string]any{"command": "echo after the flood"}, &after)
	if err := cs.Close(); err != nil {
		t.Logf("Close() = %v", err)
	}
	noSurvivors(t, mark)

	logs, _ := filepath.Glob(filepath.Join(state, "logs", "*", "shell-1.log"))
	if len(logs) != 1 {
		t.Fatalf("logs = %q", logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	cut := regexp.MustCompile(`\n\[offstage: log cut at byte (\d+): \d+ more bytes of output were not logged; stopped: the disk is nearly full: [\d.]+ [KM]iB free, which is kept for the journal and others\]\n$`)
	c := cut.FindSubmatch(b)
	if c == nil {
		t.Errorf("the log (%d bytes) does not end with the cut line: %q", len(b), b[max(0, len(b)-160):])
	} else if m != nil && string(c[1]) != m[1] {
		t.Errorf("the log says it stopped at byte %s, task_output at %s", c[1], m[1])
	}
	// Once per log: the next task's log has no room either, and says so.
	if n := strings.Count(stderr.String(), "shell-1.log stopped at byte"); n != 1 || !strings.Contains(stderr.String(), "which is kept for the journal and others; the rest of that task's output is kept only in memory") {
		t.Errorf("stderr says it %d times, want once:\n%q", n, stderr.String())
	}
	if strings.Contains(stderr.String(), "journal") && strings.Contains(stderr.String(), "no space left") {
		t.Errorf("the journal ran out of space:\n%s", stderr.String())
	}
	tasks, _ := offstage(t, nil, "tasks", "--state-dir", state, "--json")
	got, err := tasks.Output()
	if err != nil || strings.Count(string(got), `"state":"completed"`) != 2 || !strings.Contains(string(got), "after the flood") {
		t.Errorf("the journal after the flood: %s (%v); want both tasks completed, the second's output in it", got, err)
	}
}
