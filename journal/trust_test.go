package journal_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/offstage/offstage/journal"
)

// TestOpenLogReadsOnlyWhereOffstageWritesLogs pins issue 34's third item:
// a record's log_path was opened as any file, so whoever could write the
// journal could make offstage tasks show, tasks follow and the dashboard
// print /etc/shadow. A log is read only where offstage writes it, as
// LOGS/SESSION/ID.log, with no symlink on the way.
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
	task := func(session, id, path string) journal.Task {
		return journal.Task{Session: session, ID: id, LogPath: path}
	}

	f, err := journal.OpenLog(task("s1", "shell:1", own))
	if err != nil {
		t.Fatalf("OpenLog(its own log) = %v", err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "ours\n" {
		t.Errorf("its own log reads %q", b)
	}
	for _, tk := range []journal.Task{
		task("s1", "shell:1", "/etc/shadow"),
		task("s1", "shell:1", outside),
		task("s1", "shell:1", dir+"/s1/../../"+filepath.Base(filepath.Dir(outside))+"/secret"),
		task("s1", "shell:2", filepath.Join(dir, "s1", "shell-2.log")), // a symlink in the log directory, pointing out
		task("s2", "shell:1", filepath.Join(dir, "s2", "shell-1.log")), // a symlinked session directory
		task("s1", "shell:3", filepath.Join(dir, "s1", "shell-3.log")), // a FIFO: no hang, no read
		task("s1", "shell:1", "logs/s1/shell-1.log"),                   // relative: to what?
		task("s2", "shell:1", own),                                     // another session's log
		task("s1", "shell:2", own),                                     // another task's log
		task("etc", "shadow", "/etc/shadow"),                           // a record shaped to fit
	} {
		f, err := journal.OpenLog(tk)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, journal.ErrLogElsewhere) {
			t.Errorf("OpenLog(%s/%s at %s) = %v, want %v", tk.Session, tk.ID, tk.LogPath, err, journal.ErrLogElsewhere)
		}
		if _, err := journal.LogTail(tk, 5, 1024); !errors.Is(err, journal.ErrLogElsewhere) {
			t.Errorf("LogTail(%s/%s at %s) = %v, want %v", tk.Session, tk.ID, tk.LogPath, err, journal.ErrLogElsewhere)
		}
	}
	if _, err := journal.OpenLog(task("s1", "shell:9", filepath.Join(dir, "s1", "shell-9.log"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenLog(a log that is gone) = %v, want it not to exist", err)
	}
	// A log directory others may write is anyone's.
	os.Chmod(dir, 0o777)
	if _, err := journal.OpenLog(task("s1", "shell:1", own)); !errors.Is(err, journal.ErrLogElsewhere) {
		t.Errorf("OpenLog(a log in a directory anyone may write) = %v, want %v", err, journal.ErrLogElsewhere)
	}
}

// TestALooseStateDirectoryIsRefused pins issue 34's fourth item: root
// given a state directory that nobody made world-writable, with
// journal.db a symlink, created a root-owned file where nobody chose. A
// directory of another user, one others may write, and a symlinked
// journal are refused, as OpenSSH's StrictModes refuses a loose ~/.ssh.
func TestALooseStateDirectoryIsRefused(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, mode) // past the umask
		return dir
	}
	foreign := "/" // owned by root: another user, unless this is root
	if os.Geteuid() == 0 {
		foreign = mk("nobodys", 0o700)
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	open := mk("open", 0o777)
	group := mk("group", 0o770)
	linked := mk("linked", 0o700)
	target := filepath.Join(t.TempDir(), "elsewhere.db")
	os.Symlink(target, filepath.Join(linked, "journal.db"))
	underOpen := filepath.Join(open, "state")
	os.Mkdir(underOpen, 0o700)
	linkedToAFile := mk("linked-to-a-file", 0o700) // for the reader, which wants a file
	existing := filepath.Join(t.TempDir(), "existing.db")
	os.WriteFile(existing, nil, 0o600)
	os.Symlink(existing, filepath.Join(linkedToAFile, "journal.db"))
	for _, dir := range []string{foreign, open, group, underOpen} {
		if dir != "/" {
			os.WriteFile(filepath.Join(dir, "journal.db"), nil, 0o600)
		}
	}

	for _, c := range []struct{ dir, want string }{
		{foreign, "not to this user"},
		{open, "writable by its group and others (mode 0777)"},
		{group, "writable by its group (mode 0770)"},
		{underOpen, "writable by its group and others (mode 0777)"}, // a parent others could rename it in
		{linked, "is a symlink"},
		{linkedToAFile, "is a symlink"},
	} {
		path := filepath.Join(c.dir, "journal.db")
		for name, open := range map[string]func(string) (*journal.DB, error){"OpenSQLite": journal.OpenSQLite, "OpenSQLiteReadOnly": journal.OpenSQLiteReadOnly} {
			if c.dir == linked && name == "OpenSQLiteReadOnly" {
				continue // nothing to read: the reader says so
			}
			db, err := open(path)
			if err == nil {
				db.Close()
			}
			if !errors.Is(err, journal.ErrLoose) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s(%s) = %v, want it refused: %q", name, path, err, c.want)
			}
		}
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the symlinked journal's target was made: %v", err)
	}
	if err := journal.CheckDir(filepath.Join(base, "sticky-ok")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckDir(missing) = %v", err)
	}
	own := mk("own", 0o700)
	db, err := journal.OpenSQLite(filepath.Join(own, "journal.db"))
	if err != nil {
		t.Fatalf("a directory of this user's own, 0700: %v", err)
	}
	db.Close()

	// The log directory, and the doorbell's, are checked as they are made.
	var said strings.Builder
	db, _ = journal.OpenSQLite(filepath.Join(own, "journal.db"))
	rec, err := journal.NewRecorder(t.Context(), db, journal.RecorderOptions{LogDir: filepath.Join(open, "logs"), BellDir: filepath.Join(open, "run"), Report: func(m string) { said.WriteString(m + "\n") }})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(context.Background())
	if !strings.Contains(said.String(), "writable by its group and others") {
		t.Errorf("a doorbell in a loose directory: reported %q", said.String())
	}
}
