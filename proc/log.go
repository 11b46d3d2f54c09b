package proc

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// logChunk is how much output the log's writer gathers into one write
// while the previous write is in progress: large writes are much cheaper
// than many small ones.
const logChunk = 256 << 10

// logFile writes output to a file up to a cap, on its own goroutine so
// reading the pipes and writing the file overlap. It double-buffers: the
// readers append to one buffer while the writer writes the other, then the
// writer swaps them. When the filling buffer reaches logChunk the readers
// wait for the writer, so a slow disk slows the child down instead of
// losing output or growing memory (at most two buffers of about logChunk).
//
// Past the cap it drops the rest, counting it, and on close appends one
// line saying how much was not logged, so a reader of the file knows it was
// cut. A write error (a full disk) stops logging the same way.
type logFile struct {
	f     *os.File
	max   int64         // cap on bytes of output written
	kick  chan struct{} // capacity 1: the filling buffer has data, or close was called
	taken chan struct{} // capacity 1: the writer swapped buffers
	done  chan struct{} // closed when the writer goroutine has finished

	mu      sync.Mutex // guards the fields below
	filling []byte     // output not yet handed to the writer
	closing bool

	path   string
	onDisk atomic.Int64 // bytes of output in the file: always its first onDisk bytes

	// owned by the writer goroutine until done is closed
	written int64
	cut     int64 // bytes not written
	err     error // the first write error, which stopped logging
}

func openLog(path string, max int64) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	l := &logFile{
		f: f, max: max, path: path,
		kick:  make(chan struct{}, 1),
		taken: make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	go l.run()
	return l, nil
}

// write appends a copy of b for the writer, waiting while the filling
// buffer is full. Callers serialise write and close (Process.logMu).
func (l *logFile) write(b []byte) {
	l.mu.Lock()
	for len(l.filling) >= logChunk {
		l.mu.Unlock()
		<-l.taken
		l.mu.Lock()
	}
	if l.filling == nil {
		// Below logChunk plus one read of at most readBufferBytes: it never grows.
		l.filling = make([]byte, 0, logChunk+readBufferBytes)
	}
	l.filling = append(l.filling, b...)
	l.mu.Unlock()
	signal(l.kick)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (l *logFile) run() {
	defer close(l.done)
	var spare []byte
	for range l.kick {
		l.mu.Lock()
		buf, closing := l.filling, l.closing
		l.filling = spare
		l.mu.Unlock()
		signal(l.taken)
		l.writeNow(buf)
		spare = buf[:0]
		if closing {
			l.mu.Lock()
			rest := l.filling
			l.mu.Unlock()
			l.writeNow(rest) // anything appended between the swap and now
			return
		}
	}
}

func (l *logFile) writeNow(b []byte) {
	if len(b) == 0 {
		return
	}
	if l.err != nil || l.written >= l.max {
		l.cut += int64(len(b))
		return
	}
	keep := b[:min(int64(len(b)), l.max-l.written)]
	n, err := l.f.Write(keep)
	l.written += int64(n)
	l.onDisk.Store(l.written)
	l.cut += int64(len(b) - n)
	if err != nil {
		l.err = err
	}
}

// close waits for everything written so far, notes any cut, and closes the
// file. It returns how many bytes were not logged.
func (l *logFile) close() int64 {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	signal(l.kick)
	<-l.done
	if l.cut > 0 {
		why := fmt.Sprintf("the log reached its cap of %d bytes", l.max)
		if l.err != nil {
			why = "writing failed: " + l.err.Error()
		}
		fmt.Fprintf(l.f, "\n[offstage: log cut: %d more bytes of output were not logged; %s]\n", l.cut, why)
	}
	l.f.Close()
	return l.cut
}

// readAt returns up to n bytes of output from cursor off, as far as the
// file holds them. It opens the file afresh, so it works while the writer
// runs and after close.
func (l *logFile) readAt(off, n int64) ([]byte, error) {
	n = min(n, l.onDisk.Load()-off)
	if n <= 0 {
		return nil, nil
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	k, err := f.ReadAt(buf, off)
	if err == io.EOF && k > 0 {
		err = nil
	}
	return buf[:k], err
}
