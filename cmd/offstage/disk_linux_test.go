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
// task_output's note gives that reason and offset.
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
	note := regexp.MustCompile(`^\d+ bytes before this output are lost: the output log stopped at byte (\d+) because writing it failed \(no space left on device\)`)
	m := note.FindStringSubmatch(read.Note)
	if read.SkippedBytes == 0 || m == nil {
		t.Errorf("task_output skipped %d bytes, note %q; want the full disk as the reason", read.SkippedBytes, read.Note)
	}
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
	cut := regexp.MustCompile(`\n\[offstage: log cut at byte (\d+): \d+ more bytes of output were not logged; writing failed: write \S+: no space left on device\]\n$`)
	c := cut.FindSubmatch(b)
	if c == nil {
		t.Errorf("the log (%d bytes) does not end with the cut line: %q", len(b), b[max(0, len(b)-160):])
	} else if m != nil && string(c[1]) != m[1] {
		t.Errorf("the log says it stopped at byte %s, task_output at %s", c[1], m[1])
	}
	if n := strings.Count(stderr.String(), "offstage: output log "); n != 1 || !strings.Contains(stderr.String(), "no space left on device; the rest of that task's output is kept only in memory") {
		t.Errorf("stderr says it %d times, want once:\n%s", n, stderr.String())
	}
}
