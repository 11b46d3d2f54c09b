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

// OpenLog opens the output log path, as a record names it, for reading,
// if it is a regular file inside dir, the log directory of the offstage
// reading it (RecorderOptions.LogDir). Every name below dir is opened
// without following symlinks, so neither the record nor a symlink in the
// directory can make offstage read a file elsewhere (/etc/shadow, when
// it runs as root); such a path is ErrLogElsewhere. A log that does not
// exist is an error wrapping fs.ErrNotExist.
func OpenLog(dir, path string) (*os.File, error) {
	elsewhere := fmt.Errorf("%s: %w", path, ErrLogElsewhere)
	if dir == "" || !filepath.IsAbs(path) {
		return nil, elsewhere
	}
	rdir, err := filepath.EvalSymlinks(dir) // dir itself is ours, wherever it lies
	if err != nil {
		return nil, err
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		if rel, _ := filepath.Rel(filepath.Clean(dir), filepath.Clean(path)); !filepath.IsLocal(rel) {
			return nil, elsewhere // not ours to probe
		}
		return nil, err
	}
	rel, err := filepath.Rel(rdir, filepath.Join(parent, filepath.Base(path)))
	if err != nil || !filepath.IsLocal(rel) {
		return nil, elsewhere
	}
	fd, err := unix.Open(rdir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rdir, Err: err}
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i, name := range parts {
		flag := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if i < len(parts)-1 {
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
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, elsewhere
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// LogTail returns the last lines of the output log path, cleaned for a
// person or a model (no escapes, no carriage returns), at most maxBytes
// of it. The log is opened with OpenLog: it must lie in dir.
func LogTail(dir, path string, lines, maxBytes int) (string, error) {
	f, err := OpenLog(dir, path)
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
			return looseDir(dir, p, fmt.Sprintf("it belongs to uid %d, not to this user (uid %d)", uid, euid))
		case mode&0o022 != 0 && (first || !sticky):
			return looseDir(dir, p, fmt.Sprintf("it is writable by %s (mode %#o); chmod go-w %s", writers(mode), mode, p))
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

func looseDir(dir, p, why string) error {
	where := p
	if p != dir {
		where = p + " (holding " + dir + ")"
	}
	return fmt.Errorf("refusing %s: %s, and %w; use a directory of your own (--state-dir DIR)", where, why, ErrLoose)
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
