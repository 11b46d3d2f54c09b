package proc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/offstage/offstage/proc"
)

// logFull is what the "log-full" helper reports.
type logFull struct {
	Calls   int32  // OnLogError calls
	Err     string // what OnLogError was told
	At      int64  // Exit.LogErr's offset
	Reason  string
	LogCut  int64
	Held    int64 // Process.Log().Held after the exit
	Bytes   int64
	Skipped int64 // a read past At, behind the ring
}

// TestAFullDiskStopsTheLogWithAMark (issue 19, item 5): the log's file
// system fills up (here a file size limit, RLIMIT_FSIZE, in a re-executed
// helper, so no mount is needed) while a command prints 4 MiB. Before,
// the log just ended: no closing line (it failed on the full disk too),
// nothing told, and the loss looked like the ring's. Now OnLogError is
// told once, Exit.LogErr and Process.Log say where logging stopped, the
// result says so, and the file ends with the line that says where and
// why, inside the limit: output was given back to make room for it.
func TestAFullDiskStopsTheLogWithAMark(t *testing.T) {
	const limit, total = 300_000, 4 << 20
	logPath := filepath.Join(t.TempDir(), "out.log")
	cmd := exec.Command(os.Args[0], "log-full", strconv.Itoa(limit), logPath, strconv.Itoa(total))
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var got logFull
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	if got.Calls != 1 || !strings.Contains(got.Err, "file too large") || got.Reason != "file too large" {
		t.Errorf("OnLogError: %d calls, last %q (reason %q); want 1 call for a file too large", got.Calls, got.Err, got.Reason)
	}
	if got.Bytes != total || got.At <= 0 || got.At >= limit || got.Held != got.At || got.LogCut != total-got.At {
		t.Errorf("Exit: %d bytes, log stopped at %d, holds %d, cut %d; want %d bytes, stopped under %d, holding it, the rest cut",
			got.Bytes, got.At, got.Held, got.LogCut, total, limit)
	}
	if got.Skipped == 0 {
		t.Error("a read past the log's end, behind the ring, skipped nothing")
	}

	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > limit {
		t.Errorf("log is %d bytes, over the limit %d", len(b), limit)
	}
	pattern := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	pattern[len(pattern)-1] = '\n'
	for i := range min(got.At, int64(len(b))) {
		if b[i] != pattern[i%int64(len(pattern))] {
			t.Fatalf("log byte %d is %q, not the output's", i, b[i])
		}
	}
	mark := regexp.MustCompile(`^\n\[offstage: log cut at byte (\d+): (\d+) more bytes of output were not logged; writing failed: write \S+: file too large\]\n$`)
	m := mark.FindSubmatch(b[min(got.At, int64(len(b))):])
	if m == nil {
		t.Fatalf("the log does not end with the cut line after byte %d; it ends %q", got.At, b[max(0, len(b)-200):])
	}
	if string(m[1]) != strconv.FormatInt(got.At, 10) || string(m[2]) != strconv.FormatInt(got.LogCut, 10) {
		t.Errorf("cut line says byte %s and %s bytes, want %d and %d", m[1], m[2], got.At, got.LogCut)
	}
}

// logFullHelper runs a command printing total bytes with its log at path,
// under a file size limit, and prints a logFull.
func logFullHelper(args []string) int {
	limit, _ := strconv.ParseUint(args[0], 10, 64)
	total := args[2]
	// Without this the limit kills the process (SIGXFSZ) instead of
	// failing the write; the command inherits it, and writes to a pipe.
	signal.Ignore(syscall.SIGXFSZ)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var got logFull
	var calls atomic.Int32
	var told atomic.Value
	cfg := helperConfig("print", total)
	cfg.LogPath = args[1]
	cfg.OnLogError = func(err error) {
		calls.Add(1)
		told.Store(err.Error())
	}
	p, err := proc.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-p.Done()
	e, _ := p.Exit()
	got.Calls, got.LogCut, got.Bytes, got.Held = calls.Load(), e.LogCut, e.Bytes, p.Log().Held
	got.Err, _ = told.Load().(string)
	var le *proc.LogError
	if errors.As(e.LogErr, &le) {
		got.At, got.Reason = le.At, le.Reason()
	}
	got.Skipped = p.Read(proc.Combined, got.At+1, 100).Skipped
	json.NewEncoder(os.Stdout).Encode(got)
	return 0
}
