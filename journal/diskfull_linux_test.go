package journal_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/offstage/offstage/journal"
)

// TestAFullDiskIsSaid: a journal that cannot be opened because its disk
// is full says so, and what to do; it said "disk I/O error (4874)", as
// SQLite reports the -shm file it could not size (an outsider's trial).
// Reading it (offstage tasks) says so too.
func TestAFullDiskIsSaid(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		if os.Getenv("OFFSTAGE_REQUIRE_ROOT") != "" {
			t.Fatalf("OFFSTAGE_REQUIRE_ROOT is set, but a tmpfs cannot be mounted: %v", err)
		}
		t.Skipf("skipping: cannot mount a tmpfs to fill (%v); it needs root", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "journal.db")
	db, err := journal.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	os.Remove(path + "-shm")
	os.Remove(path + "-wal")
	// Fill what is left.
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	for _, open := range []struct {
		name string
		fn   func(string) (*journal.DB, error)
		want string
	}{
		{"OpenSQLite", journal.OpenSQLite, "its disk is full"},
		{"OpenSQLiteReadOnly", journal.OpenSQLiteReadOnly, "its disk is full"},
	} {
		db, err := open.fn(path)
		if err == nil {
			db.Close()
			t.Logf("%s opened the journal on a full disk", open.name) // it may need no room
			continue
		}
		if !errors.Is(err, journal.ErrDiskFull) || !strings.Contains(err.Error(), open.want) {
			t.Errorf("%s = %v, want it to say the disk is full", open.name, err)
		}
	}
}
