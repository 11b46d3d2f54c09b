package journal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// slowStore writes each batch in perBatch (of the bubble's fake time); it
// fails while failing is set, and blocks while stuck is open.
type slowStore struct {
	journal.Store
	perBatch time.Duration
	mu       sync.Mutex
	written  int
	failing  bool
	stuck    chan struct{}
}

func (s *slowStore) Write(ctx context.Context, batch []journal.Record) error {
	s.mu.Lock()
	failing, stuck := s.failing, s.stuck
	s.mu.Unlock()
	if stuck != nil {
		<-stuck
	}
	if failing {
		return errors.New("disk full")
	}
	time.Sleep(s.perBatch)
	s.mu.Lock()
	s.written += len(batch)
	s.mu.Unlock()
	return nil
}

func (s *slowStore) Close() error { return nil }

// burst spawns n no-op tasks into a table recording into j, one after
// another, draining each, and returns how long it took.
func burst(t *testing.T, j *journal.Journal, n int) time.Duration {
	log := j.StartSession(journal.Session{ID: "s", Started: time.Now()}, 0)
	tb := task.New(t.Context(), task.Options{Recorder: log})
	defer tb.Close(context.Background())
	top := tb.View("")
	ready := top.Ready()
	start := time.Now()
	for range n {
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, noop); err != nil {
			t.Fatal(err)
		}
		<-ready
		top.Drain()
	}
	return time.Since(start)
}

// TestABurstOfSpawnsKeepsEveryRecord pins issue 19 item 9: a table
// spawning faster than the store writes filled the queue, and most
// records were dropped (0.6 of a task's 4 in BenchmarkSpawnDrainJournal).
// Now the spawns wait for the writer: every record is written, and the
// burst takes the store's time.
func TestABurstOfSpawnsKeepsEveryRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{perBatch: 10 * time.Millisecond}
		rep := &reports{}
		j := journal.New(st, journal.Options{QueueRecords: 64, BatchRecords: 16, Report: rep.add})
		const tasks = 500
		took := burst(t, j, tasks)
		if err := j.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := j.Stats(); s.Lost != 0 || s.Written != 4*tasks+1 || st.written != 4*tasks+1 {
			t.Errorf("Stats() = %+v, store wrote %d; want all %d records written, none lost", s, st.written, 4*tasks+1)
		}
		if got := rep.get(); len(got) != 0 {
			t.Errorf("reports = %q, want none", got)
		}
		// 2001 records in batches of 16 at 10ms each: about 1.25s, most of
		// it spent waiting by the spawns.
		if took < time.Second {
			t.Errorf("the burst took %v: it did not wait for the store", took)
		}
	})
}

// TestAStuckStoreCostsOneWait: a store that takes no batch makes one
// spawn wait Options.Backpressure; then it is reported, and spawns drop
// their records at once (counted) until the store writes again.
func TestAStuckStoreCostsOneWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make(chan struct{})
		st := &slowStore{stuck: stuck}
		rep := &reports{}
		j := journal.New(st, journal.Options{QueueRecords: 64, BatchRecords: 16, Backpressure: 300 * time.Millisecond, Report: rep.add})
		took := burst(t, j, 100)
		if took != 300*time.Millisecond {
			t.Errorf("100 spawns into a stuck store took %v, want one wait of 300ms", took)
		}
		got := strings.Join(rep.get(), "\n")
		if !strings.Contains(got, "has not taken a batch for 300ms") {
			t.Errorf("reports %q do not say the store is stuck", got)
		}
		lost := j.Stats().Lost
		if lost == 0 {
			t.Error("Stats().Lost = 0, want the dropped records counted")
		}
		st.mu.Lock()
		st.stuck = nil
		st.mu.Unlock()
		close(stuck)
		synctest.Wait()
		burst(t, j, 10)
		if err := j.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := j.Stats(); s.Lost != lost {
			t.Errorf("Stats().Lost = %d after the store came back, want still %d", s.Lost, lost)
		}
		if got := strings.Join(rep.get(), "\n"); !strings.Contains(got, "writes again") {
			t.Errorf("reports %q do not say the journal writes again", got)
		}
	})
}

// TestAFailingStoreIsNotWaitedFor: while writes fail, spawns do not wait
// (the session goes on at its own pace); what does not fit is dropped and
// counted.
func TestAFailingStoreIsNotWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{failing: true}
		j := journal.New(st, journal.Options{QueueRecords: 64, BatchRecords: 16})
		j.Add(journal.SessionEnd{Session: "first"})
		synctest.Wait() // the writer tried, and failed
		if took := burst(t, j, 100); took != 0 {
			t.Errorf("100 spawns took %v while the store was failing, want no wait", took)
		}
		if s := j.Stats(); s.Lost != 4*100+2-64 {
			t.Errorf("Stats().Lost = %d, want %d (a queue of 64 holds the rest)", s.Lost, 4*100+2-64)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		j.Close(ctx)
	})
}

// A spawn that waits for the writer waits alone: the table's other
// callers are answered meanwhile (the wait is outside the table's lock).
func TestASpawnWaitingForTheWriterDoesNotStallTheTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make(chan struct{})
		st := &slowStore{stuck: stuck}
		j := journal.New(st, journal.Options{QueueRecords: 8, BatchRecords: 2, Backpressure: time.Second})
		log := j.StartSession(journal.Session{ID: "s", Started: time.Now()}, 0)
		tb := task.New(t.Context(), task.Options{Recorder: log})
		top := tb.View("")
		release := sync.OnceFunc(func() {
			st.mu.Lock()
			st.stuck = nil
			st.mu.Unlock()
			close(stuck)
		})
		defer release()
		// The session's start and a task's spawned, started and finished
		// fill half the queue.
		if _, err := top.Spawn(task.Spec{Kind: "shell"}, noop); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		spawned := make(chan struct{})
		go func() {
			defer close(spawned)
			top.Spawn(task.Spec{Kind: "shell"}, noop)
		}()
		synctest.Wait() // the spawn now waits for room
		select {
		case <-spawned:
			t.Fatal("the spawn did not wait for the writer")
		default:
		}
		asked := time.Now()
		if n := len(top.List()); n != 1 { // answered while the spawn waits
			t.Errorf("List() = %d tasks while the spawn waits, want 1", n)
		}
		if took := time.Since(asked); took != 0 {
			t.Errorf("List() took %v while a spawn waited for the writer, want at once", took)
		}
		release()
		<-spawned
		tb.Close(context.Background())
		if err := j.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// Stats says how many records wait and how many writes failed, for
// /metrics: a failing store shows its retries and its backlog.
func TestStatsCountQueueAndWriteErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowStore{failing: true}
		j := journal.New(st, journal.Options{QueueRecords: 64, BatchRecords: 16})
		for i := range 5 {
			j.Add(journal.SessionEnd{Session: fmt.Sprint(i)})
		}
		synctest.Wait() // the first write failed; the writer waits 100ms to retry
		time.Sleep(150 * time.Millisecond)
		synctest.Wait() // and the retry failed too
		if s := j.Stats(); s.Queued != 5 || s.WriteErrors != 2 {
			t.Errorf("Stats() = %+v, want 5 queued and 2 write errors", s)
		}
		st.mu.Lock()
		st.failing = false
		st.mu.Unlock()
		if err := j.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s := j.Stats(); s.Queued != 0 || s.WriteErrors != 2 || s.Written != 5 {
			t.Errorf("Stats() = %+v after the store came back, want 0 queued, 5 written, still 2 errors", s)
		}
		j.Close(context.Background())
	})
}
