package journal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

func noop(context.Context, *task.Handle) (string, error) { return "ok", nil }

// BenchmarkSpawnDrainJournal is task's BenchmarkSpawnDrain with the
// table recording into a SQLite journal: what recording every record
// costs a task. The loop spawns far faster than SQLite writes, so once
// the queue is half full each spawn waits for the writer
// (Options.Backpressure): ns/op is then the store's pace, four records
// per task. At the end the writer is flushed, outside the timing;
// records/op (want 4: spawned, started, finished, delivered) and
// dropped/op (want 0) say whether every record was kept.
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
	rep := &reports{}
	j := journal.New(s, journal.Options{Report: rep.add})
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
	j.Close(context.Background())
	report(b, j, 1) // the session's start is not a task's
	for _, r := range rep.get() {
		b.Log("the journal reported: " + r)
	}
}

// report gives the records written and dropped per op, not counting
// extra records the benchmark wrote besides its ops.
func report(b *testing.B, j *journal.Journal, extra int) {
	st := j.Stats()
	b.ReportMetric(float64(int(st.Written)-extra)/float64(b.N), "records/op")
	b.ReportMetric(float64(st.Lost)/float64(b.N), "dropped/op")
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
			for !j.Add(&journal.TaskChange{Session: "bench", Change: task.Change{Event: task.Event{Type: typ, ID: id, Time: now, Kind: "shell"}, Label: "make test"}}) {
				time.Sleep(time.Millisecond) // the queue is full: let the writer catch up
			}
		}
	}
	j.Flush(context.Background())
	b.ReportMetric(float64(4*b.N)/time.Since(start).Seconds(), "records/s")
	_ = log
	j.Close(context.Background())
	report(b, j, 1)
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

// BenchmarkRecordAmongManySessions: what starting a session's record
// costs when 2,000 sessions have output logs: pruning them read every
// session's directory and the whole session list at each start (60 ms a
// session at 4,500, an outsider measured); it is done at most every
// minute now.
func BenchmarkRecordAmongManySessions(b *testing.B) {
	dir := b.TempDir()
	for i := range 2000 {
		d := filepath.Join(dir, "logs", fmt.Sprintf("20260101-%06d-aaaaaa", i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "shell-1.log"), []byte("x"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	store, err := journal.OpenSQLite(filepath.Join(dir, "journal.db"))
	if err != nil {
		b.Fatal(err)
	}
	rec, err := journal.NewRecorder(b.Context(), store, journal.RecorderOptions{LogDir: filepath.Join(dir, "logs")})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close(context.Background())
	i := 0
	for b.Loop() {
		i++
		var cfg agent.Config
		r, err := rec.Record(b.Context(), agent.SessionInfo{ID: fmt.Sprintf("20270101-%06d-bbbbbb", i), Surface: "acp"}, &cfg)
		if err != nil {
			b.Fatal(err)
		}
		r.End()
	}
}
