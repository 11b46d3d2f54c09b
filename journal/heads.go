package journal

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// Closing any descriptor of a file drops every POSIX record lock the
// process holds on it (fcntl(2)), SQLite's included. A descriptor of our
// own, opened to read the header and closed after, so released the SHARED
// lock of this process's SQLite connections: the next reader of another
// process to close (the sqlite3 shell, say) found itself the last, took
// the file, checkpointed it and deleted the -wal and -shm files this
// process still wrote to, and every record after went into an unlinked
// file nobody would read (an outsider's finding). So this process keeps
// one descriptor per journal file, shared by every DB of that file, and
// closes it only with the last of them, after SQLite closed its own.
var heads = struct {
	sync.Mutex
	m map[fileID]*head
}{m: make(map[fileID]*head)}

// head is a journal file's descriptor, and how many DBs hold it.
type head struct {
	f     *os.File
	refs  int
	spare []*os.File // opened in a race with a replacement: closed with f
}

// holdHead returns the descriptor of the file at path, opening it with
// flag (O_NOFOLLOW added) and perm unless this process holds it already,
// and the file's identity; releaseHead gives it back.
func holdHead(path string, flag int, perm os.FileMode) (*os.File, fileID, error) {
	heads.Lock()
	defer heads.Unlock()
	if info, err := os.Lstat(path); err == nil {
		if h := heads.m[idOf(info)]; h != nil {
			h.refs++
			return h.f, idOf(info), nil
		}
	}
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, fileID{}, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close() // nothing of this process had it: the stat just failed
		return nil, fileID{}, err
	}
	id := idOf(info)
	if id == (fileID{}) {
		f.Close()
		return nil, fileID{}, errors.New("cannot tell which file it is")
	}
	if h := heads.m[id]; h != nil { // replaced between the look and the open
		h.refs++
		h.spare = append(h.spare, f) // closing it now could drop h's locks
		return h.f, id, nil
	}
	heads.m[id] = &head{f: f, refs: 1}
	return f, id, nil
}

// releaseHead gives back a descriptor of holdHead, closing it with the
// last holder.
func releaseHead(id fileID) {
	heads.Lock()
	defer heads.Unlock()
	h := heads.m[id]
	if h == nil {
		return
	}
	if h.refs--; h.refs > 0 {
		return
	}
	delete(heads.m, id)
	h.f.Close()
	for _, f := range h.spare {
		f.Close()
	}
}
