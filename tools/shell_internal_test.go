package tools

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// TestAShellResultSaysWhereItsLogStopped: the result of a shell whose log
// filled its disk says where logging stopped and how much was not logged
// (issue 19, item 5; proc's TestAFullDiskStopsTheLogWithAMark makes the
// full disk).
func TestAShellResultSaysWhereItsLogStopped(t *testing.T) {
	e := proc.Exit{
		LogErr: &proc.LogError{Path: "out.log", At: 299_008, Err: &os.PathError{Op: "write", Path: "out.log", Err: syscall.EFBIG}},
		LogCut: 4<<20 - 299_008,
	}
	want := "its output log stopped at byte 299008 (file too large), so 3895296 bytes of it were not logged"
	if got := shellResult(nil, e, 1, 100); !strings.Contains(got, want) {
		t.Errorf("result %q lacks %q", got, want)
	}
}

// TestAForegroundCommandWhoseResultWentElsewhere: a foreground bash whose
// result another call of the turn took first (a task_wait on it beside
// it) says it finished, with its exit code, not that it waits for input
// and keeps running in the background (an outsider saw both at once, with
// no exit code, about one run in five).
func TestAForegroundCommandWhoseResultWentElsewhere(t *testing.T) {
	tb := task.New(t.Context(), task.Options{})
	defer tb.Close(context.Background())
	v := tb.View("")
	s := New(Config{})
	id, started, err := spawnShell(v, proc.Config{Command: "exit 3", Dir: t.TempDir()}, ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if r, err := v.Wait(t.Context(), []string{id}, task.All); err != nil || len(r.Done) != 1 {
		t.Fatalf("the other call's wait: %+v, %v", r, err) // it takes the result
	}
	out, err := s.foreground(t.Context(), v, id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != "failed" || out.ExitCode == nil || *out.ExitCode != 3 || strings.Contains(out.Note, "keeps running") {
		t.Errorf("foreground = %+v, want failed with exit code 3 and not running on", out)
	}
}
