package tools

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// PortLeases hands out TCP ports to shells that ask for them (bash with
// port), so parallel tasks — and parallel agents, each its own offstage —
// never start two dev servers on one port. A port is leased for as long
// as its task runs and released when the task ends.
//
// A port is leased only if no process listens on it, no task of this
// process holds it, and no other offstage of the same user holds it: each
// lease is a lock (flock) on a file named after the port in a directory
// only the user can write, held while the lease lasts, so the kernel
// releases it if offstage dies. A lock file that is a symlink is refused,
// naming it, never followed. Ports come from [Min, Max), outside
// Linux's range for outgoing connections (32768–60999), so the kernel does
// not hand a leased port to a connection meanwhile. A program that is not
// offstage may still take a leased port before the task binds it; then the
// task's "address already in use" names the holder, as for any port.
//
// The zero value leases from 20000 to 29999 in a directory under
// os.TempDir(). A PortLeases is safe for concurrent use; share one among
// every Set of a process.
type PortLeases struct {
	Min, Max int    // default 20000, 30000
	Dir      string // where the lock files are; default os.TempDir()/offstage-ports-UID

	mu   sync.Mutex
	held map[int]*os.File // guarded by mu: leased ports, each with its locked file
	next int              // guarded by mu: where the next search starts
}

// maxPortsPerTask bounds bash's port count.
const maxPortsPerTask = 8

// errNoPort is returned when every port of the range is taken.
var errNoPort = errors.New("no free port to lease")

func (l *PortLeases) bounds() (int, int) {
	lo, hi := l.Min, l.Max
	if lo <= 0 || hi <= lo || hi > 65536 {
		lo, hi = 20000, 30000
	}
	return lo, hi
}

// dir returns the private directory of lock files, making it if needed,
// and refuses one that another user could write or swap.
func (l *PortLeases) dir() (string, error) {
	dir := l.Dir
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "offstage-ports-"+strconv.Itoa(os.Getuid()))
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("making the port lease directory: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || st.Mode().Perm()&0o022 != 0 || (sys != nil && int(sys.Uid) != os.Getuid()) {
		return "", fmt.Errorf("the port lease directory %s is not a private directory of this user (a symlink, another owner, or writable by others); remove it, and offstage makes it anew", dir)
	}
	return dir, nil
}

// Lease leases n free ports, or none and an error.
func (l *PortLeases) Lease(n int) ([]int, error) {
	if n < 1 || n > maxPortsPerTask {
		return nil, fmt.Errorf("a task may lease 1 to %d ports, not %d", maxPortsPerTask, n)
	}
	dir, err := l.dir()
	if err != nil {
		return nil, err
	}
	lo, hi := l.bounds()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = make(map[int]*os.File)
	}
	if l.next < lo || l.next >= hi {
		l.next = lo + rand.IntN(hi-lo) // parallel offstages start apart
	}
	var got []int
	for tried := 0; tried < hi-lo && len(got) < n; tried++ {
		port := l.next
		if l.next++; l.next >= hi {
			l.next = lo
		}
		if _, ok := l.held[port]; ok {
			continue
		}
		f, err := lockPort(dir, port)
		if err != nil {
			l.releaseLocked(got)
			return nil, err
		}
		if f == nil {
			continue
		}
		if !bindable(port) {
			f.Close()
			continue
		}
		l.held[port] = f
		got = append(got, port)
	}
	if len(got) < n {
		l.releaseLocked(got)
		return nil, fmt.Errorf("%w: all of %d–%d are in use or leased", errNoPort, lo, hi-1)
	}
	return got, nil
}

// Release ends the leases of ports. Releasing a port not leased does
// nothing.
func (l *PortLeases) Release(ports []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(ports)
}

func (l *PortLeases) releaseLocked(ports []int) {
	for _, p := range ports {
		if f := l.held[p]; f != nil {
			f.Close() // drops the flock; the file stays, for the next lease
			delete(l.held, p)
		}
	}
}

// Held returns how many ports are leased now.
func (l *PortLeases) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// lockPort takes the lock file of port: the file locked, or nil if
// another offstage holds it. A lock file that is not a plain file of its
// own (a symlink, which is not followed, or anything else it cannot
// lock) is an error naming it: skipped, it would pass for a port in use,
// and every lease would fail saying "all in use".
func lockPort(dir string, port int) (*os.File, error) {
	path := filepath.Join(dir, strconv.Itoa(port))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("the port lock file %s is a symlink, which offstage does not follow; remove it (rm %s) and offstage makes a plain file there", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the port lock file: %w; remove %s and offstage makes it anew", err, path)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("the port lock file %s is not a plain file; remove it and offstage makes a plain file there", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, nil // another offstage holds it
	} else if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the port lock file %s: %w", path, err)
	}
	return f, nil
}

// bindable reports whether nothing listens on port, on any address.
func bindable(port int) bool {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
