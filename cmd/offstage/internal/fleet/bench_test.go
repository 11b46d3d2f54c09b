package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// BenchmarkCancelLatencySQLite: from Cancel's call to SIGTERM reaching
// the task's process, with the owner on the same machine hearing of the
// request through its doorbell. ms-median is the median; ns/op includes
// each iteration's set-up (a process started, the journal flushed).
func BenchmarkCancelLatencySQLite(b *testing.B) {
	dir := b.TempDir()
	benchCancel(b, func() (*journal.DB, error) { return journal.OpenSQLite(filepath.Join(dir, "journal.db")) }, filepath.Join(dir, "run"))
}

// BenchmarkCancelLatencyPostgres: the same through a private PostgreSQL
// server: NOTIFY in the request's transaction, the owner LISTENing.
func BenchmarkCancelLatencyPostgres(b *testing.B) {
	url := pgtest.Start(b).NewDatabase(b)
	benchCancel(b, func() (*journal.DB, error) { return journal.OpenPostgres(context.Background(), url) }, "")
}

// benchCancel opens a session recorded into store, and each iteration
// starts a process in one of its tasks, cancels the task with Cancel
// (as offstage tasks cancel does, from another connection to the
// journal) and times until the process says SIGTERM reached it.
func benchCancel(b *testing.B, open func() (*journal.DB, error), bellDir string) {
	ctx := context.Background()
	store, err := open()
	if err != nil {
		b.Fatal(err)
	}
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{BellDir: bellDir})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close(ctx)
	s, err := agent.Open(ctx, agent.Config{}, agent.Surface{Name: "bench", Journal: rec})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	// The requester has a connection of its own, as another process does.
	other, err := open()
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	top := s.Table().View("")
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		started := make(chan *proc.Process, 1)
		id, err := top.Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, _ *task.Handle) (string, error) {
			p, err := proc.Start(ctx, proc.Config{Args: []string{os.Args[0]}, Env: append(os.Environ(), helperEnv+"=1"), Grace: time.Second})
			if err != nil {
				return "", err
			}
			started <- p
			p.Wait(context.Background())
			return "", context.Cause(ctx)
		})
		if err != nil {
			b.Fatal(err)
		}
		p := <-started
		ready, err := waitFor(ctx, p, 0, "ready\n")
		if err != nil {
			b.Fatal(err)
		}
		if err := rec.Flush(ctx); err != nil { // the task is running on record
			b.Fatal(err)
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() {
			_, err := Cancel(ctx, other, s.ID(), id, "bench", "")
			done <- err
		}()
		if _, err := waitFor(ctx, p, ready, "term\n"); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "ms-p90")
}

// waitFor waits until p's output from since holds want, and returns the
// offset past it: the signal's own output, not any output (a line of
// the runtime's, a warning) that comes first.
func waitFor(ctx context.Context, p *proc.Process, since int64, want string) (int64, error) {
	var seen []byte
	for next := since; ; {
		if _, err := p.WaitOutput(ctx, next); err != nil {
			return 0, err
		}
		ch := p.Read(proc.Combined, next, 0)
		seen = append(seen, ch.Data...)
		next = ch.Next
		if i := bytes.Index(seen, []byte(want)); i >= 0 {
			return since + int64(i+len(want)), nil
		}
		if _, done := p.Exit(); done && next >= p.Written() {
			return 0, fmt.Errorf("the process ended without saying %q: %q", want, seen)
		}
	}
}
