package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Kinds of trouble with a journal's file, to branch on with errors.Is.
// A *StoreError carries one of them with what SQLite said.
var (
	// ErrDamaged: the file is not a readable SQLite database (damaged
	// pages, or not a database at all). Found at open or while writing,
	// it ends the journal's writing: it is never retried.
	ErrDamaged = errors.New("journal: the file is damaged")
	// ErrReadOnlyFS: the journal's file system is mounted read-only.
	ErrReadOnlyFS = errors.New("journal: read-only file system")
	// ErrPermission: this user may not write (or read) the journal's file
	// or its directory.
	ErrPermission = errors.New("journal: permission denied")
	// ErrGone: the journal's file was removed or replaced while it was
	// open: what would be written goes to a file nobody can read. Like
	// damage, it ends the journal's writing.
	ErrGone = errors.New("journal: the file was removed or replaced")
	// ErrDiskFull: the disk of the journal's directory has no room left
	// (SQLite reports it as an I/O error on its -shm or -wal file, or as
	// SQLITE_FULL). It passes once there is room again.
	ErrDiskFull = errors.New("journal: the disk is full")
)

// fullBelow is how little free room makes a failing journal's disk full:
// SQLite needs a -shm file of 32 KiB and room for its -wal pages.
const fullBelow = 1 << 20

// StoreError is trouble with a journal's file, diagnosed: Kind is one of
// ErrDamaged, ErrReadOnlyFS, ErrPermission, ErrGone, or nil when the
// cause could not be told; Err is what SQLite (or the system) said. Its
// message names the file and says what to do.
type StoreError struct {
	Path string
	Kind error
	Err  error
	// Reading is set when the journal was opened to read only (offstage
	// tasks): the advice differs.
	Reading bool
	// Required is set when the command cannot run without the journal
	// (offstage serve): recording nothing is no way out to advise.
	Required bool
}

func (e *StoreError) Error() string {
	// --no-journal and --state-dir are advice for a command that
	// writes (run, mcp, acp); offstage tasks has neither to give, and
	// offstage serve no --no-journal.
	orNoJournal, orNone := ", or pass --no-journal", ", or --no-journal"
	if e.Reading || e.Required {
		orNoJournal, orNone = "", ""
	}
	switch e.Kind {
	case ErrDamaged:
		return fmt.Sprintf("journal %s is damaged (%v): move it aside (mv %s %s.damaged) and offstage starts a new one%s", e.Path, e.Err, e.Path, e.Path, orNoJournal)
	case ErrReadOnlyFS:
		return fmt.Sprintf("journal %s is on a read-only file system (%v): pass --state-dir DIR on a writable one%s; offstage tasks can still read it", e.Path, e.Err, orNone)
	case ErrPermission:
		if e.Reading {
			return fmt.Sprintf("journal %s cannot be read by this user (%v): check the permissions of the file and its directory (ls -ld %s %s)", e.Path, e.Err, filepath.Dir(e.Path), e.Path)
		}
		return fmt.Sprintf("journal %s cannot be written by this user (%v): check the owner and permissions of the file, its -wal and -shm files, and its directory (ls -la %s), or pass --state-dir DIR%s", e.Path, e.Err, filepath.Dir(e.Path), orNone)
	case ErrDiskFull:
		if e.Reading {
			return fmt.Sprintf("journal %s cannot be read: its disk is full (%v), and reading needs a little room for its -shm file: free some space on %s", e.Path, e.Err, filepath.Dir(e.Path))
		}
		return fmt.Sprintf("journal %s cannot be written: its disk is full (%v): free some space on %s or pass --state-dir DIR on another disk%s", e.Path, e.Err, filepath.Dir(e.Path), orNone)
	case ErrGone:
		return fmt.Sprintf("journal %s was %v while this offstage had it open: what it would record goes to a file nobody can read, so it records nothing more; the next offstage starts a new journal there", e.Path, e.Err)
	}
	return fmt.Sprintf("journal %s cannot be used (%v): check the file and its directory%s", e.Path, e.Err, orNoJournal)
}

// Unwrap gives both the kind and the cause to errors.Is and errors.As.
func (e *StoreError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// permanent reports whether err ends a journal's writing: retrying
// cannot help, and writing more could harm.
func permanent(err error) bool {
	return errors.Is(err, ErrDamaged) || errors.Is(err, ErrGone)
}

// diagnose turns an error about the SQLite journal at path into a
// *StoreError that tells damage from permissions from a read-only file
// system. reading says the journal was opened to read only.
func diagnose(path string, err error, reading bool) error {
	var se *StoreError
	if err == nil || errors.As(err, &se) {
		return err
	}
	return &StoreError{Path: path, Kind: classify(path, err, reading), Err: err, Reading: reading}
}

func classify(path string, err error, reading bool) error {
	var e *sqlite.Error
	code := 0
	if errors.As(err, &e) {
		code = e.Code() & 0xff // the primary code of an extended one
	}
	switch {
	case code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB:
		return ErrDamaged
	case errors.Is(err, syscall.EROFS):
		return ErrReadOnlyFS
	case errors.Is(err, os.ErrPermission):
		return ErrPermission
	case code == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC) || (code == sqlite3.SQLITE_IOERR && freeBytes(filepath.Dir(path)) < fullBelow):
		return ErrDiskFull
	}
	// SQLite's codes (READONLY, CANTOPEN, IOERR…) do not tell a read-only
	// file system from a permission: ask the kernel about each file.
	return access(path, reading)
}

// freeBytes is the room left for this user on dir's file system; a large
// number if it cannot be told.
func freeBytes(dir string) uint64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 1 << 62
	}
	return st.Bavail * uint64(st.Bsize)
}

// access says which of path's directory, path and its -wal and -shm
// files this process may not use, as ErrReadOnlyFS or ErrPermission; nil
// if all are fine.
func access(path string, reading bool) error {
	dirMode, fileMode := uint32(unix.W_OK|unix.X_OK), uint32(unix.R_OK|unix.W_OK)
	if reading {
		dirMode, fileMode = unix.X_OK, unix.R_OK
	}
	checks := []struct {
		path string
		mode uint32
	}{{filepath.Dir(path), dirMode}, {path, fileMode}, {path + "-wal", fileMode}, {path + "-shm", fileMode}}
	for _, c := range checks {
		switch err := unix.Access(c.path, c.mode); {
		case errors.Is(err, unix.EROFS):
			return ErrReadOnlyFS
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
			return ErrPermission
		}
	}
	return nil
}
