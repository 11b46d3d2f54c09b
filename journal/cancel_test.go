package journal_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
