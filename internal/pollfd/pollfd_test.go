//go:build linux

package pollfd_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/internal/pollfd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// blockingPipe is a pipe in blocking mode, as a program inherits its
// standard input from a shell or an editor.
func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	t.Cleanup(func() {
		r.Close()
		w.Close()
	})
	return r, w
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fl := 0
	rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	return fl&unix.O_NONBLOCK != 0
}

// A blocking pipe comes back polled: a read deadline, which only the
// poller keeps, ends a read that has nothing to read; what is written is
// read; restore puts the pipe back in blocking mode and leaves it open.
func TestAPipeIsPolledThenRestored(t *testing.T) {
	r, w := blockingPipe(t)
	in, restore := pollfd.Reader(r)
	p, ok := in.(*os.File)
	if !ok || p == r {
		t.Fatalf("Reader(a blocking pipe) = %T %v, want a new *os.File", in, in)
	}
	if !nonblocking(t, r) {
		t.Error("the pipe is not in non-blocking mode")
	}
	if err := p.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatalf("SetReadDeadline = %v: the file is not the poller's", err)
	}
	if _, err := p.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read with nothing to read, past its deadline = %v, want os.ErrDeadlineExceeded (the poller's)", err)
	}
	p.SetReadDeadline(time.Time{})
	w.Write([]byte("line\n"))
	buf := make([]byte, 16)
	if n, err := p.Read(buf); err != nil || !bytes.Equal(buf[:n], []byte("line\n")) {
		t.Errorf("Read = %q, %v; want %q", buf[:n], err, "line\n")
	}
	// A read under way when restore runs returns.
	done := make(chan error, 1)
	go func() {
		_, err := p.Read(buf)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	restore()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a read under way at restore returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read under way did not return at restore")
	}
	restore() // twice: nothing more
	if nonblocking(t, r) {
		t.Error("after restore the pipe is still in non-blocking mode")
	}
	w.Write([]byte("after\n"))
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "after\n" {
		t.Errorf("the original file after restore: Read = %q, %v", buf[:n], err)
	}
}

// What is not a blocking pipe or socket comes back as it was.
func TestWhatIsNoBlockingPipeIsLeftAlone(t *testing.T) {
	reg, err := os.CreateTemp(t.TempDir(), "regular")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	goPipeR, goPipeW, err := os.Pipe() // Go's own: polled already
	if err != nil {
		t.Fatal(err)
	}
	defer goPipeR.Close()
	defer goPipeW.Close()
	var buf bytes.Buffer
	for name, w := range map[string]io.Writer{"a regular file": reg, "a pipe of Go's": goPipeW, "a buffer": &buf} {
		got, restore := pollfd.Writer(w)
		restore()
		if got != w {
			t.Errorf("Writer(%s) = %v, want it as it was", name, got)
		}
	}
}

// A blocking pipe given as a writer is polled too: a write to a pipe
// whose reader reads nothing parks, and a deadline ends it.
func TestAWriterIsPolled(t *testing.T) {
	_, w := blockingPipe(t)
	out, restore := pollfd.Writer(w)
	defer restore()
	p := out.(*os.File)
	if err := p.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatalf("SetWriteDeadline = %v: the file is not the poller's", err)
	}
	_, err := p.Write(make([]byte, 1<<20)) // more than the pipe holds
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a write to a full pipe past its deadline = %v, want os.ErrDeadlineExceeded", err)
	}
}

// A socket, as a Node editor gives its child's stdio (libuv's socket
// pairs), is polled as a pipe is.
func TestASocketIsPolled(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, peer := os.NewFile(uintptr(fds[0]), "s"), os.NewFile(uintptr(fds[1]), "peer")
	defer s.Close()
	defer peer.Close()
	in, restore := pollfd.Reader(s)
	defer restore()
	p, ok := in.(*os.File)
	if !ok || p == s {
		t.Fatalf("Reader(a blocking socket) = %T, want a new *os.File", in)
	}
	if err := p.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatalf("SetReadDeadline = %v: the socket is not the poller's", err)
	}
	if _, err := p.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read with nothing to read, past its deadline = %v, want os.ErrDeadlineExceeded", err)
	}
}
