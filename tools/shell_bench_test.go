package tools_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// captureBytes is what each benchmark's child prints, as in proc's
// benchmarks.
const captureBytes = 256 << 20

// helperEnv marks the test binary re-executed as a child (TestMain).
const helperEnv = "OFFSTAGE_TOOLS_HELPER"

// printHelper is the child behind printConfig: it prints n bytes to
// stdout, fast, in lines of 64 KiB.
func printHelper(n int64) int {
	buf := []byte(strings.Repeat("0123456789abcdef", 4096))
	buf[len(buf)-1] = '\n'
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := os.Stdout.Write(buf[:k]); err != nil {
			return 1
		}
		n -= k
	}
	return 0
}

// printConfig runs the test binary as a child that prints n bytes.
func printConfig(n int64) proc.Config {
	cmd := "exec '" + strings.ReplaceAll(os.Args[0], "'", `'\''`) + "'"
	return proc.Config{Command: cmd, Env: append(os.Environ(), helperEnv+"="+strconv.FormatInt(n, 10))}
}

// reportExamined reports which share of the output a watch looked at.
func reportExamined(b *testing.B, skipped int64) {
	total := float64(b.N) * captureBytes
	examined := total - float64(skipped)
	b.ReportMetric(examined/total, "examined/op")
	b.ReportMetric(examined/1e6/b.Elapsed().Seconds(), "examined-MB/s")
}

// benchNotifyOn runs the child's output through a shell task whose
// notify_on watch (ShellOptions.NotifyOn) looks for a line that never
// comes; with a log directory the watch reads back from its log.
func benchNotifyOn(b *testing.B, logDir string) {
	b.SetBytes(captureBytes)
	tb := task.New(context.Background(), task.Options{})
	defer tb.Close(context.Background())
	v := tb.View("")
	opts := tools.ShellOptions{NotifyOn: regexp.MustCompile(`ERROR|panic:`), LogDir: logDir}
	cfg := printConfig(captureBytes)
	cfg.LogMaxBytes = captureBytes
	blind := regexp.MustCompile(`^The watch of \S+ for "ERROR\|panic:" could not look at (?:a further )?(\d+) bytes of its output`)
	var skipped int64
	for b.Loop() {
		id, _, err := tools.SpawnShell(v, cfg, opts)
		if err != nil {
			b.Fatal(err)
		}
		done, _ := v.Done(id)
		<-done
		if r := v.Drain(); len(r) != 1 || r[0].State != task.Completed {
			b.Fatalf("results %+v", r)
		}
		// The watch says what it skipped (and it matched nothing): the
		// notices are how much it examined.
		for _, n := range v.Notices() {
			m := blind.FindStringSubmatch(n.Text)
			if m == nil {
				b.Fatalf("notice %q, want only what the watch skipped", n.Text)
			}
			k, _ := strconv.ParseInt(m[1], 10, 64)
			skipped += k
		}
	}
	if logDir != "" && skipped != 0 {
		b.Fatalf("the watch skipped %d bytes with a log that holds them all", skipped)
	}
	reportExamined(b, skipped)
}

// BenchmarkCaptureNotifyOn: proc's BenchmarkCapture through a shell task
// whose output carries a notify_on watch, through the ring only.
func BenchmarkCaptureNotifyOn(b *testing.B) { benchNotifyOn(b, "") }

// BenchmarkCaptureNotifyOnLog: the same with the shell's log, so the
// watch examines every byte.
func BenchmarkCaptureNotifyOnLog(b *testing.B) { benchNotifyOn(b, b.TempDir()) }
