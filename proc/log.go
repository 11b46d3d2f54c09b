package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/offstage/offstage/proc/internal/contain"
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
// cut. A write error (a full disk, a file size limit) stops logging the
// same way: the log stays a prefix of the output, its failure is published
// (failure, and onError once), and the closing line says why. On a full
// disk that line would fail too, so close gives back the end of the logged
// output to make room for it: a log that says where it stopped is worth
// more than its last hundred bytes.
type logFile struct {
	f       *os.File
	max     int64         // cap on bytes of output written
	onError func(error)   // told of a write failure once, on the writer goroutine; may be nil
	kick    chan struct{} // capacity 1: the filling buffer has data, or close was called
	taken   chan struct{} // capacity 1: the writer swapped buffers
	done    chan struct{} // closed when the writer goroutine has finished

	mu      sync.Mutex // guards the fields below
	filling []byte     // output not yet handed to the writer
	closing bool

	path    string
	onDisk  atomic.Int64             // bytes of output in the file: always its first onDisk bytes
	failure atomic.Pointer[LogError] // set when a write failed

	// reserve is the free space the log leaves (Config.LogReserveBytes):
	// 0 for the default, negative for none. free reports the space left
	// on f's file system, and its size; ok false if it cannot tell.
	reserve int64
	free    func(f *os.File) (avail, size int64, ok bool)

	// owned by the writer goroutine until done is closed
	written int64
	cut     int64 // bytes not written
	err     error // the first write error, which stopped logging
}

// LogError says that writing the output log failed (a full disk, a file
// size limit), so the log holds the output only up to byte At; the rest is
// kept only as long as memory holds it (see Config.TailBytes). Start
// returns one when the log cannot be opened at all.
type LogError struct {
	Path string // the log file
	At   int64  // bytes of output the log holds: where logging stopped
	Err  error  // the write's (or the open's) error
}

func (e *LogError) Error() string {
	if pe := (*os.PathError)(nil); errors.As(e.Err, &pe) && pe.Op == "open" {
		return fmt.Sprintf("output log %s cannot be opened: %s", e.Path, e.Reason())
	}
	return fmt.Sprintf("output log %s stopped at byte %d: %s", e.Path, e.At, e.Reason())
}

func (e *LogError) Unwrap() error { return e.Err }

// Reason is why the write failed, without the file's name: "no space left
// on device".
func (e *LogError) Reason() string {
	var pe *os.PathError
	if errors.As(e.Err, &pe) {
		return pe.Err.Error()
	}
	return e.Err.Error()
}

func openLog(path string, max, reserve int64, onError func(error)) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, &LogError{Path: path, Err: err}
	}
	l := &logFile{
		f: f, max: max, path: path, onError: onError, reserve: reserve, free: fileFree,
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
	var err error
	if reserve, left, low := l.low(int64(len(keep))); low {
		// Write what leaves the reserve, not a byte more.
		keep = keep[:max(0, min(int64(len(keep)), left-reserve))]
		err = &reserveError{Reserve: reserve, Free: left}
	}
	n, werr := l.f.Write(keep)
	if werr != nil {
		err = werr
	}
	l.written += int64(n)
	l.onDisk.Store(l.written)
	l.cut += int64(len(b) - n)
	if err != nil {
		l.err = err
		e := &LogError{Path: l.path, At: l.written, Err: err}
		l.failure.Store(e)
		if l.onError != nil {
			l.onError(e)
		}
	}
}

// low says whether writing n more bytes would leave less free space than
// the reserve, with the reserve and the free space.
func (l *logFile) low(n int64) (reserve, free int64, low bool) {
	if l.reserve < 0 || l.free == nil {
		return 0, 0, false
	}
	free, size, ok := l.free(l.f)
	if !ok {
		return 0, 0, false
	}
	reserve = l.reserve
	if reserve == 0 {
		reserve = min(max(size/100, minLogReserve), maxLogReserve)
	}
	return reserve, free, free-n < reserve
}

// The bounds of the default reserve.
const (
	minLogReserve = 1 << 20
	maxLogReserve = 256 << 20
)

// ErrLogReserve is what a LogError wraps when logging stopped to leave the
// file system its reserve of free space (Config.LogReserveBytes).
var ErrLogReserve = errors.New("the disk is nearly full")

// reserveError stops a log that would leave its file system less free
// space than its reserve.
type reserveError struct {
	Reserve int64 // the free space the log leaves
	Free    int64 // the free space there was
}

func (e *reserveError) Error() string {
	return fmt.Sprintf("the disk is nearly full: %s free, which is kept for the journal and others", contain.FormatSize(e.Free))
}

func (e *reserveError) Is(target error) bool { return target == ErrLogReserve }

// close waits for everything written so far, notes any cut, and closes the
// file. It returns how many bytes were not logged.
func (l *logFile) close() int64 {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	signal(l.kick)
	<-l.done
	if l.cut > 0 {
		l.markCut()
	}
	l.f.Close()
	return l.cut
}

// markCut ends the file with the line that says where and why logging
// stopped. When that line cannot be written either (the disk is still
// full), it cuts the logged output back to make room for it, at most
// twice: by the line's length (and a little, as its numbers change), then
// by a block more.
func (l *logFile) markCut() {
	why := fmt.Sprintf("the log reached its cap of %d bytes", l.max)
	switch {
	case errors.Is(l.err, ErrLogReserve):
		why = "stopped: " + l.err.Error()
	case l.err != nil:
		why = "writing failed: " + l.err.Error()
	}
	at := l.written
	for try := 0; ; try++ {
		mark := fmt.Appendf(nil, "\n[offstage: log cut at byte %d: %d more bytes of output were not logged; %s]\n", at, l.cut+l.written-at, why)
		if _, err := l.f.WriteAt(mark, at); err == nil || try == 2 || at == 0 {
			break // written, or nothing more to give back: Exit.LogErr still says it
		}
		at = max(0, at-int64(len(mark))-32-int64(try)*logBlock)
		l.onDisk.Store(at) // readers stop short of the cut before the file shrinks
		l.f.Truncate(at)
	}
	if at == l.written {
		return
	}
	l.cut += l.written - at
	l.written = at
	if e := l.failure.Load(); e != nil {
		l.failure.Store(&LogError{Path: e.Path, At: at, Err: e.Err})
	}
}

// logBlock is the most a file system's allocation unit is likely to be:
// what markCut gives back on its last try.
const logBlock = 64 << 10

// failed returns the write failure that stopped the log, or nil.
func (l *logFile) failed() error {
	if e := l.failure.Load(); e != nil {
		return e
	}
	return nil
}

// LogState is how far a process's output log got.
type LogState struct {
	Path string // the log file; "" without one (Config.LogPath)
	Held int64  // bytes of output it holds, from the first: reads before this cursor never skip
	Max  int64  // its cap (Config.LogMaxBytes)
	Err  error  // a *LogError when writing failed, which stopped the log at Held
}

// Log returns where the output log is (Config.LogPath) and how far it
// got so far. It does not block, and is safe to call at any time, also
// after the process ended.
func (p *Process) Log() LogState {
	p.serveSoon()
	if p.log == nil {
		return LogState{}
	}
	return LogState{Path: p.log.path, Held: p.log.onDisk.Load(), Max: p.log.max, Err: p.log.failed()}
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
