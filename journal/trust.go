package journal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc"
)

// What offstage reads and writes is trusted only as far as its writer
// (see "Trust" in the package doc): a record's log path is opened only
// where offstage writes logs, and a state directory only if no other user
// could have prepared it.

// ErrLogElsewhere is the error of OpenLog for a record whose log path
// lies outside the log directory, or reaches out of it by a symlink.
var ErrLogElsewhere = errors.New("this record's log is not where offstage writes logs")

// ErrLoose is the kind of error of CheckDir and OpenSQLite for a
// directory or file another user could have prepared or could change.
var ErrLoose = errors.New("another user could have prepared or could change it")

// OpenLog opens task t's output log for reading, if t.LogPath is where
// offstage writes it: LOGS/SESSION/ID.log (tools names a shell's log so,
// in the log directory the journal's Recorder gives each session), with
// SESSION and ID t's own, as a regular file whose every name below LOGS
// is opened without following symlinks; the file must belong to whoever
// owns LOGS, which nobody else may write. So a record cannot make
// offstage read another file (/etc/shadow, when it runs as root), nor a
// symlink or hard link planted in a log directory; such a path is
// ErrLogElsewhere. A log that does not exist is an error wrapping
// fs.ErrNotExist.
//
// The log directory is read from the path, not from this process's
// options: an offstage follows the logs of the others of its fleet on
// this machine, each in its own state directory.
func OpenLog(t Task) (*os.File, error) {
	path := t.LogPath
	elsewhere := fmt.Errorf("%s: %w", path, ErrLogElsewhere)
	sessionDir := filepath.Dir(path)
	dir := filepath.Dir(sessionDir)
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || filepath.Base(dir) != "logs" ||
		filepath.Base(sessionDir) != t.Session || filepath.Base(path) != strings.ReplaceAll(t.ID, ":", "-")+".log" {
		return nil, elsewhere
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var owner unix.Stat_t
	if err := unix.Fstat(fd, &owner); err != nil || owner.Mode&0o022 != 0 {
		unix.Close(fd)
		return nil, elsewhere // others could have put anything there
	}
	for i, name := range []string{t.Session, filepath.Base(path)} {
		flag := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if i == 0 {
			flag |= unix.O_DIRECTORY
		} else {
			flag |= unix.O_NONBLOCK // a FIFO must not hang the open
		}
		next, err := unix.Openat(fd, name, flag, 0)
		unix.Close(fd)
		switch {
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR):
			return nil, elsewhere // a symlink, which may lead anywhere
		case err != nil:
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		fd = next
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != owner.Uid {
		unix.Close(fd)
		return nil, elsewhere
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// LogTail returns the last lines of task t's output log, cleaned for a
// person or a model (no escapes, no carriage returns), at most maxBytes
// of it. The log is opened with OpenLog.
func LogTail(t Task, lines, maxBytes int) (string, error) {
	f, err := OpenLog(t)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	off := max(0, st.Size()-int64(maxBytes))
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	text := strings.TrimRight(proc.Clean(buf), "\n")
	all := strings.Split(text, "\n")
	if off > 0 && len(all) > 1 {
		all = all[1:] // the first line is cut
	}
	return strings.Join(all[max(0, len(all)-lines):], "\n"), nil
}

// CheckDir refuses a directory another user could have prepared or could
// change, as OpenSSH's StrictModes refuses a loose ~/.ssh: dir (symlinks
// resolved) must belong to this user and be writable by nobody else, and
// each directory above it must belong to this user or root and be
// writable by nobody else unless it is sticky (/tmp). Otherwise a user
// who can write there could swap a file offstage is about to open for a
// symlink to one of its own choosing. The error wraps ErrLoose and says
// which directory, and why.
func CheckDir(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	euid := os.Geteuid()
	for p, first := real, true; ; p, first = filepath.Dir(p), false {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return err
		}
		uid, mode := int(st.Uid), os.FileMode(st.Mode).Perm()
		sticky := st.Mode&syscall.S_ISVTX != 0
		switch {
		case uid != euid && (first || uid != 0):
			return looseDir(dir, p, fmt.Sprintf("it belongs to uid %d, not to this user (uid %d)", uid, euid), "")
		case mode&0o022 != 0 && (first || !sticky):
			return looseDir(dir, p, fmt.Sprintf("it is writable by %s (mode %#o)", writers(mode), mode), "chmod go-w "+p+", or ")
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func writers(mode os.FileMode) string {
	switch {
	case mode&0o020 != 0 && mode&0o002 != 0:
		return "its group and others"
	case mode&0o020 != 0:
		return "its group"
	}
	return "others"
}

// looseDir refuses dir, as p (dir or a directory above it) is why; fix,
// if any, is what to do about p, said before the other way out.
func looseDir(dir, p, why, fix string) error {
	where := p
	if p != dir {
		where = p + " (holding " + dir + ")"
	}
	return fmt.Errorf("refusing %s: %s, so %w; %suse a directory of your own (--state-dir DIR)", where, why, ErrLoose, fix)
}

// checkFile refuses path if it is a symlink, not a regular file, or
// belongs to another user; one that does not exist is fine.
func checkFile(path string) error {
	var st syscall.Stat_t
	switch err := syscall.Lstat(path, &st); {
	case errors.Is(err, syscall.ENOENT):
		return nil
	case err != nil:
		return err
	case st.Mode&syscall.S_IFMT == syscall.S_IFLNK:
		return fmt.Errorf("refusing %s: it is a symlink, which offstage does not follow there, and %w", path, ErrLoose)
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return fmt.Errorf("refusing %s: it is not a regular file", path)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("refusing %s: it belongs to uid %d, not to this user (uid %d), and %w", path, st.Uid, os.Geteuid(), ErrLoose)
	}
	return nil
}
