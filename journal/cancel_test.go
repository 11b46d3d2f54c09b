package journal_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
)

// TestAnOlderJournalTakesCancelRequests: a journal of schema version 1,
// migrated on open, records a cancel request, which its session's host
// finds pending until it records what it did; read as it is, without
// migrating, it has no requests and says so when asked to record one.
func TestAnOlderJournalTakesCancelRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	v1Journal(t, path)
	ro, err := journal.OpenSQLiteReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.CancelRequest(t.Context(), "s1", "shell:1"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("CancelRequest in an unmigrated journal = %v, want ErrNotFound", err)
	}
	if p, err := ro.PeerOf(t.Context(), "s1"); err != nil || p.ID != "h1" || p.Addr != "" {
		t.Errorf("PeerOf in an unmigrated journal = %+v, %v", p, err)
	}
	if _, _, err := ro.RequestCancel(t.Context(), "s1", "shell:1", "me", "", time.Now()); err == nil {
		t.Error("RequestCancel in a journal opened to read, of an older schema, succeeded")
	}
	ro.Close()

	s := open(t, path)
	defer s.Close()
	at := time.Unix(0, 1800000000000000000)
	q, created, err := s.RequestCancel(t.Context(), "s1", "shell:1", "ops@elsewhere", "too long", at)
	if err != nil || !created || q.By != "ops@elsewhere" || q.Reason != "too long" || !q.Requested.Equal(at) || !q.Handled.IsZero() {
		t.Fatalf("RequestCancel = %+v, %v, %v", q, created, err)
	}
	if _, created, err := s.RequestCancel(t.Context(), "s1", "shell:1", "someone else", "", at.Add(time.Second)); created || err != nil {
		t.Errorf("a second request = created %v, %v; want the first kept", created, err)
	}
	pending, err := s.PendingCancels(t.Context(), "h1")
	if err != nil || len(pending) != 1 || pending[0].By != "ops@elsewhere" {
		t.Fatalf("PendingCancels(h1) = %+v, %v", pending, err)
	}
	if other, _ := s.PendingCancels(t.Context(), "h2"); len(other) != 0 {
		t.Errorf("PendingCancels(h2) = %+v, want none: the session is h1's", other)
	}
	if err := s.HandleCancel(t.Context(), "s1", "shell:1", journal.OutcomeFinished, at.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if pending, _ := s.PendingCancels(t.Context(), "h1"); len(pending) != 0 {
		t.Errorf("PendingCancels after HandleCancel = %+v", pending)
	}
	if q, _ := s.CancelRequest(t.Context(), "s1", "shell:1"); q.Outcome != journal.OutcomeFinished || q.Handled.IsZero() {
		t.Errorf("the handled request = %+v", q)
	}
}

// TestTheDoorbellIsPrivate: a SQLite host's doorbell is a socket only its
// user may reach (0600 in a 0700 directory), recorded with the host with
// its peer secret, and removed when the recorder closes.
func TestTheDoorbellIsPrivate(t *testing.T) {
	dir := t.TempDir()
	s := open(t, filepath.Join(dir, "journal.db"))
	bells := filepath.Join(dir, "run")
	rec, err := journal.NewRecorder(t.Context(), s, journal.RecorderOptions{BellDir: bells})
	if err != nil {
		t.Fatal(err)
	}
	rec.Store().Write(t.Context(), []journal.Record{&journal.Session{ID: "s", HostID: rec.Host().ID, Surface: "test", Started: time.Now()}})
	rec.Flush(t.Context())
	p, err := rec.Store().PeerOf(t.Context(), "s")
	if err != nil || p.Bell == "" || p.Secret != rec.PeerSecret() || len(p.Secret) < 32 {
		t.Fatalf("PeerOf = %+v, %v", p, err)
	}
	for path, want := range map[string]os.FileMode{bells: 0o700, p.Bell: 0o600} {
		if info, err := os.Stat(path); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", path, info.Mode(), err, want)
		}
	}
	if err := journal.Ring(t.Context(), p.Bell); err != nil {
		t.Errorf("Ring = %v", err)
	}
	rec.Close(t.Context())
	if _, err := os.Stat(p.Bell); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the doorbell after Close: %v", err)
	}
}

// TestADeadHostsDoorbellIsSwept: the doorbell of a process SIGKILLed (a
// socket nobody listens on) is removed by the next recorder of the
// directory, while a live one stays: they stayed for good (an outsider's
// finding).
func TestADeadHostsDoorbellIsSwept(t *testing.T) {
	dir := t.TempDir()
	bells := filepath.Join(dir, "run")
	if err := os.MkdirAll(bells, 0o700); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(bells, "4194000.sock")
	ln, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // as a SIGKILLed process leaves it: the file, no listener
	live := filepath.Join(bells, "4194001.sock")
	lln, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer lln.Close()
	go func() {
		for {
			c, err := lln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	rec, err := journal.NewRecorder(t.Context(), open(t, filepath.Join(dir, "journal.db")), journal.RecorderOptions{BellDir: bells})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(t.Context())
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dead host's doorbell after a recorder started: %v; want it removed", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live host's doorbell: %v; want it kept", err)
	}
}

// TestAnOlderPostgresJournalTakesCancelRequests: a PostgreSQL journal of
// the schema before cancel requests (version 3) is migrated by the first
// instance that opens it, keeping its hosts and sessions, and then
// records requests and peers.
func TestAnOlderPostgresJournalTakesCancelRequests(t *testing.T) {
	pgOnce.Do(func() { pg, pgErr = pgtest.Run() })
	if errors.Is(pgErr, pgtest.ErrNoPostgres) && os.Getenv(pgtest.RequireEnv) == "" {
		t.Skipf("skipping: %v; apt-get install postgresql runs these tests", pgErr)
	}
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	url := pg.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	stmts := append([]string{"CREATE TABLE offstage_schema (version integer NOT NULL)", "INSERT INTO offstage_schema VALUES (3)"}, journal.PostgresMigrations[:3]...)
	stmts = append(stmts,
		"INSERT INTO hosts (id, hostname, pid, start, started_at, version, lease_until) VALUES ('h1', 'web-1', 42, 1, 1, 'v0.3', 1)",
		"INSERT INTO sessions (id, host_id, surface, cwd, model, started_at) VALUES ('s1', 'h1', 'mcp', '/', '', 1)",
		"INSERT INTO tasks (session_id, id, kind, label, owner, state, created_at) VALUES ('s1', 'shell:1', 'shell', 'make', '', 'running', 1)")
	for _, q := range stmts {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := journal.OpenPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p, err := s.PeerOf(t.Context(), "s1"); err != nil || p.Hostname != "web-1" || p.Addr != "" {
		t.Errorf("PeerOf after migration = %+v, %v", p, err)
	}
	if _, created, err := s.RequestCancel(t.Context(), "s1", "shell:1", "ops", "", time.Now()); err != nil || !created {
		t.Fatalf("RequestCancel after migration = %v, %v", created, err)
	}
	if pending, err := s.PendingCancels(t.Context(), "h1"); err != nil || len(pending) != 1 {
		t.Errorf("PendingCancels(h1) = %+v, %v", pending, err)
	}
	var v int
	conn.QueryRow(t.Context(), "SELECT version FROM offstage_schema").Scan(&v)
	if v != len(journal.PostgresMigrations) {
		t.Errorf("schema version %d, want %d", v, len(journal.PostgresMigrations))
	}
}

// TestOpenPostgresMigratesUnderItsContext pins the bug where
// OpenPostgres migrated on context.Background(): a start waiting behind
// another instance's migration lock could not be cancelled.
func TestOpenPostgresMigratesUnderItsContext(t *testing.T) {
	pgOnce.Do(func() { pg, pgErr = pgtest.Run() })
	if errors.Is(pgErr, pgtest.ErrNoPostgres) && os.Getenv(pgtest.RequireEnv) == "" {
		t.Skipf("skipping: %v; apt-get install postgresql runs these tests", pgErr)
	}
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	url := pg.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Another instance is migrating: it holds the migration lock.
	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_lock(7390001)"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	opened := make(chan error, 1)
	go func() {
		s, err := journal.OpenPostgres(ctx, url)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	// Once Open waits for the lock, its ctx ends.
	for waiting := 0; waiting == 0; time.Sleep(10 * time.Millisecond) {
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	// Without ctx reaching the migration, Open waits for the lock: it is
	// let go only after a while, so that Open then succeeds and the test
	// fails instead of hanging.
	release := time.AfterFunc(20*time.Second, func() { conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7390001)") })
	defer release.Stop()
	if err := <-opened; err == nil {
		t.Fatal("OpenPostgres with its ctx cancelled while waiting for the migration lock succeeded, after the lock was let go; want it to give up")
	}
}
