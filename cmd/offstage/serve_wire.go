package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/offstage/offstage/journal"
)

// The wire between a face and offstage serve: JSON lines on the Unix
// socket. The face's first line is a serveHeader; after it both sides
// send frames. The face sends what its person types (in, eof), Ctrl-C
// (signal) and its window's width; the supervisor sends what to print
// (out, err) and, last, the exit code. The face's code runs in the
// supervisor (runFace with a served face): the client is a relay, so the
// session and its printer are where the work is, and a client that goes
// away takes nothing with it.
//
// Rejected: ACP as the one protocol, with run an ACP client drawing the
// terminal (the design's first idea). run's printer draws from the live
// task table (labels, the status line of running shells, /tasks); over
// ACP it would need a second renderer and a table mirror. The relay keeps
// one run, the same in process and served.

// serveHeader is a face's first line.
type serveHeader struct {
	Face string   `json:"face"` // run, tasks, stop, ping
	Args []string `json:"args,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env,omitempty"`
	TTY  [3]bool  `json:"tty"` // stdin, stdout, stderr
	// Width is the terminal's width in columns, 0 if unknown.
	Width int `json:"width,omitempty"`
	// Acks says the relay of an mcp face tells the supervisor, between
	// the lines of its client's input, how much of the output it has
	// passed on to the client (serve_acks.go), and says the end of the
	// input so, instead of half-closing the connection.
	Acks bool `json:"acks,omitempty"`
}

// frame is every later line, either way.
type frame struct {
	In     []byte `json:"in,omitempty"`
	EOF    bool   `json:"eof,omitempty"`
	Signal string `json:"signal,omitempty"` // "int": Ctrl-C; "term", "hup": the client was told to stop
	Width  int    `json:"width,omitempty"`
	Out    []byte `json:"out,omitempty"`
	Err    []byte `json:"err,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
}

// maxWireLine bounds a line on the socket: the header carries the
// environment, a frame at most a 32 KiB chunk (base64).
const maxWireLine = 4 << 20

// readWireLine reads one line of at most maxWireLine bytes.
func readWireLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxWireLine {
			return nil, fmt.Errorf("a line over %d bytes on offstage serve's socket", maxWireLine)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return nil, err
		}
	}
}

// wireWriter sends frames; safe for concurrent use. A peer that stops
// reading for writeTimeout is taken for gone: a stuck client must not
// stall the session whose printer writes to it.
type wireWriter struct {
	mu  sync.Mutex
	c   net.Conn
	enc *json.Encoder
	// failed, if set, is told the first send that fails: the peer stopped
	// reading (for writeTimeout) or went away.
	failed func(error)
	broken bool // guarded by mu: a send failed; the rest fail at once
}

const writeTimeout = 10 * time.Second

// detachGrace bounds how long a relay stopped by a signal waits for its
// face to detach and say so.
const detachGrace = 2 * time.Second

func newWireWriter(c net.Conn) *wireWriter { return &wireWriter{c: c, enc: json.NewEncoder(c)} }

func (w *wireWriter) send(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return errWireBroken
	}
	w.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	err := w.enc.Encode(v)
	if err != nil {
		w.broken = true // a frame cut in the middle: nothing after it can be read
		if w.failed != nil {
			w.failed(err)
		}
	}
	return err
}

// errWireBroken is every send after one failed.
var errWireBroken = errors.New("an earlier frame could not be sent")

// stream is an io.Writer of out or err frames.
type stream struct {
	w   *wireWriter
	err bool
}

func (s stream) Write(p []byte) (int, error) {
	f := frame{Out: p}
	if s.err {
		f = frame{Err: p}
	}
	if err := s.w.send(f); err != nil {
		return 0, err
	}
	return len(p), nil
}

// errNoServe means no supervisor runs for the state directory: no socket.
var errNoServe = errors.New("offstage serve is not running")

// errServeFenced: this process runs under no_new_privs, as every
// sandboxed command does, and offstage serve hosts nothing for it. A
// sandboxed command that reached the supervisor could have it start a
// session outside its sandbox (an outsider's finding); inside it, a
// session runs in its own process, fenced as its caller is.
var errServeFenced = errors.New("this process runs under no_new_privs, as a sandboxed command does, and offstage serve hosts nothing for it: its sessions run in this process, in its sandbox")

// socketPath is offstage serve's socket for a state directory.
func socketPath(state string) string { return filepath.Join(state, "run", "serve.sock") }

// maxSocketPath is the longest path a Unix socket can have (sun_path
// holds 108 bytes on Linux, 104 on macOS, with its NUL).
const maxSocketPath = 103

// socketFits refuses a socket path the kernel would cut or refuse.
func socketFits(sock string) error {
	if len(sock) > maxSocketPath {
		return usagef("offstage serve's socket would be %s, %d bytes; a Unix socket's path holds at most %d: pass --state-dir (or set XDG_STATE_HOME to) a shorter directory", sock, len(sock), maxSocketPath)
	}
	return nil
}

// dialServe connects to the supervisor of the journal flags' state
// directory. errNoServe when there is no socket at all.
func dialServe(jf journalFlags) (*net.UnixConn, string, error) {
	state, err := jf.dir(os.Getenv)
	if err != nil {
		return nil, "", errNoServe
	}
	sock := socketPath(state)
	if _, err := os.Lstat(sock); errors.Is(err, os.ErrNotExist) {
		return nil, sock, errNoServe
	}
	if noNewPrivs() {
		return nil, sock, errServeFenced
	}
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return nil, sock, err
	}
	return c.(*net.UnixConn), sock, nil
}

// exitStatus is a served command's exit code: the supervisor printed its
// error already.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// relay runs a face's command in offstage serve: it sends the header,
// then this process's input, Ctrl-C and window width, and prints what
// comes back, until the exit code. SIGTERM or SIGHUP (the terminal
// closed) just drop the connection: the session detaches.
func relay(ctx context.Context, c *net.UnixConn, face string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	defer c.Close()
	_, servePID, _ := peer(c) // 0 where the kernel does not say
	cwd, _ := os.Getwd()
	w := newWireWriter(c)
	h := serveHeader{Face: face, Args: args, Dir: cwd, Env: os.Environ(),
		TTY: [3]bool{isTTY(stdin), isTTY(stdout), isTTY(stderr)}, Width: terminalWidth(stdout)}
	if err := w.send(h); err != nil {
		return fmt.Errorf("offstage serve closed the connection before the %s began (%v): it does when the connection comes from another user, and when it stops; its log says which", face, err)
	}
	go func() { // left behind at exit, blocked on a terminal: main exits
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 && w.send(frame{In: buf[:n]}) != nil {
				return
			}
			if err != nil {
				w.send(frame{EOF: true})
				return
			}
		}
	}()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	var gaveUp atomic.Bool // a stop signal was not answered within detachGrace
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == os.Interrupt {
					w.send(frame{Signal: "int"})
				} else {
					w.send(frame{Width: terminalWidth(stdout)})
				}
			case <-ctx.Done():
				// SIGTERM or SIGHUP (the terminal closed): detach. The
				// supervisor is told which, so that the face says where
				// its work went and exits as stopped; a supervisor that
				// does not answer within detachGrace is left.
				if s, ok := stoppedBy(ctx); ok && w.send(frame{Signal: strings.ToLower(strings.TrimPrefix(s.name(), "SIG"))}) == nil {
					select {
					case <-done:
						return
					case <-time.After(detachGrace):
						gaveUp.Store(true)
					}
				}
				c.Close()
				return
			case <-done:
				return
			}
		}
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		line, err := readWireLine(br)
		if err != nil {
			if ctx.Err() != nil {
				if s, ok := stoppedBy(ctx); ok {
					if gaveUp.Load() {
						fmt.Fprintf(stderr, "offstage: offstage serve did not answer within %s of the %s; the session stays with it and detaches when it reads again (offstage sessions lists it).\n", detachGrace, s.name())
					}
					return s
				}
				return nil
			}
			if died(servePID) {
				// Killed, or crashed: the session went with it, and
				// attaching again cannot bring it back (an outsider
				// was told it could).
				return fmt.Errorf("offstage serve (pid %d) ended before the %s did (%v): its session ended with it, and its tasks were stopped (offstage tasks says how each ended); offstage run --resume continues the conversation", servePID, face, err)
			}
			return fmt.Errorf("offstage serve closed the connection before the %s ended (%v): it does when it stops, when the connection comes from another user, and when this process does not read for %s (its session then detaches: offstage run --attach joins it again); offstage tasks and offstage serve's log say which", face, err, writeTimeout)
		}
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			return fmt.Errorf("offstage serve sent a line that is not a frame: %v", err)
		}
		switch {
		case f.Out != nil:
			stdout.Write(f.Out)
		case f.Err != nil:
			stderr.Write(f.Err)
		case f.Exit != nil:
			if *f.Exit == 0 {
				return nil
			}
			return exitStatus(*f.Exit)
		}
	}
}

// died reports whether the process pid has ended (gone, or a zombie),
// waiting a moment for it to: a supervisor killed closes its connections
// as it dies. False for pid 0 (unknown).
func died(pid int) bool {
	if pid <= 0 {
		return false
	}
	for range 10 {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || journal.Exited(pid) {
			return true // gone, or dead and not yet reaped (an outsider's detached supervisor stayed a zombie 1.7 s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// absPaths makes the path flags among args absolute against abs, for a
// command that runs in the supervisor, whose directory is not the
// face's. Flags and arguments may interleave (see parse).
func absPaths(fs *flag.FlagSet, args []string, abs func(string) string) []string {
	paths := map[string]bool{"script": true, "prompt-file": true, "dir": true, "agents": true, "sandbox-write": true, "state-dir": true}
	out := slicesClone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name, value, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		fl := fs.Lookup(name)
		if fl == nil {
			continue
		}
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		switch {
		case inline && paths[name]:
			out[i] = "--" + name + "=" + abs(value)
		case !inline && i+1 < len(out):
			i++
			if paths[name] {
				out[i] = abs(out[i])
			}
		}
	}
	return out
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// closerFunc is a func as an io.Closer.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// lastAckWait bounds how long a relay whose client went waits for the
// supervisor to take its last ack before it drops the connection.
const lastAckWait = 200 * time.Millisecond

// relayStream runs a stream face (acp, mcp) in offstage serve: after the
// header, the connection is the protocol's own bytes, both ways. The end
// of stdin half-closes it; SIGTERM or SIGHUP drop it. Either way the
// supervisor detaches the sessions; nothing ends. With acks (the
// supervisor takes them: pong.Acks), an mcp face's relay tells the
// supervisor how much of its output it has passed on (relayAcks), and
// says the end of stdin so instead of half-closing.
func relayStream(ctx context.Context, c *net.UnixConn, face string, acks bool, args []string, stdin io.Reader, stdout io.Writer) error {
	defer c.Close()
	cwd, _ := os.Getwd()
	h := serveHeader{Face: face, Args: args, Dir: cwd, Env: os.Environ(), Acks: acks}
	if err := newWireWriter(c).send(h); err != nil {
		return fmt.Errorf("offstage serve closed the connection before the %s began (%v): it does when the connection comes from another user, and when it stops; its log says which", face, err)
	}
	c.SetWriteDeadline(time.Time{})
	_, pid, _ := peer(c) // the supervisor's, for what the user reads
	var inputEnded, clientGone atomic.Bool
	var ra *relayAcks
	if acks {
		ra = newRelayAcks(c, stdout)
		defer ra.stop()
	}
	go func() { // left behind at exit, blocked on stdin: main exits
		if ra != nil {
			ra.copyIn(stdin)
			inputEnded.Store(true)
			return
		}
		io.Copy(c, stdin)
		inputEnded.Store(true)
		c.CloseWrite()
	}()
	stop := context.AfterFunc(ctx, func() {
		if ra != nil { // what the client read before it stopped the relay counts
			c.SetWriteDeadline(time.Now().Add(lastAckWait))
			ra.tellLast()
		}
		c.Close()
	})
	defer stop()
	// A client that died closed its end of our output, not only of our
	// input: the connection is dropped, not half-closed, so the
	// supervisor frees the session at once (its foreground command ends,
	// ended_by session), as it does for a client of its own, instead of
	// waiting its drain for answers nobody will read (an outsider's
	// finding: 5 s), and its write of an answer fails there, so what the
	// answer carried is taken back (closeWhenReaderGone).
	unwatch := closeWhenReaderGone(stdout, closerFunc(func() error {
		clientGone.Store(true)
		if ra != nil { // what the client read counts, though it went mid-line
			c.SetWriteDeadline(time.Now().Add(lastAckWait))
			ra.tellNow()
		}
		return c.Close()
	}))
	defer unwatch()
	copied := make(chan error, 1)
	go func() {
		if ra == nil {
			_, err := io.Copy(stdout, c)
			copied <- err
			return
		}
		err := ra.copyOut(stdout)
		if err != nil {
			// Its client went (a write to it failed before the watcher
			// saw), or the connection broke: what the client read counts,
			// though the tell goroutine has not told it yet.
			c.SetWriteDeadline(time.Now().Add(lastAckWait))
			ra.tellNow()
		}
		copied <- err
	}()
	var err error
	select {
	case err = <-copied:
	case <-ctx.Done():
		// SIGTERM or SIGHUP: the connection is closed (stop), which ends
		// the copy, unless a write to a client that reads nothing holds
		// it (an outsider's finding: alive 30 s after SIGTERM). What
		// that write holds never reaches the client, and the supervisor,
		// told nothing of it, takes back what it carried.
		select {
		case err = <-copied:
		case <-time.After(detachGrace):
		}
	}
	switch {
	case ctx.Err() != nil || clientGone.Load():
		return nil
	case err == nil && !inputEnded.Load():
		// The supervisor ended it, not the client: it was stopped, or
		// offstage sessions close closed the session, or it died (killed:
		// an outsider's finding; from here its end is not told from a
		// stop, which also closes the connection as it exits).
		return fmt.Errorf("offstage serve (pid %d) closed the %s connection while its client was still there: it was stopped, offstage sessions close ended the session, or it died (its log says which); offstage tasks says what became of its work", pid, face)
	}
	return err
}
