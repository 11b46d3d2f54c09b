package journal_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

const helperEnv = "OFFSTAGE_JOURNAL_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper(os.Args[1:]))
	}
	code := m.Run()
	if pg != nil {
		pg.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// A backend makes a fresh journal and connects to it (as often as a test
// wants: each connection is another process's view of the same journal).
type backend struct {
	name  string
	fresh func(t *testing.T) (connect func(t *testing.T) *journal.DB)
}

var (
	pgOnce sync.Once
	pg     *pgtest.Server
	pgErr  error
)

// backends are the journals the behaviour suite runs against: SQLite,
// and PostgreSQL on a private server (one for the package, a database
// per test).
var backends = []backend{
	{"sqlite", func(t *testing.T) func(*testing.T) *journal.DB {
		path := filepath.Join(t.TempDir(), "journal.db")
		return func(t *testing.T) *journal.DB { return open(t, path) }
	}},
	{"postgres", func(t *testing.T) func(*testing.T) *journal.DB {
		pgOnce.Do(func() { pg, pgErr = pgtest.Run() })
		if errors.Is(pgErr, pgtest.ErrNoPostgres) && os.Getenv(pgtest.RequireEnv) == "" {
			t.Skipf("skipping: %v; apt-get install postgresql runs these tests", pgErr)
		}
		if pgErr != nil {
			t.Fatal(pgErr)
		}
		url := pg.NewDatabase(t)
		return func(t *testing.T) *journal.DB {
			s, err := journal.OpenPostgres(t.Context(), url)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}},
}

// suite runs a behaviour test against every backend.
func suite(t *testing.T, test func(t *testing.T, connect func(*testing.T) *journal.DB)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.fresh(t)) })
	}
}

func open(t *testing.T, path string) *journal.DB {
	t.Helper()
	s, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newJournal(t *testing.T, s journal.Store, opts journal.Options) *journal.Journal {
	t.Helper()
	j := journal.New(s, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		j.Close(ctx)
	})
	return j
}

func flush(t *testing.T, j *journal.Journal) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// recordedTable starts session sess (its host this one's) in a journal
// on s, and a task table that records into it.
func recordedTable(t *testing.T, s journal.Store, sess journal.Session) (*journal.Journal, *journal.SessionLog, *task.Table) {
	t.Helper()
	j := newJournal(t, s, journal.Options{})
	host := journal.ThisHost("test")
	j.Add(&host)
	sess.HostID = host.ID
	log := j.StartSession(sess, 0)
	return j, log, task.New(t.Context(), task.Options{Recorder: log})
}

// TestATableIsRecorded: a real task table recording into a session log:
// the tasks, their state changes, results and delivery, and the
// conversation, read back.
func TestATableIsRecorded(t *testing.T) { suite(t, testATableIsRecorded) }

func testATableIsRecorded(t *testing.T, connect func(*testing.T) *journal.DB) {
	s := connect(t)
	j, log, tb := recordedTable(t, s, journal.Session{ID: "s1", Surface: "run", Cwd: "/src", Model: "scripted", Started: time.Now()})
	top := tb.View("")
	ok, _ := top.Spawn(task.Spec{Kind: "shell", Label: "make"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.SetExitCode(0)
		return "built", nil
	})
	bad, _ := top.Spawn(task.Spec{Kind: "shell", Label: "make test"}, func(ctx context.Context, h *task.Handle) (string, error) {
		h.SetExitCode(2)
		return "3 failed", errors.New("exit status 2")
	})
	for _, id := range []string{ok, bad} {
		done, _ := top.Done(id)
		<-done
	}
	top.Wait(t.Context(), []string{ok}, task.All) // delivers ok; bad stays undelivered
	log.Process(bad, 4242, 99, "/logs/shell-2.log")
	log.Usage(bad, 1500*time.Millisecond, 64<<20)
	log.Message([]byte(`{"role":"user"}`))
	log.Message([]byte(`{"role":"assistant"}`))
	log.End()
	tb.Close(t.Context())
	flush(t, j)
	j.Close(t.Context())
	s = connect(t)
	defer s.Close()

	tasks, err := s.Tasks(t.Context(), journal.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || tasks[0].ID != bad || tasks[1].ID != ok {
		t.Fatalf("tasks = %+v, want both, newest first", tasks)
	}
	b := tasks[0]
	if b.State != "failed" || b.Result != "3 failed" || b.Error != "exit status 2" || b.ExitCode == nil || *b.ExitCode != 2 || b.Delivered || b.LogPath != "/logs/shell-2.log" || b.PID != 4242 || b.Started.IsZero() || b.Finished.IsZero() {
		t.Errorf("failed task = %+v", b)
	}
	if b.CPU != 1500*time.Millisecond || b.MemoryPeak != 64<<20 {
		t.Errorf("failed task's usage: CPU %v, MemoryPeak %d; want 1.5s, 64 MiB", b.CPU, b.MemoryPeak)
	}
	if o := tasks[1]; o.CPU != 0 || o.MemoryPeak != 0 {
		t.Errorf("a task without usage recorded shows CPU %v, MemoryPeak %d", o.CPU, o.MemoryPeak)
	}
	if o := tasks[1]; o.State != "completed" || !o.Delivered || o.Label != "make" {
		t.Errorf("completed task = %+v", o)
	}
	// Who ended each (issue 38): both by themselves, with the reason in
	// words.
	if o := tasks[1]; o.EndedBy != task.BySelf || o.EndReason != "it exited with status 0" {
		t.Errorf("completed task ended by %q (%q), want self (it exited with status 0)", o.EndedBy, o.EndReason)
	}
	if b.EndedBy != task.BySelf || b.EndReason != "it failed: exit status 2" {
		t.Errorf("failed task ended by %q (%q), want self (it failed: exit status 2)", b.EndedBy, b.EndReason)
	}
	if got, _ := s.Tasks(t.Context(), journal.TaskFilter{State: "failed"}); len(got) != 1 {
		t.Errorf("filter by state: %+v", got)
	}
	if got, _ := s.Tasks(t.Context(), journal.TaskFilter{Since: time.Now().Add(time.Hour)}); len(got) != 0 {
		t.Errorf("filter by time: %+v", got)
	}
	sess, err := s.Session(t.Context(), "s")
	if err != nil || sess.Tasks != 2 || sess.Ended.IsZero() || sess.Model != "scripted" {
		t.Errorf("Session(prefix) = %+v, %v", sess, err)
	}
	hist, _ := s.History(t.Context(), "s1")
	if len(hist) != 2 || string(hist[1].Body) != `{"role":"assistant"}` || hist[1].Seq != 2 {
		t.Errorf("history = %+v", hist)
	}
	if first, err := s.FirstMessage(t.Context(), "s1"); err != nil || string(first.Body) != `{"role":"user"}` {
		t.Errorf("FirstMessage = %+v, %v", first, err)
	}
	if n, err := s.LastSeq(t.Context(), "s1"); n != 2 || err != nil {
		t.Errorf("LastSeq = %d, %v", n, err)
	}
	if n, err := s.LastSeq(t.Context(), "none"); n != 0 || err != nil {
		t.Errorf("LastSeq of a session without messages = %d, %v", n, err)
	}
	if _, err := s.FirstMessage(t.Context(), "none"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("FirstMessage of a session without messages = %v", err)
	}
	if _, err := s.Task(t.Context(), "s1", "shell:9"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Task(missing) = %v", err)
	}
}

// failing is a store whose writes fail while broken is set.
type failing struct {
	journal.Store
	mu       sync.Mutex
	broken   bool
	written  int
	attempts int // writes asked for
}

func (f *failing) Write(ctx context.Context, batch []journal.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.broken {
		return errors.New("disk full")
	}
	f.written += len(batch)
	return nil
}

func (f *failing) Close() error { return nil }

func (f *failing) set(broken bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken = broken
}

type reports struct {
	mu  sync.Mutex
	all []string
}

func (r *reports) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
}

func (r *reports) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.all...)
}

// The writer's retries run on a fake clock (synctest): with a real one,
// a fixed sleep meant for "some retries" saw none on a busy machine.
func TestAFailingStoreIsReportedOnceRetriedAndCaughtUp(t *testing.T) {
	synctest.Test(t, testAFailingStoreIsReportedOnceRetriedAndCaughtUp)
}

func testAFailingStoreIsReportedOnceRetriedAndCaughtUp(t *testing.T) {
	f := &failing{broken: true}
	rep := &reports{}
	j := journal.New(f, journal.Options{QueueRecords: 10, Report: rep.add})
	for i := range 15 {
		j.Add(journal.SessionEnd{Session: fmt.Sprint(i)})
	}
	time.Sleep(time.Second) // fake time: the writer tries, then retries with backoff
	synctest.Wait()
	f.mu.Lock()
	attempts := f.attempts
	f.mu.Unlock()
	if attempts < 3 {
		t.Fatalf("%d writes in a second of a broken store, want the first and retries", attempts)
	}
	f.set(false)
	flush(t, j)
	got := rep.get()
	if len(got) != 3 {
		t.Fatalf("reports = %q, want one for the failure, one for the drops, one for the recovery", got)
	}
	joined := strings.Join(got, "\n")
	for _, w := range []string{"cannot write (disk full)", "dropping new records", "writes again; 5 records were dropped"} {
		if !strings.Contains(joined, w) {
			t.Errorf("reports %q do not say %q", got, w)
		}
	}
	if f.written != 10 {
		t.Errorf("%d records written, want the 10 the queue held", f.written)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := j.Close(ctx); err != nil {
		t.Error(err)
	}
}

func TestCloseGivesUpWhenItsContextEnds(t *testing.T) {
	f := &failing{broken: true}
	rep := &reports{}
	j := journal.New(f, journal.Options{Report: rep.add})
	j.Add(journal.SessionEnd{Session: "s"})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	j.Close(ctx)
	if got := strings.Join(rep.get(), "\n"); !strings.Contains(got, "closed with 1 records it could not write") {
		t.Errorf("reports %q", got)
	}
}

// Issue 19: a record that arrives once Close began is refused, and the
// report says the journal is closing, not that it is "behind".
func TestARecordAfterCloseIsNotReportedAsBehind(t *testing.T) {
	rep := &reports{}
	j := journal.New(&failing{}, journal.Options{Report: rep.add})
	if err := j.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if j.Add(journal.SessionEnd{Session: "late"}) {
		t.Error("Add after Close = true, want false")
	}
	got := strings.Join(rep.get(), "\n")
	if !strings.Contains(got, "the journal is closing") || strings.Contains(got, "behind") {
		t.Errorf("reports %q, want one that says the journal is closing", got)
	}
}

func TestMigratesAnOlderSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	v1Journal(t, path)
	s := open(t, path)
	defer s.Close()
	tasks, err := s.Tasks(t.Context(), journal.TaskFilter{})
	if err != nil || len(tasks) != 1 || tasks[0].Result != "exit status 0 after 30s" || tasks[0].Hostname != "old-machine" {
		t.Fatalf("tasks after migration = %+v, %v", tasks, err)
	}
	var v int
	db := rawSQLite(t, path)
	defer db.Close()
	db.QueryRow("PRAGMA user_version").Scan(&v)
	if v != journal.SchemaVersion {
		t.Errorf("user_version = %d, want %d", v, journal.SchemaVersion)
	}
	if _, err := db.Exec("SELECT event FROM task_events"); err != nil {
		t.Errorf("the version 2 table is missing: %v", err)
	}
}

func TestBadDatabasesAreClearErrors(t *testing.T) {
	dir := t.TempDir()
	newer := filepath.Join(dir, "newer.db")
	db := rawSQLite(t, newer)
	db.Exec("PRAGMA user_version = 99")
	db.Close()
	if _, err := journal.OpenSQLite(newer); err == nil || !strings.Contains(err.Error(), newer) || !strings.Contains(err.Error(), "schema version 99, newer than this offstage understands") {
		t.Errorf("newer schema: %v", err)
	}
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("this is not a database\n", 400)), 0o600)
	if _, err := journal.OpenSQLite(junk); err == nil || !strings.Contains(err.Error(), junk) || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("damaged file: %v", err)
	}
}

// TestTwoHostsOnOneJournal: two stores on one file, writing at once, as
// two offstage processes would: nothing is lost.
func TestTwoHostsOnOneJournal(t *testing.T) { suite(t, testTwoHostsOnOneJournal) }

func testTwoHostsOnOneJournal(t *testing.T, connect func(*testing.T) *journal.DB) {
	var wg sync.WaitGroup
	for h := range 2 {
		wg.Go(func() {
			s := connect(t)
			j := journal.New(s, journal.Options{BatchRecords: 7, Report: func(m string) { t.Errorf("host %d: %s", h, m) }})
			log := j.StartSession(journal.Session{ID: fmt.Sprint("s", h), HostID: fmt.Sprint("h", h), Started: time.Now()}, 0)
			for i := range 300 {
				log.Message([]byte(fmt.Sprint(i)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			j.Close(ctx)
		})
	}
	wg.Wait()
	s := connect(t)
	defer s.Close()
	for h := range 2 {
		if hist, err := s.History(t.Context(), fmt.Sprint("s", h)); err != nil || len(hist) != 300 {
			t.Errorf("session %d: %d messages, %v", h, len(hist), err)
		}
	}
}

// TestRecoverOrphansTheTasksOfADeadHost: a host that died with a task
// running: the task becomes orphaned once, its process group is killed,
// and a process whose pid was recorded with another start time (a reused
// pid) survives.
func TestRecoverOrphansTheTasksOfADeadHost(t *testing.T) { suite(t, testRecoverOrphans) }

func testRecoverOrphans(t *testing.T, connect func(*testing.T) *journal.DB) {
	j := newJournal(t, connect(t), journal.Options{})
	dead := exec.Command("true")
	dead.Run()
	name, _ := os.Hostname()
	host := journal.Host{ID: "dead", Hostname: name, PID: dead.Process.Pid, Start: 1, Started: time.Now()}
	j.Add(&host)
	log := j.StartSession(journal.Session{ID: "s1", HostID: "dead", Started: time.Now()}, 0)
	tb := task.New(t.Context(), task.Options{Recorder: log})
	release := make(chan struct{})
	for range 2 {
		tb.View("").Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, h *task.Handle) (string, error) {
			<-release
			return "", nil
		})
	}
	ours := exec.Command("sleep", "60")
	ours.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ours.Env = append(os.Environ(), offstageMark) // as proc marks its commands
	reused := exec.Command("sleep", "60")
	for _, c := range []*exec.Cmd{ours, reused} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer reused.Process.Kill()
	start, _ := journal.ProcessStart(ours.Process.Pid)
	log.Process("shell:1", ours.Process.Pid, start, "")
	log.Process("shell:2", reused.Process.Pid, start+12345, "") // the pid now names another process
	flush(t, j)
	j.Close(t.Context()) // the host "dies": the table's end is never recorded
	close(release)
	tb.Close(t.Context())
	s := connect(t)
	defer s.Close()

	self := journal.ThisHost("test")
	got, err := journal.Recover(t.Context(), s, self)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 2 || got.Killed != 1 {
		t.Fatalf("Recover = %+v, want 2 tasks orphaned and 1 process killed", got)
	}
	if err := ours.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("our process: %v, want killed", err)
	}
	if err := reused.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process with the reused pid was hit: %v", err)
	}
	tasks, _ := s.Tasks(t.Context(), journal.TaskFilter{State: journal.Orphaned})
	if len(tasks) != 2 {
		t.Errorf("orphaned tasks = %+v", tasks)
	}
	for _, o := range tasks {
		if o.EndedBy != task.ByHost || !strings.Contains(o.EndReason, fmt.Sprintf("its host died: offstage pid %d", dead.Process.Pid)) {
			t.Errorf("orphaned %s ended by %q (%q), want host, naming the dead pid", o.ID, o.EndedBy, o.EndReason)
		}
	}
	if again, _ := journal.Recover(t.Context(), s, self); len(again.Tasks) != 0 {
		t.Errorf("a second Recover = %+v, want nothing: once only", again)
	}
	if sess, _ := s.Session(t.Context(), "s1"); sess.Ended.IsZero() {
		t.Error("the dead host's session is still open")
	}
}

// offstageMark is a mark as package proc gives each command (its magic
// 0x5eed in the top 16 bits).
const offstageMark = "OFFSTAGE_MARK=6840123409045651457"

// TestRecoverKillsOnlyWhatOffstageStarted pins issue 34's first item: a
// journal record of an unfinished task once made recovery run
// kill(-PID, SIGKILL) for any pid whose start time it named, pid 1
// (kill(-1): every process the caller may signal) or a group of the
// user's that offstage never started. Such records are orphaned, and
// their processes left alone.
func TestRecoverKillsOnlyWhatOffstageStarted(t *testing.T) {
	suite(t, testRecoverKillsOnlyOurs)
}

func testRecoverKillsOnlyOurs(t *testing.T, connect func(*testing.T) *journal.DB) {
	j := newJournal(t, connect(t), journal.Options{})
	dead := exec.Command("true")
	dead.Run()
	name, _ := os.Hostname()
	host := journal.Host{ID: "dead", Hostname: name, PID: dead.Process.Pid, Start: 1, Started: time.Now()}
	j.Add(&host)
	log := j.StartSession(journal.Session{ID: "s1", HostID: "dead", Started: time.Now()}, 0)
	tb := task.New(t.Context(), task.Options{Recorder: log})
	release := make(chan struct{})
	for range 4 {
		tb.View("").Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, h *task.Handle) (string, error) {
			<-release
			return "", nil
		})
	}
	// Not offstage's: a group of ours without a mark, and one whose mark
	// is not offstage's (the wrong magic).
	unmarked := exec.Command("sleep", "60")
	unmarked.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	foreign := exec.Command("sleep", "60")
	foreign.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	foreign.Env = append(os.Environ(), "OFFSTAGE_MARK=12345")
	for _, c := range []*exec.Cmd{unmarked, foreign} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Wait()
		defer c.Process.Kill()
	}
	initStart, err := journal.ProcessStart(1)
	if err != nil {
		t.Fatal(err)
	}
	selfStart, _ := journal.ProcessStart(os.Getpid())
	log.Process("shell:1", 1, initStart, "")
	log.Process("shell:2", unmarked.Process.Pid, mustStart(t, unmarked.Process.Pid), "")
	log.Process("shell:3", foreign.Process.Pid, mustStart(t, foreign.Process.Pid), "")
	log.Process("shell:4", os.Getpid(), selfStart, "") // this test's own group
	flush(t, j)
	j.Close(t.Context())
	close(release)
	tb.Close(t.Context())
	s := connect(t)
	defer s.Close()

	got, err := journal.Recover(t.Context(), s, journal.ThisHost("test"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 4 || got.Killed != 0 {
		t.Errorf("Recover = %d tasks orphaned, %d groups killed; want 4 and 0", len(got.Tasks), got.Killed)
	}
	for _, c := range []*exec.Cmd{unmarked, foreign} {
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%v (pid %d) was hit: %v", c.Args, c.Process.Pid, err)
		}
	}
	tasks, _ := s.Tasks(t.Context(), journal.TaskFilter{State: journal.Orphaned})
	if len(tasks) != 4 {
		t.Errorf("orphaned tasks = %d, want 4", len(tasks))
	}
}

// rawSQLite opens path as a second connection beside a journal's, for a
// test that edits the database behind its back. It waits for the
// journal's writes as the journal waits for others' (busy_timeout):
// without it, a statement that meets the journal's write lock fails at
// once with SQLITE_BUSY, 1 time in 40 beside busy processes (issue 34).
func rawSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func mustStart(t *testing.T, pid int) int64 {
	t.Helper()
	start, err := journal.ProcessStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	return start
}

// TestAFullDiskKeepsTheSessionGoing: a process whose file size is
// limited (RLIMIT_FSIZE) writes past it: the journal reports the failure
// once and the process goes on.
func TestAFullDiskKeepsTheSessionGoing(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "full-disk", filepath.Join(dir, "journal.db"))
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	text := string(out)
	if n := strings.Count(text, "report: the journal cannot write"); n != 1 {
		t.Errorf("%d failure reports, want 1:\n%s", n, text)
	}
	if !strings.Contains(text, "session went on: 2000 turns") {
		t.Errorf("the session did not go on:\n%s", text)
	}
}

// TestAForeignReaderLeavesTheWALAlone: a plain SQLite reader of
// another process (the sqlite3 shell, a script) that opens the journal
// and closes it while offstage writes it leaves the -wal file in place,
// and what offstage writes after is there for every reader. Offstage read
// its file's header through a descriptor of its own and closed it, which
// dropped its SQLite locks: the foreign reader took itself for the last,
// checkpointed and deleted the -wal file, and every record after went into
// an unlinked file (an outsider's finding).
func TestAForeignReaderLeavesTheWALAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := journal.New(s, journal.Options{})
	defer j.Close(context.Background())
	locked := func() {
		t.Helper()
		cmd := exec.Command(os.Args[0], "shared-lock", path)
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "held" {
			t.Fatalf("SQLite's shared lock on the journal, seen from another process: %s (%v); want it held while offstage has the journal open", out, err)
		}
	}
	sessions := func(want int) {
		t.Helper()
		locked()
		cmd := exec.Command(os.Args[0], "foreign-read", path)
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the foreign reader: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != fmt.Sprint(want) {
			t.Errorf("a foreign reader counts %s sessions, want %d", got, want)
		}
	}
	for i := range 3 {
		j.StartSession(journal.Session{ID: fmt.Sprint("s", i), Started: time.Now()}, 0)
		if err := j.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		sessions(i + 1)
		if _, err := os.Stat(path + "-wal"); err != nil {
			t.Fatalf("after a foreign reader closed: %v (the -wal file offstage writes was deleted)", err)
		}
	}
	// Nor does this process drop its own locks by opening the journal
	// again and closing it (offstage dashboard does, per stop request).
	for _, open := range []func(string) (*journal.DB, error){journal.OpenSQLite, journal.OpenSQLiteReadOnly} {
		again, err := open(path)
		if err != nil {
			t.Fatal(err)
		}
		again.Close()
		locked()
	}
}

func helper(args []string) int {
	switch args[0] {
	case "shared-lock": // whether a process holds SQLite's SHARED lock on the file
		f, err := os.Open(args[1])
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer f.Close()
		// SQLite's unix locking: SHARED is a read lock on 510 bytes from
		// 1 GiB + 2; a write lock there conflicts with any reader's.
		l := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 1<<30 + 2, Len: 510}
		if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &l); err != nil {
			fmt.Println(err)
			return 1
		}
		if l.Type == syscall.F_UNLCK {
			fmt.Println("not held")
			return 0
		}
		fmt.Println("held")
		return 0
	case "foreign-read": // as the sqlite3 shell would: open, read, close
		db, err := sql.Open("sqlite", "file:"+args[1])
		if err != nil {
			fmt.Println(err)
			return 1
		}
		var n int
		if err := db.QueryRow("SELECT count(*) FROM sessions").Scan(&n); err != nil {
			fmt.Println(err)
			return 1
		}
		if err := db.Close(); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println(n)
		return 0
	case "umask0-open":
		return umask0Open(args[1])
	case "full-disk":
		s, err := journal.OpenSQLite(args[1])
		if err != nil {
			fmt.Println(err)
			return 1
		}
		signalIgnoreXFSZ()
		lim := syscall.Rlimit{Cur: 256 << 10, Max: 256 << 10}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Println(err)
			return 1
		}
		j := journal.New(s, journal.Options{Report: func(m string) { fmt.Println("report: " + m) }})
		log := j.StartSession(journal.Session{ID: "s", Started: time.Now()}, 0)
		body := []byte(strings.Repeat("x", 1024))
		turns := 0
		for range 2000 {
			log.Message(body)
			turns++
		}
		time.Sleep(500 * time.Millisecond)
		fmt.Printf("session went on: %d turns\n", turns)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		j.Close(ctx)
		return 0
	}
	return 2
}

// TestExpiredLeasesAreOrphanedOnce: a host whose lease ran out has its
// tasks orphaned by exactly one of many hosts racing to do it; a live
// lease is left alone; a renewal after that says the host was taken for
// gone.
func TestExpiredLeasesAreOrphanedOnce(t *testing.T) { suite(t, testExpiredLeases) }

func testExpiredLeases(t *testing.T, connect func(*testing.T) *journal.DB) {
	s := connect(t)
	j := newJournal(t, s, journal.Options{})
	now := time.Now()
	for i, lease := range []time.Duration{-time.Second, time.Hour} { // one expired, one live
		id := fmt.Sprint("host", i)
		j.Add(&journal.Host{ID: id, Hostname: "elsewhere", PID: 1, Start: 1, Started: now, Lease: now.Add(lease)})
		log := j.StartSession(journal.Session{ID: fmt.Sprint("s", i), HostID: id, Started: now}, 0)
		for k := range 20 {
			log.Record(&task.Change{Event: task.Event{Type: task.EventSpawned, ID: fmt.Sprint("shell:", k), State: task.Running, Time: now, Kind: "shell"}})
		}
	}
	flush(t, j)
	var wg sync.WaitGroup
	counts := make(chan int, 8)
	for range 8 {
		wg.Go(func() {
			c := connect(t)
			defer c.Close()
			_, tasks, err := c.OrphanExpired(context.Background(), time.Now())
			if err != nil {
				t.Error(err)
			}
			counts <- len(tasks)
		})
	}
	wg.Wait()
	close(counts)
	total, winners := 0, 0
	for n := range counts {
		total += n
		if n > 0 {
			winners++
		}
	}
	if total != 20 || winners != 1 {
		t.Errorf("%d tasks orphaned by %d hosts, want 20 by exactly 1", total, winners)
	}
	if orphaned, _ := s.Tasks(t.Context(), journal.TaskFilter{State: journal.Orphaned}); len(orphaned) != 20 || orphaned[0].Session != "s0" {
		t.Errorf("orphaned = %d tasks, want the expired host's 20", len(orphaned))
	}
	if ok, err := s.Renew(t.Context(), "host0", time.Now().Add(time.Minute)); ok || err != nil {
		t.Errorf("Renew of an orphaned host = %v, %v; want false", ok, err)
	}
	if ok, err := s.Renew(t.Context(), "host1", time.Now().Add(time.Minute)); !ok || err != nil {
		t.Errorf("Renew of a live host = %v, %v; want true", ok, err)
	}
	if ok, err := s.Renew(t.Context(), "not-yet-recorded", time.Now()); !ok || err != nil {
		t.Errorf("Renew of a host whose record is still queued = %v, %v; want true", ok, err)
	}
}

// TestARetriedBatchWritesNothingTwice: a batch written again (its commit
// was lost on the way back) leaves the journal as once.
func TestARetriedBatchWritesNothingTwice(t *testing.T) { suite(t, testRetriedBatch) }

func testRetriedBatch(t *testing.T, connect func(*testing.T) *journal.DB) {
	s := connect(t)
	defer s.Close()
	at := time.Now()
	batch := []journal.Record{
		&journal.Session{ID: "s", HostID: "h", Started: at},
		&journal.TaskChange{Session: "s", Change: task.Change{Event: task.Event{Type: task.EventSpawned, ID: "shell:1", State: task.Running, Time: at, Kind: "shell"}}},
		&journal.TaskChange{Session: "s", Change: task.Change{Event: task.Event{Type: task.EventFinished, ID: "shell:1", State: task.Completed, Time: at.Add(time.Second), Kind: "shell"}, Result: "ok"}},
		&journal.Message{Session: "s", Seq: 1, Body: []byte("hello")},
	}
	for range 2 {
		if err := s.Write(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	tasks, _ := s.Tasks(t.Context(), journal.TaskFilter{})
	hist, _ := s.History(t.Context(), "s")
	if len(tasks) != 1 || tasks[0].State != "completed" || len(hist) != 1 {
		t.Errorf("after the batch twice: %d tasks %+v, %d messages", len(tasks), tasks, len(hist))
	}
	if n := s.CountEvents(t.Context(), "s", "shell:1"); n != 2 {
		t.Errorf("%d events, want 2 (spawned, finished) once each", n)
	}
}

// v1Journal writes a journal of schema version 1 (testdata/v1.sql, a
// frozen copy of the first schema) at path.
func v1Journal(t *testing.T, path string) {
	t.Helper()
	fixture, err := os.ReadFile("testdata/v1.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := rawSQLite(t, path)
	defer db.Close()
	if _, err := db.Exec(string(fixture)); err != nil {
		t.Fatal(err)
	}
}

// TestADeliveryTakenBackIsRecorded: a result whose answer never reached
// the client (task.Receipt.Return) is recorded undelivered again, so a
// resume or an attach delivers it; one delivered for good stays so.
// A result a resume told the conversation (SessionLog.Delivered, outside
// the table) is marked delivered and has a "delivered" event in its
// history, after the events it had (an outsider's finding: its history
// ended "delivered, undelivered" while the task said delivered).
func TestADeliveryByResumeIsInTheHistory(t *testing.T) { suite(t, testADeliveryByResumeIsInTheHistory) }

func testADeliveryByResumeIsInTheHistory(t *testing.T, connect func(*testing.T) *journal.DB) {
	s := connect(t)
	j, log, tb := recordedTable(t, s, journal.Session{ID: "s1", Surface: "run", Cwd: "/src", Started: time.Now()})
	id, _ := tb.View("").Spawn(task.Spec{Kind: "shell", Label: "told"}, func(context.Context, *task.Handle) (string, error) { return "x", nil })
	done, _ := tb.View("").Done(id)
	<-done
	tb.Close(t.Context())
	flush(t, j)
	log.Delivered(id) // a resume told it
	log.End()
	flush(t, j)
	j.Close(t.Context())
	s = connect(t)
	defer s.Close()
	evs, err := s.TaskEvents(t.Context(), "s1", id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Event+" "+string(e.State))
	}
	if len(names) == 0 || names[len(names)-1] != "delivered completed" {
		t.Errorf("%s's history: %q, want it to end delivered (completed)", id, names)
	}
	tasks, _ := s.Tasks(t.Context(), journal.TaskFilter{Session: "s1"})
	if len(tasks) != 1 || !tasks[0].Delivered {
		t.Errorf("tasks: %+v, want %s delivered", tasks, id)
	}
}

func TestADeliveryTakenBackIsRecorded(t *testing.T) { suite(t, testADeliveryTakenBackIsRecorded) }

func testADeliveryTakenBackIsRecorded(t *testing.T, connect func(*testing.T) *journal.DB) {
	s := connect(t)
	j, log, tb := recordedTable(t, s, journal.Session{ID: "s1", Surface: "mcp", Cwd: "/src", Started: time.Now()})
	top := tb.View("")
	lost, _ := top.Spawn(task.Spec{Kind: "shell", Label: "lost"}, func(context.Context, *task.Handle) (string, error) { return "x", nil })
	kept, _ := top.Spawn(task.Spec{Kind: "shell", Label: "kept"}, func(context.Context, *task.Handle) (string, error) { return "y", nil })
	for _, id := range []string{lost, kept} {
		done, _ := top.Done(id)
		<-done
	}
	ctx, rc := task.WithReceipt(t.Context())
	top.Wait(ctx, []string{lost}, task.All)
	flush(t, j) // the delivery is recorded before it is taken back
	rc.Return()
	ctx, rc = task.WithReceipt(t.Context())
	top.Wait(ctx, []string{kept}, task.All)
	rc.Commit()
	log.End()
	tb.Close(t.Context())
	flush(t, j)
	j.Close(t.Context())
	s = connect(t)
	defer s.Close()
	tasks, err := s.Tasks(t.Context(), journal.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tk := range tasks {
		got[tk.ID] = tk.Delivered
	}
	if got[lost] || !got[kept] {
		t.Errorf("delivered = %v, want %s false (taken back), %s true", got, lost, kept)
	}
}

// TestAZombieHostIsGone: a host that exited is gone even before its parent
// reaps it; offstage tasks showed its tasks running until then (outsider
// 16: 1.5 s after serve was SIGKILLed, under a script that waited later).
func TestAZombieHostIsGone(t *testing.T) {
	name, _ := os.Hostname()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	h := journal.Host{Hostname: name, PID: pid, Start: mustStart(t, pid)}
	if !journal.Alive(h) || journal.Exited(pid) {
		t.Fatalf("a running process (pid %d) is not alive, or has exited", pid)
	}
	cmd.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(b, ')'); i > 0 && bytes.HasPrefix(b[i+1:], []byte(" Z")) {
			break // a zombie: killed, not reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not become a zombie: %s", pid, b)
		}
		time.Sleep(time.Millisecond)
	}
	if journal.Alive(h) {
		t.Errorf("a zombie (pid %d, killed, not reaped) is alive", pid)
	}
	if !journal.Exited(pid) {
		t.Errorf("Exited(%d) of a zombie = false, want true", pid)
	}
	cmd.Wait()
}

// Stopped tells a stopped process (SIGSTOP), which answers nothing until
// continued, from a running one: a relay then does not wait on offstage
// serve's ping in vain.
func TestStoppedSaysAProcessIsStopped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	if journal.Stopped(pid) {
		t.Errorf("a running process (pid %d) is stopped", pid)
	}
	cmd.Process.Signal(syscall.SIGSTOP)
	for deadline := time.Now().Add(10 * time.Second); !journal.Stopped(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d, sent SIGSTOP, is not stopped after 10 s", pid)
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	for deadline := time.Now().Add(10 * time.Second); journal.Stopped(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d, sent SIGCONT, is still stopped after 10 s", pid)
		}
		time.Sleep(time.Millisecond)
	}
	if journal.Stopped(1 << 30) {
		t.Error("a pid that does not exist is stopped")
	}
}
