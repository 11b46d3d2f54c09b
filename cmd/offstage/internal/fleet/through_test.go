package fleet

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

// TestCancelRingsTheOwnersDoorbell pins, in this package, that Cancel
// rings the owner's doorbell (issue 34, item 10): only the end-to-end
// tests of the CLI noticed a Cancel that left the owner to its 5 s
// catch-up. Here the doorbell's socket is taken over by the test, which
// sees the ring; the owner then acts at its catch-up.
func TestCancelRingsTheOwnersDoorbell(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	store, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	bells := filepath.Join(dir, "run")
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{BellDir: bells})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	s, err := agent.Open(ctx, agent.Config{}, agent.Surface{Name: "test", Journal: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	id, err := s.Table().View("").Spawn(task.Spec{Kind: "shell"}, func(ctx context.Context, _ *task.Handle) (string, error) {
		<-ctx.Done()
		return "", context.Cause(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Flush(ctx)
	bell := filepath.Join(bells, strconv.Itoa(os.Getpid())+".sock")
	if err := os.Remove(bell); err != nil {
		t.Fatalf("the owner has no doorbell at %s: %v", bell, err)
	}
	ln, err := net.Listen("unix", bell)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, err := Cancel(ctx, other, s.ID(), id, "ops", "rung"); err != nil || got.State != journal.Canceled {
		t.Errorf("Cancel = %+v, %v; want it canceled (at the owner's catch-up)", got, err)
	}
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(time.Second)) // a ring is queued by now, if there was one
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("Cancel did not ring the owner's doorbell: %v", err)
	}
	c.Close()
}

// TestFollowReadsThroughTheOwnersHandler pins, in this package, Follow
// asking a live owner through Handler (issue 34, item 10): the output
// comes from the owner, with no note of reading the log instead.
func TestFollowReadsThroughTheOwnersHandler(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	store, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "logs")
	rec, err := journal.NewRecorder(ctx, store, journal.RecorderOptions{LogDir: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	srv := httptest.NewServer(Handler(rec))
	defer srv.Close()
	rec.SetPeerAddr(srv.URL)
	log := filepath.Join(logs, "s", "shell-1.log")
	os.MkdirAll(filepath.Dir(log), 0o700)
	os.WriteFile(log, []byte("one\ntwo\nthree\n"), 0o600)
	now := time.Now()
	if err := store.Write(ctx, []journal.Record{
		&journal.Session{ID: "s", HostID: rec.Host().ID, Surface: "test", Started: now},
		&journal.TaskChange{Session: "s", Change: task.Change{Event: task.Event{Time: now, Type: task.EventSpawned, ID: "shell:1", Kind: "shell", State: task.Completed}}},
		journal.TaskProcess{Session: "s", ID: "shell:1", LogPath: log},
	}); err != nil {
		t.Fatal(err)
	}
	rec.Flush(ctx)
	other, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var out bytes.Buffer
	var notes []string
	if err := Follow(ctx, other, "s", "shell:1", FollowOptions{Since: -1, Lines: 2, Note: func(n string) { notes = append(notes, n) }}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "two\nthree\n" || len(notes) > 0 {
		t.Errorf("Follow wrote %q, noting %q; want the last 2 lines from the owner, no note", out.String(), notes)
	}
}
