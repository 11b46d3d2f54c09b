// Package pollfd makes a protocol's standard input and output, when they
// are pipes or sockets, go through Go's poller.
//
// Go reads os.Stdin, a descriptor it inherited in blocking mode, with a
// blocking read: the reading goroutine holds its thread in the system
// call, and with one processor (GOMAXPROCS=1: a container limited to one
// CPU) the goroutine it handed a request to waits for the runtime's
// monitor to take the processor back from the blocked thread (see
// Stdio). A descriptor in non-blocking mode is read as Go reads its own
// pipes: the goroutine parks, and the thread runs the next one.
package pollfd

import (
	"io"
	"os"
	"runtime"
)

// Stdio returns a protocol's stdin and stdout read and written through
// the poller (Reader, Writer) where Go runs one thread at a time
// (GOMAXPROCS 1: a container limited to one CPU), and restore, which puts
// them back in blocking mode. Elsewhere it returns them as they are.
//
// With one processor, a blocking read of stdin held it: the goroutine
// handed a request waited for the runtime's monitor to take the
// processor back, and a prompt over ACP took 275-295 µs of wall time,
// against 72-83 µs through the poller (and half the CPU). With two, the
// blocking read leaves the other processor to run it: the wall time is
// the same either way (96-104 µs), and the poller's wake-ups cost 40%
// more CPU (91-98 µs against 64-68), so stdio stays as it is.
// (BenchmarkACPPromptOverheadProcessLongSession, acpserver.)
func Stdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer, func()) {
	if runtime.GOMAXPROCS(0) > 1 {
		return stdin, stdout, func() {}
	}
	in, restoreIn := Reader(stdin)
	out, restoreOut := Writer(stdout)
	return in, out, func() {
		restoreOut()
		restoreIn()
	}
}

// Reader returns r, when it is a pipe or a socket in blocking mode, as a
// file read through the poller, and restore, which closes that file and
// puts the descriptor back in blocking mode (the mode is the open file's,
// shared with every process that holds it: call restore before the
// program ends). Otherwise (not an *os.File, a terminal, a regular file,
// already non-blocking, another system) it returns r, and a restore that
// does nothing.
//
// The file returned holds a duplicate of r's descriptor: closing it, or
// its being collected, leaves r's open.
func Reader(r io.Reader) (io.Reader, func()) {
	if p, restore := pollableFile(r); p != nil {
		return p, restore
	}
	return r, func() {}
}

// Writer is Reader for an output.
func Writer(w io.Writer) (io.Writer, func()) {
	if p, restore := pollableFile(w); p != nil {
		return p, restore
	}
	return w, func() {}
}

func pollableFile(v any) (*os.File, func()) {
	f, ok := v.(*os.File)
	if !ok {
		return nil, nil
	}
	return pollable(f)
}
