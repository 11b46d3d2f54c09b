package journal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

func noop(context.Context, *task.Handle) (string, error) { return "ok", nil }

// BenchmarkSpawnDrainJournal is task's BenchmarkSpawnDrain with the
// table recording into a SQLite journal: what recording costs a task. The
// writer runs behind; at the end it is flushed, outside the timing, and
// records the bounded queue had to drop are reported per task.
func BenchmarkSpawnDrainJournal(b *testing.B) {
	s, err := journal.OpenSQLite(filepath.Join(b.TempDir(), "journal.db"))
	if err != nil {
		b.Fatal(err)
	}
	benchSpawnDrain(b, s)
}

// BenchmarkSpawnDrainJournalPostgres: the same into PostgreSQL (a private
// server on this machine).
func BenchmarkSpawnDrainJournalPostgres(b *testing.B) {
	benchSpawnDrain(b, openPostgres(b))
}

func openPostgres(b *testing.B) *journal.DB {
	srv := pgtest.Start(b)
	s, err := journal.OpenPostgres(context.Background(), srv.NewDatabase(b))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchSpawnDrain(b *testing.B, s journal.Store) {
	b.ResetTimer() // setting up a server is not what is measured
	var drops atomic.Int64
	j := journal.New(s, journal.Options{Report: func(string) { drops.Add(1) }})
	log := j.StartSession(journal.Session{ID: "bench", Started: time.Now()}, 0)
	tb := task.New(b.Context(), task.Options{Recorder: log})
	top := tb.View("")
	ready := top.Ready()
	for b.Loop() {
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, noop); err != nil {
			b.Fatal(err)
		}
		<-ready
		if rs := top.Drain(); len(rs) != 1 {
			b.Fatalf("Drain() returned %d results, want 1", len(rs))
		}
	}
	b.StopTimer()
	tb.Close(context.Background())
	j.Flush(context.Background())
	written := j.Written()
	j.Close(context.Background())
	b.ReportMetric(float64(written)/float64(b.N), "records/op")
}

// BenchmarkJournalThroughput: task records written into SQLite per
// second, in the writer's batches (four records make one task's life).
func BenchmarkJournalThroughput(b *testing.B) {
	s, err := journal.OpenSQLite(filepath.Join(b.TempDir(), "journal.db"))
	if err != nil {
		b.Fatal(err)
	}
	benchThroughput(b, s)
}

// BenchmarkJournalThroughputPostgres: the same into PostgreSQL.
func BenchmarkJournalThroughputPostgres(b *testing.B) {
	benchThroughput(b, openPostgres(b))
}

func benchThroughput(b *testing.B, s journal.Store) {
	b.ResetTimer()
	j := journal.New(s, journal.Options{QueueRecords: 1 << 20})
	log := j.StartSession(journal.Session{ID: "bench", Started: time.Now()}, 0)
	now := time.Now()
	start := time.Now()
	for i := range b.N {
		id := fmt.Sprint("shell:", i)
		for _, typ := range []task.EventType{task.EventSpawned, task.EventStarted, task.EventFinished, task.EventDelivered} {
			for !j.Add(&journal.TaskChange{Session: "bench", Change: task.Change{Event: task.Event{Type: typ, ID: id, Time: now}, Kind: "shell", Label: "make test"}}) {
				time.Sleep(time.Millisecond) // the queue is full: let the writer catch up
			}
		}
	}
	j.Flush(context.Background())
	b.ReportMetric(float64(4*b.N)/time.Since(start).Seconds(), "records/s")
	_ = log
	j.Close(context.Background())
}

// discard is a store that writes nothing.
type discard struct{ journal.Store }

func (discard) Write(context.Context, []journal.Record) error { return nil }
func (discard) Close() error                                  { return nil }

// BenchmarkSpawnDrainRecorded: BenchmarkSpawnDrainJournal with a store
// that writes nothing: the cost recording puts on a task itself, without
// SQLite competing for the CPU.
func BenchmarkSpawnDrainRecorded(b *testing.B) {
	benchSpawnDrain(b, discard{})
}
