package journal_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/offstage/offstage/journal"
)

// TestOpenLogReadsOnlyWhereOffstageWritesLogs pins issue 34's third item:
// a record's log_path was opened as any file, so whoever could write the
// journal could make offstage tasks show, tasks follow and the dashboard
// print /etc/shadow. A log is read only inside the log directory, with no
// symlink on the way.
func TestOpenLogReadsOnlyWhereOffstageWritesLogs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("the secret\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "s1"), 0o700)
	own := filepath.Join(dir, "s1", "shell-1.log")
	os.WriteFile(own, []byte("ours\n"), 0o600)
	os.Symlink(outside, filepath.Join(dir, "s1", "shell-2.log"))
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "s2"))
	syscall.Mkfifo(filepath.Join(dir, "s1", "shell-3.log"), 0o600)

	f, err := journal.OpenLog(dir, own)
	if err != nil {
		t.Fatalf("OpenLog(its own log) = %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "ours\n" {
		t.Errorf("its own log reads %q", b)
	}
	for _, path := range []string{
		"/etc/shadow",
		outside,
		dir + "/../../" + filepath.Base(filepath.Dir(outside)) + "/secret",
		filepath.Join(dir, "s1", "shell-2.log"), // a symlink in the log directory, pointing out
		filepath.Join(dir, "s2", "secret"),      // a symlinked directory in it
		filepath.Join(dir, "s1", "shell-3.log"), // a FIFO: no hang, no read
		"s1/shell-1.log",                        // relative: to what?
		dir,
	} {
		f, err := journal.OpenLog(dir, path)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, journal.ErrLogElsewhere) {
			t.Errorf("OpenLog(%s) = %v, want %v", path, err, journal.ErrLogElsewhere)
		}
		if _, err := journal.LogTail(dir, path, 5, 1024); !errors.Is(err, journal.ErrLogElsewhere) {
			t.Errorf("LogTail(%s) = %v, want %v", path, err, journal.ErrLogElsewhere)
		}
	}
	if _, err := journal.OpenLog(dir, filepath.Join(dir, "s1", "gone.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenLog(a log that is gone) = %v, want it not to exist", err)
	}
}
