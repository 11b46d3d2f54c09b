package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/task"
)

const serveUsage = `Usage: offstage serve [flags]
       offstage serve stop [--state-dir DIR]
       offstage serve --print-unit [flags]

Runs the supervisor: one process per user and state directory that hosts
the sessions of offstage run, offstage mcp on stdio and offstage acp, so
that they and their work outlive the terminal or client that started
them. While it runs, those host their sessions there and say so in one
line (--no-serve keeps a session in its own process, the default when no
supervisor answers). A client that goes away (end of its input, Ctrl-C
twice, the terminal closed, SIGKILL) detaches: its session and its running
work go on, contained, limited and recorded (an MCP session with nothing
running closes at once: no MCP client can come back to it).
offstage run --attach [SESSION] joins a live session again: the latest
with no client by default; it shows what happened meanwhile and delivers
each result the model has not seen, once. /quit ends a session;
offstage sessions lists them, offstage sessions close ID ends one.

It listens on a Unix socket, STATE/run/serve.sock (0600, in a 0700
directory; a connection from another user is refused), never TCP; one
supervisor per state directory (a lock, STATE/run/serve.lock). It runs in
the foreground and logs to stderr; --print-unit writes a systemd --user
unit that starts it at login.

A session with no client and no unfinished task for --idle closes (its
end is recorded as by the session: "serve: idle policy"). offstage serve
stop, SIGTERM or Ctrl-C stop it: every session closes, its tasks end
with ended_by supervisor, every process is reaped, the journal is
written and the socket removed. If it is killed (SIGKILL, a crash), the
keeper kills its work and the next offstage to start marks those tasks
orphaned (ended_by host).`

const serveExamples = `  offstage serve --detach                            # in the background; then, in any terminal:
  offstage run --script examples/scripted/hello.json "run the tests"
  offstage run --attach                              # the latest session with no client
  offstage serve stop
  offstage serve --print-unit > ~/.config/systemd/user/offstage.service && systemctl --user enable --now offstage
`

// defaultIdle is how long a session with no client and no running work
// lives under offstage serve.
const defaultIdle = 24 * time.Hour

func serveCommand(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var jf journalFlags
	jf.register(fs)
	fs.Lookup("no-journal").Usage = "" // refused below, saying why: not in --help
	idle := fs.Duration("idle", defaultIdle, "close a session that has had no client and no running or queued task for this long")
	unit := fs.Bool("print-unit", false, "write a systemd --user unit that runs offstage serve with these flags, and exit")
	detach := fs.Bool("detach", false, "start offstage serve in the background (its log in STATE/run/serve.log) and return once it answers")
	rest, err := parse(fs, args, serveUsage, serveExamples, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 1 && rest[0] == "stop":
		return serveStop(ctx, jf, stdout, stderr)
	case len(rest) > 0:
		return usagef("offstage serve takes no arguments but stop (got %q)", rest[0])
	case *idle <= 0:
		return usagef("--idle must be positive (got %s); a long one (--idle 720h) keeps sessions a month", *idle)
	case jf.noJournal:
		return usagef("offstage serve records what its sessions run; --no-journal is for a run in its own process (offstage run --no-serve --no-journal)")
	case *unit:
		// The unit runs elsewhere (systemd's directory, its environment):
		// its paths absolute, and the state directory named when this
		// shell's XDG_STATE_HOME chose it (an outsider's unit served
		// another directory than its clients looked in).
		args = absPaths(fs, args, func(p string) string {
			if a, err := filepath.Abs(p); err == nil {
				return a
			}
			return p
		})
		if state, err := jf.dir(os.Getenv); err == nil && jf.state == "" && strings.HasPrefix(jf.dirSource(os.Getenv), "from XDG_STATE_HOME") {
			args = append(args, "--state-dir", state)
		}
		return printUnit(stdout, args)
	}
	jf.required = true
	state, err := jf.dir(os.Getenv)
	if err != nil {
		return err
	}
	if *detach {
		return serveDetached(ctx, state, jf, args, stdout)
	}
	// Started by --detach: until it serves, what stops it is also told
	// to the starter, which may not be able to read the log (a full disk
	// leaves it empty: an outsider's finding).
	report := startupReport()
	defer func() {
		if report != nil {
			if err != nil {
				fmt.Fprintln(report, "offstage:", err)
			}
			report.Close()
		}
	}()
	hideWithheld(environ.Policy{}, stderr) // its own secrets; the faces' come over the socket, never into its environment block
	ln, unlock, err := listenServe(state)
	if err != nil {
		return err
	}
	defer unlock()
	ctx, stopSignals := cancelOnInterrupt(ctx)
	defer stopSignals()
	ctx, requestStop := context.WithCancelCause(ctx)
	defer requestStop(nil)
	var sup *supervisor
	defer func() {
		if sup != nil {
			sup.released(err) // last, after the journal is written: serve stop returns then
		}
	}()
	reports := newJournalReports(stderr)
	rec, err := openRecorder(ctx, jf, reports)
	if err != nil {
		ln.Close()
		return err
	}
	defer rec.closeInto(&err)
	tracer, closeTracing, err := openTracing(ctx, stderr)
	if err != nil {
		ln.Close()
		return err
	}
	defer closeTracing()
	sup = newSupervisor(rec, tracer, *idle, warnings(stderr), requestStop)
	sup.reports = reports
	fmt.Fprintf(stderr, "offstage serve: pid %d, serving %s; sessions with no client and no running work close after %s.\n", os.Getpid(), ln.Addr(), *idle)
	if report != nil {
		report.Close() // started: the starter reads the log from here on
		report = nil
	}
	accepted := make(chan struct{})
	go func() { defer close(accepted); sup.accept(ln) }()
	idled := make(chan struct{})
	go func() { defer close(idled); sup.idleLoop(ctx) }()
	<-ctx.Done()
	how := context.Cause(ctx).Error()
	if s, ok := stoppedBy(ctx); ok {
		how = s.name()
	}
	why := "offstage serve was stopped (" + how + ")"
	ln.Close() // no new face; the socket file goes with it
	<-accepted
	<-idled
	n := sup.shutdown(&task.EndError{By: task.BySupervisor, Reason: why, Err: task.ErrClosed})
	fmt.Fprintf(stderr, "offstage serve: stopped: %s closed, every process reaped.\n", text.Plural(n, "session"))
	return nil
}

// listenServe takes the state directory's supervisor lock and listens on
// its socket: STATE/run, 0700 and this user's (journal.CheckDir), the
// socket 0600. unlock releases the lock.
func listenServe(state string) (*net.UnixListener, func(), error) {
	dir := filepath.Join(state, "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, usagef("cannot make the socket's directory: %v", err)
	}
	if err := journal.CheckDir(dir); err != nil {
		return nil, nil, usagef("%v", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "serve.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, usagef("cannot open the supervisor's lock: %v", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(io.LimitReader(lock, 32))
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil, usagef("offstage serve already runs for %s (pid %s); offstage serve stop stops it", state, strings.TrimSpace(string(pid)))
		}
		return nil, nil, usagef("cannot lock %s: %v", lock.Name(), err)
	}
	lock.Truncate(0)
	lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	sock := socketPath(state)
	if err := socketFits(sock); err != nil {
		lock.Close()
		return nil, nil, err
	}
	// What is in the socket's place is a dead supervisor's socket: the
	// lock says none runs. Something that cannot be removed (a directory
	// with files in it) is said so; listening would say "address already
	// in use", as if a supervisor ran there.
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		lock.Close()
		what := "something"
		if fi, serr := os.Lstat(sock); serr == nil {
			what = "a " + fileKind(fi.Mode())
		}
		return nil, nil, usagef("cannot listen on %s: %s is in the socket's place and cannot be removed (%v); move it away and start again", sock, what, errors.Unwrap(err))
	}
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		lock.Close()
		return nil, nil, usagef("cannot listen on %s: %v", sock, err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		lock.Close()
		return nil, nil, fmt.Errorf("making the socket private: %w", err)
	}
	return ln, func() { lock.Close() }, nil
}

// fileKind names a file's type, as a person says it.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}

// supervisor is offstage serve: the sessions it hosts, and the faces
// (connections) driving them.
type supervisor struct {
	rec    *recorder
	tracer trace.TracerProvider
	idle   time.Duration
	logger *slog.Logger
	stop   context.CancelCauseFunc // asks serveCommand to stop
	// life is every session's context. A stop does not cancel it: each
	// session is closed with the supervisor's cause first (CloseCause),
	// so its tasks say who ended them.
	life context.Context
	// faces is the faces' context, cancelled once every session is
	// closed: the connections then end.
	faces      context.Context
	endFaces   context.CancelFunc
	running    sync.WaitGroup // connection handlers
	stoppersMu sync.Mutex
	stoppers   []net.Conn // guarded by stoppersMu: serve stop clients, answered at the very end

	acp *acpserver.Keeper // the ACP faces' sessions, kept across their connections

	reports *journalReports // the journal's reports, for the runs attached; nil in tests

	mu       sync.Mutex
	sessions map[string]*hosted // guarded by mu
	stopping bool               // guarded by mu
}

func newSupervisor(rec *recorder, tracer trace.TracerProvider, idle time.Duration, logger *slog.Logger, stop context.CancelCauseFunc) *supervisor {
	faces, endFaces := context.WithCancel(context.Background())
	return &supervisor{rec: rec, tracer: tracer, idle: idle, logger: logger, stop: stop,
		life: context.Background(), faces: faces, endFaces: endFaces, sessions: map[string]*hosted{},
		acp: acpserver.NewKeeper(context.Background())}
}

// accept serves each connection until ln is closed.
func (sup *supervisor) accept(ln *net.UnixListener) {
	for {
		c, err := ln.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			sup.logger.Warn("serve: accept: " + err.Error())
			time.Sleep(100 * time.Millisecond) // out of descriptors, say: not a busy loop
			continue
		}
		sup.running.Add(1)
		go func() {
			defer sup.running.Done()
			sup.serveConn(c)
		}()
	}
}

// serveConn checks who is calling (this user only), reads the header and
// runs the face it asks for.
func (sup *supervisor) serveConn(c *net.UnixConn) {
	keep := false
	defer func() {
		if !keep {
			c.Close()
		}
	}()
	uid, pid, err := peer(c)
	if err != nil || uid != os.Getuid() {
		sup.logger.Warn(fmt.Sprintf("serve: refused a connection from uid %d pid %d: only uid %d may use it (%v)", uid, pid, os.Getuid(), err))
		return
	}
	if fenced, err := peerNoNewPrivs(c, pid); fenced || err != nil {
		// A sandboxed command (no_new_privs) must not have sessions
		// started outside its sandbox, nor reach the user's others.
		switch {
		case fenced:
			sup.logger.Warn(fmt.Sprintf("serve: refused a connection from pid %d: it runs under no_new_privs, as a sandboxed command does", pid))
		case errors.Is(err, os.ErrNotExist):
			// Gone before it was read (a client that gave up waiting).
			sup.logger.Info(fmt.Sprintf("serve: dropped a connection from pid %d: the process had exited before it could be checked", pid))
		default:
			sup.logger.Warn(fmt.Sprintf("serve: refused a connection from pid %d: whether it runs under no_new_privs cannot be read (%v)", pid, err))
		}
		return
	}
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := readWireLine(br)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var h serveHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return
	}
	w := newWireWriter(c)
	switch h.Face {
	case "run":
		sup.serveRun(c, br, w, h)
	case "acp":
		sup.serveStream(c, br, h, acpFace)
	case "mcp":
		sup.serveStream(c, br, h, mcpFace)
	case "tasks", "sessions":
		w.send(sup.live())
	case "close":
		var a closeAnswer
		if len(h.Args) != 1 {
			a.Err = "offstage sessions close takes one session id"
		} else if id, n, err := sup.closeSession(h.Args[0], closeBy(pid)); err != nil && id == "" {
			a.Err = err.Error()
		} else {
			a.ID, a.Ended = id, n
			if err != nil {
				a.Err = err.Error()
			}
			sup.logger.Warn(fmt.Sprintf("closed session %s (offstage sessions close, from pid %d): %s ended", id, pid, text.Plural(n, "unfinished task")))
		}
		w.send(a)
	case "ping":
		w.send(pong{PID: os.Getpid(), Acks: true})
	case "stop":
		keep = true
		sup.stoppersMu.Lock()
		sup.stoppers = append(sup.stoppers, c)
		sup.stoppersMu.Unlock()
		sup.stop(fmt.Errorf("offstage serve stop, from pid %d", pid))
	default:
		code := 2
		w.send(frame{Err: []byte(fmt.Sprintf("offstage serve: no face %q (this offstage is %s)\n", h.Face, version())), Exit: &code})
	}
}

// serveRun runs offstage run for a client: its input, Ctrl-C and width
// come in frames, its output goes back in frames, then its exit code.
// The client going away cancels the face's context (the session
// detaches); it does not end the session.
func (sup *supervisor) serveRun(c *net.UnixConn, br *bufio.Reader, w *wireWriter, h serveHeader) {
	ctx, gone := context.WithCancelCause(sup.faces)
	defer gone(nil)
	w.failed = func(err error) {
		gone(fmt.Errorf("its client stopped reading (%v)", err))
		c.Close() // it gets the end of the connection when it reads again
	}
	stdinR, stdinW := io.Pipe()
	ints, sizes := newFanout(), newFanout()
	var width atomic.Int64
	width.Store(int64(h.Width))
	read := make(chan struct{})
	go func() {
		defer close(read)
		in := make(chan []byte, 1024) // the input waits here while the face does not read it, so Ctrl-C still comes through
		defer close(in)
		go func() {
			for b := range in {
				if b == nil {
					stdinW.Close()
				} else {
					stdinW.Write(b)
				}
			}
			stdinW.Close()
		}()
		for {
			line, err := readWireLine(br)
			if err != nil {
				gone(errors.New("its client went away"))
				return
			}
			var f frame
			if json.Unmarshal(line, &f) != nil {
				continue
			}
			switch {
			case f.In != nil:
				in <- f.In
			case f.EOF:
				in <- nil
			case f.Signal == "int":
				ints.send(os.Interrupt)
			case f.Signal == "term" || f.Signal == "hup":
				// The client's process was told to stop: its face ends
				// as the client going away does (the session detaches),
				// and says so with the signal's exit code.
				sig := syscall.SIGTERM
				if f.Signal == "hup" {
					sig = syscall.SIGHUP
				}
				gone(stopSignal{sig: sig})
			case f.Width > 0:
				width.Store(int64(f.Width))
				sizes.send(os.Interrupt) // any value: the width changed
			}
		}
	}()
	env := h.Env
	f := &face{
		getenv:     func(k string) string { return envValue(env, k) },
		environ:    env,
		cwd:        h.Dir,
		tty:        h.TTY,
		width:      func() int { return int(width.Load()) },
		interrupts: ints.subscribe,
		resizes:    sizes.subscribe,
		host:       sup,
		conn:       ctx,
	}
	stderr := stream{w: w, err: true}
	err := runFace(ctx, f, h.Args, stdinR, stream{w: w}, stderr)
	code := exitCode(err, stderr)
	w.send(frame{Exit: &code})
	c.CloseRead() // the reader stops
	<-read
	stdinR.Close()
}

// serveStream runs a stream face (acp) on a connection: after the
// header, the protocol's own bytes both ways. What it writes on stderr
// goes to the supervisor's log.
func (sup *supervisor) serveStream(c *net.UnixConn, br *bufio.Reader, h serveHeader, run func(context.Context, *face, []string, io.Reader, io.Writer, io.Writer) error) {
	env := h.Env
	in := &cutReader{r: br}
	var out io.Writer = c
	if h.Acks && h.Face == "mcp" {
		rw := mcpserver.NewRelayWriter(c)
		in.r, out = &ackInput{br: br, out: rw, conn: c, cut: &in.cut}, rw
	}
	f := &face{getenv: func(k string) string { return envValue(env, k) }, environ: env, cwd: h.Dir,
		width: func() int { return 0 }, interrupts: newFanout().subscribe, resizes: newFanout().subscribe,
		host: sup, conn: sup.faces, endInput: func() {
			in.cut.Store(true)
			c.SetReadDeadline(time.Now())
			// What is answered after it still has a bound: a client that
			// stopped reading cannot hold the stop up.
			c.SetWriteDeadline(time.Now().Add(streamEndWait))
		}}
	logw := logWriter{sup.logger, h.Face}
	if err := run(sup.faces, f, h.Args, in, out, logw); err != nil {
		sup.logger.Warn(fmt.Sprintf("serve: %s: %v", h.Face, err))
	}
}

// streamEndWait bounds how long, once the supervisor ended a stream
// face's input (face.endInput), writing what is answered in flight may
// take: mcpserver.DrainGrace, with room.
const streamEndWait = 10 * time.Second

// errInputCut is what a stream face reads once the supervisor ended its
// input: the protocol's transport says so to the requests it abandons.
var errInputCut = errors.New("offstage serve ended the connection: it was stopped, or offstage sessions close ended the session")

// cutReader is a stream face's input, which face.endInput ends: a read
// the deadline interrupts fails with errInputCut.
type cutReader struct {
	r   io.Reader
	cut atomic.Bool
}

func (r *cutReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && r.cut.Load() {
		err = errInputCut
	}
	return n, err
}

// logWriter writes a face's stderr lines to the supervisor's log.
type logWriter struct {
	logger *slog.Logger
	face   string
}

func (w logWriter) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		if line = strings.TrimSpace(line); line != "" {
			w.logger.Warn(w.face + ": " + line)
		}
	}
	return len(p), nil
}

// envValue is the value of key in env (KEY=VALUE lines), the last wins.
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// fanout hands a served face's Ctrl-C (or resizes) to whoever listens.
type fanout struct {
	mu   sync.Mutex
	subs map[chan os.Signal]bool // guarded by mu
}

func newFanout() *fanout { return &fanout{subs: map[chan os.Signal]bool{}} }

func (f *fanout) subscribe() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 2)
	f.mu.Lock()
	f.subs[ch] = true
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs, ch)
		f.mu.Unlock()
	}
}

func (f *fanout) send(s os.Signal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- s:
		default: // as signal.Notify: a full channel drops it
		}
	}
}

// idleLoop closes the sessions that have been idle for sup.idle: no face,
// no unfinished task. It checks a sixtieth of the period at a time (at
// most a minute), so a session closes within idle plus two of those.
func (sup *supervisor) idleLoop(ctx context.Context) {
	tick := min(sup.idle/60, time.Minute)
	t := time.NewTicker(max(tick, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, h := range sup.idleAt(now) {
				why := fmt.Sprintf("serve: idle policy: no client and no running work for %s", sup.idle)
				h.s.CloseCause(context.Background(), task.Closed(why))
				sup.logger.Warn(fmt.Sprintf("closed session %s (%s)", h.s.ID(), why))
			}
			why := fmt.Sprintf("serve: idle policy: no editor and no running work for %s", sup.idle)
			if n := sup.acp.CloseIdle(now, sup.idle, task.Closed(why)); n > 0 {
				sup.logger.Warn(fmt.Sprintf("closed %d ACP sessions (%s)", n, why))
			}
		}
	}
}

// idleAt takes out of the table the sessions idle for sup.idle at now,
// and starts the idle clock of those that just became quiet.
func (sup *supervisor) idleAt(now time.Time) []*hosted {
	sup.mu.Lock()
	defer sup.mu.Unlock()
	var out []*hosted
	for id, h := range sup.sessions {
		busy := running(h.s.Table()) > 0
		h.mu.Lock()
		switch {
		case h.attached || busy:
			h.quiet = time.Time{}
		case h.quiet.IsZero():
			h.quiet = now
		case now.Sub(h.quiet) >= sup.idle:
			delete(sup.sessions, id)
			out = append(out, h)
		}
		h.mu.Unlock()
	}
	return out
}

// shutdown closes every session with cause, concurrently (each reaps its
// processes within 20 s), then ends the faces and waits for them. It
// returns how many sessions it closed.
func (sup *supervisor) shutdown(cause error) int {
	sup.mu.Lock()
	sup.stopping = true
	all := make([]*hosted, 0, len(sup.sessions))
	for _, h := range sup.sessions {
		all = append(all, h)
	}
	clear(sup.sessions)
	sup.mu.Unlock()
	n := len(all) + sup.acp.Len()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := sup.acp.Close(cause); err != nil {
			sup.logger.Warn("serve: closing the ACP sessions: " + err.Error())
		}
	})
	for _, h := range all {
		wg.Go(func() {
			if err := h.s.CloseCause(context.Background(), cause); err != nil {
				sup.logger.Warn(fmt.Sprintf("serve: closing session %s: %v", h.s.ID(), err))
			}
		})
	}
	wg.Wait()
	sup.endFaces()
	sup.running.Wait()
	return n
}

// released answers every serve stop client: the supervisor has stopped,
// with err if it ended in one (the journal lost records, say), which the
// client says and ends with.
func (sup *supervisor) released(err error) {
	sup.stoppersMu.Lock()
	defer sup.stoppersMu.Unlock()
	for _, c := range sup.stoppers {
		f := frame{Exit: new(int)} // 0: a stop that ends without it was cut short
		if err != nil {
			f.Err, *f.Exit = []byte("offstage: "+err.Error()+"\n"), 1
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		newWireWriter(c).send(f)
		c.Close()
	}
}

// stopping reports whether the supervisor is stopping.
func (sup *supervisor) isStopping() bool {
	sup.mu.Lock()
	defer sup.mu.Unlock()
	return sup.stopping
}

// liveSession is a hosted session as offstage tasks shows it.
type liveSession struct {
	ID       string     `json:"id"`
	Face     string     `json:"face"`
	Attached bool       `json:"attached"`
	Started  time.Time  `json:"started"`
	Left     time.Time  `json:"left,omitzero"` // when its last client went
	Tasks    []liveTask `json:"tasks"`
}

// liveTask is a task of a live session, named as offstage tasks --json
// names a task's fields (it gave Go's field names and a state number).
type liveTask struct {
	ID        string        `json:"task_id"`
	Kind      string        `json:"kind"`
	Label     string        `json:"label"`
	Owner     string        `json:"owner,omitempty"`
	State     journal.State `json:"state"`
	Created   time.Time     `json:"created"`
	Finished  time.Time     `json:"finished,omitzero"`
	ExitCode  *int          `json:"exit_code,omitempty"`
	Delivered bool          `json:"delivered"`
	EndedBy   string        `json:"ended_by,omitempty"`
	EndReason string        `json:"end_reason,omitempty"`
}

func liveTasks(is []task.Info) []liveTask {
	out := make([]liveTask, len(is))
	for k, i := range is {
		out[k] = liveTask{ID: i.ID, Kind: i.Kind, Label: i.Label, Owner: i.Owner, State: journal.StateOf(i.State), Created: i.Created,
			Finished: i.Finished, ExitCode: i.ExitCode, Delivered: i.Delivered, EndedBy: i.EndedBy, EndReason: i.EndReason}
	}
	return out
}

// closeAnswer is the supervisor's answer to offstage sessions close: the
// session closed and how many unfinished tasks it ended, or why not.
type closeAnswer struct {
	ID    string `json:"id,omitempty"`
	Ended int    `json:"ended"`
	Err   string `json:"error,omitempty"`
}

// liveState is the supervisor's answer to offstage tasks.
type liveState struct {
	PID      int           `json:"pid"`
	Sessions []liveSession `json:"sessions"`
	ACP      int           `json:"acp"` // ACP sessions kept, with a client or not
}

// live is what the supervisor hosts now.
func (sup *supervisor) live() liveState {
	sup.mu.Lock()
	all := make([]*hosted, 0, len(sup.sessions))
	for _, h := range sup.sessions {
		all = append(all, h)
	}
	sup.mu.Unlock()
	st := liveState{PID: os.Getpid(), Sessions: []liveSession{}, ACP: sup.acp.Len()}
	for _, h := range all {
		h.mu.Lock()
		ls := liveSession{ID: h.s.ID(), Face: h.face, Attached: h.attached, Started: h.started, Left: h.left}
		h.mu.Unlock()
		ls.Tasks = liveTasks(h.s.Table().List())
		st.Sessions = append(st.Sessions, ls)
	}
	for _, k := range sup.acp.Sessions() {
		st.Sessions = append(st.Sessions, liveSession{ID: k.ID, Face: "acp", Attached: k.Attached, Started: k.Started, Left: k.Left, Tasks: liveTasks(k.Tasks)})
	}
	slices.SortFunc(st.Sessions, func(a, b liveSession) int { return a.Started.Compare(b.Started) })
	return st
}

// detachWait bounds how long serve --detach waits for the supervisor it
// started to answer.
const detachWait = 30 * time.Second

// serveDetached starts offstage serve with args (less --detach) in a
// session of its own, its output to STATE/run/serve.log, and returns once
// it answers on its socket: the on-demand start, for a script or a
// shell's profile. One already running is left as it is.
func serveDetached(ctx context.Context, state string, jf journalFlags, args []string, stdout io.Writer) error {
	if c, _, err := dialServe(jf); err == nil {
		c.Close()
		fmt.Fprintf(stdout, "offstage serve already runs for %s; offstage serve stop stops it.\n", state)
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding offstage's path to start it: %w", err)
	}
	cmdArgs := []string{"serve"}
	for _, a := range args {
		if a != "--detach" && a != "-detach" && a != "--detach=true" && a != "-detach=true" {
			cmdArgs = append(cmdArgs, a)
		}
	}
	dir := filepath.Join(state, "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("offstage serve's directory: %w", err)
	}
	logPath := filepath.Join(dir, "serve.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("offstage serve's log: %w", err)
	}
	defer logf.Close()
	said, saidW, err := os.Pipe() // what stops it before it serves (startupReport)
	if err != nil {
		return fmt.Errorf("starting offstage serve: %w", err)
	}
	defer said.Close()
	cmd := exec.Command(exe, cmdArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{saidW} // its fd 3
	cmd.Env = append(os.Environ(), serveReportEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal to hang up on it
	err = cmd.Start()
	saidW.Close()
	if err != nil {
		return fmt.Errorf("starting offstage serve: %w", err)
	}
	var why bytes.Buffer
	heard := make(chan struct{})
	go func() {
		defer close(heard)
		io.Copy(&why, io.LimitReader(said, 8<<10))
	}()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.NewTimer(detachWait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// Another serve --detach may start one at the same time: one of them
	// takes the lock, the others exit. Which answers says which.
	for {
		if pid, ok := servePID(jf); ok {
			if pid == cmd.Process.Pid {
				fmt.Fprintf(stdout, "offstage serve started in the background: pid %d, log %s; offstage serve stop stops it.\n", pid, logPath)
			} else {
				fmt.Fprintf(stdout, "offstage serve already runs for %s (pid %d, started meanwhile); offstage serve stop stops it.\n", state, pid)
			}
			return nil
		}
		select {
		case <-exited:
			if pid, ok := servePID(jf); ok {
				fmt.Fprintf(stdout, "offstage serve already runs for %s (pid %d, started meanwhile); offstage serve stop stops it.\n", state, pid)
				return nil
			}
			select {
			case <-heard: // the pipe's end: it exited
			case <-time.After(time.Second): // something it started holds it
			}
			if w := strings.TrimSpace(why.String()); w != "" && isClosed(heard) {
				return fmt.Errorf("offstage serve exited at once (%v), saying:\n%s\n(its log is %s)", cmd.ProcessState, w, logPath)
			}
			if tail := logTail(logPath, 2<<10); tail != "" {
				return fmt.Errorf("offstage serve exited at once (%v); its log %s ends:\n%s", cmd.ProcessState, logPath, tail)
			}
			return fmt.Errorf("offstage serve exited at once (%v), and its log %s is empty (could it be written? df %s says whether its disk is full)", cmd.ProcessState, logPath, dir)
		case <-deadline.C:
			return fmt.Errorf("offstage serve (pid %d) does not answer after %s; its log is %s", cmd.Process.Pid, detachWait, logPath)
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// serveReportEnv names the descriptor on which a supervisor started by
// --detach says what stopped it before it served (startupReport).
const serveReportEnv = "OFFSTAGE_SERVE_REPORT"

// startupReport returns the pipe of serveReportEnv, or nil when this
// supervisor was not started by --detach. The variable is taken out of
// the environment, the descriptor kept from what it starts; one that is
// not a pipe (the variable set by hand) is left alone.
func startupReport() *os.File {
	v := os.Getenv(serveReportEnv)
	os.Unsetenv(serveReportEnv)
	if v != "3" {
		return nil
	}
	var st syscall.Stat_t
	if syscall.Fstat(3, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil
	}
	syscall.CloseOnExec(3)
	return os.NewFile(3, "offstage serve's report")
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// servePID is the pid of the supervisor that answers for jf's state
// directory; false if none answers.
func servePID(jf journalFlags) (int, bool) {
	p, _, err := pingServe(jf)
	return p.PID, err == nil
}

// pingWait bounds how long a supervisor has to answer a ping.
const pingWait = 5 * time.Second

// pong is a supervisor's answer to a ping.
type pong struct {
	PID int `json:"pid"`
	// Acks says the supervisor takes a relayed mcp face's
	// acknowledgements (serveHeader.Acks); one that predates them does
	// not say so.
	Acks bool `json:"acks,omitempty"`
}

// pingServe asks the supervisor of jf's state directory for its pid:
// dialServe's error when it cannot connect, another when it took the
// connection but did not answer within pingWait (stopped, stuck).
func pingServe(jf journalFlags) (p pong, sock string, err error) {
	c, sock, err := dialServe(jf)
	if err != nil {
		return p, sock, err
	}
	defer c.Close()
	if stopped := stoppedPeer(c); stopped != nil {
		// It would not answer: not waited for (pingWait) in vain.
		return p, sock, stopped
	}
	c.SetDeadline(time.Now().Add(pingWait))
	if err := newWireWriter(c).send(serveHeader{Face: "ping"}); err != nil {
		return p, sock, err
	}
	if err := json.NewDecoder(io.LimitReader(c, 4<<10)).Decode(&p); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return pong{}, sock, &pingTimeout{err}
		}
		return pong{}, sock, fmt.Errorf("it closed the connection without an answer, as it does for another user's; its log says why (%w)", err)
	}
	if p.PID <= 0 {
		return pong{}, sock, errors.New("its answer to a ping names no process")
	}
	return p, sock, nil
}

// pingTimeout is a ping's answer that did not come within pingWait.
type pingTimeout struct{ err error }

func (e *pingTimeout) Error() string {
	return fmt.Sprintf("it took the connection but did not answer a ping within %s (%v)", pingWait, e.err)
}

func (e *pingTimeout) Unwrap() error { return e.err }

// serveStopped is a supervisor that took the connection but is stopped:
// it cannot answer until it is continued.
type serveStopped struct{ pid int }

// stoppedPeer returns the supervisor at the other end of c if it is
// stopped (SIGSTOP), which every face asks before it waits on an answer;
// nil if it runs, or the kernel does not say who it is.
func stoppedPeer(c *net.UnixConn) *serveStopped {
	if _, pid, err := peer(c); err == nil && journal.Stopped(pid) {
		return &serveStopped{pid}
	}
	return nil
}

func (e *serveStopped) Error() string {
	return fmt.Sprintf("it is stopped (pid %d: SIGSTOP, Ctrl-Z or a debugger) and answers nothing until continued: kill -CONT %d", e.pid, e.pid)
}

// dialLive is dialServe for a client that relays (run, mcp, acp): a
// supervisor that takes connections but does not answer (stopped,
// stuck) is one that does not answer, so the session runs in process,
// where the relay would have waited on it without end (an outsider's
// finding: SIGSTOP of serve, then offstage run: no word for 100 s).
// What the ping answered comes too (its zero value when it was not).
func dialLive(jf journalFlags) (*net.UnixConn, string, pong, error) {
	var ne net.Error
	var stopped *serveStopped
	p, sock, err := pingServe(jf)
	if errors.As(err, &ne) && ne.Timeout() || errors.As(err, &stopped) {
		return nil, sock, p, err
	}
	// Answered, or refused (another user's connection: the relay says
	// so), or not there at all: as before.
	c, sock, err := dialServe(jf)
	return c, sock, p, err
}

// logTail returns the last n bytes of the file at path, or "".
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > n {
		f.Seek(info.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}

// serveStop asks the state directory's supervisor to stop, and waits
// until it has: every session closed, every process reaped, the journal
// written.
func serveStop(ctx context.Context, jf journalFlags, stdout, stderr io.Writer) error {
	c, sock, err := dialServe(jf)
	if err != nil {
		return usagef("no offstage serve answers at %s (%v)", sock, err)
	}
	defer c.Close()
	if stopped := stoppedPeer(c); stopped != nil {
		// It would take the request and never answer (an outsider's stop
		// waited ten minutes).
		return usagef("offstage serve does not answer at %s (%v)", sock, stopped)
	}
	// SIGTERM or Ctrl-C ends the wait (a supervisor stopped while it
	// stops would hold it for ever); the stop goes on.
	unwatch := context.AfterFunc(ctx, func() { c.Close() })
	defer unwatch()
	if err := newWireWriter(c).send(serveHeader{Face: "stop"}); err != nil {
		return fmt.Errorf("asking offstage serve to stop: %w", err)
	}
	// It closes the connection when it is done, after a frame saying
	// what went wrong, if anything did (the journal lost records, say).
	var failed error
	told := false // it said how the stop ended
	br := bufio.NewReader(c)
	for {
		line, err := readWireLine(br)
		if err != nil {
			break
		}
		var f frame
		if json.Unmarshal(line, &f) != nil {
			continue
		}
		stderr.Write(f.Err)
		if f.Exit != nil {
			told = true
			if *f.Exit != 0 {
				failed = exitStatus(*f.Exit)
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("stopped waiting for offstage serve to stop (%v); it goes on stopping, and offstage sessions says when it has", context.Cause(ctx))
	case !told:
		// Killed while it stopped (or an offstage older than this one,
		// which says nothing): an outsider's stop said all was reaped
		// while the journal showed a task orphaned.
		return fmt.Errorf("offstage serve ended without saying its stop was done (killed while it stopped, or an older offstage): offstage tasks says how each task ended")
	}
	fmt.Fprintln(stdout, "offstage serve stopped: every session closed, every process reaped.")
	return failed
}

// printUnit writes a systemd --user unit running offstage serve with the
// flags given (less --print-unit).
// unitEscaper escapes systemd's specifiers and variables in a unit's
// command line.
var unitEscaper = strings.NewReplacer("%", "%%", "$", "$$")

func printUnit(w io.Writer, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding offstage's path for the unit: %w", err)
	}
	cmd := []string{exe, "serve"}
	for _, a := range args {
		if a != "--print-unit" && a != "-print-unit" {
			cmd = append(cmd, a)
		}
	}
	quoted := make([]string, len(cmd))
	for i, a := range cmd {
		// systemd reads % as a specifier (%h, %u) and $ as a variable in
		// ExecStart, even quoted: doubled, each stands for itself.
		quoted[i] = unitEscaper.Replace(strconv.Quote(a))
	}
	_, err = fmt.Fprintf(w, `# offstage serve, started at login: save as ~/.config/systemd/user/offstage.service,
# then: systemctl --user daemon-reload && systemctl --user enable --now offstage
[Unit]
Description=offstage supervisor: sessions and background work that outlive the terminal
Documentation=https://github.com/offstage/offstage/blob/main/docs/serve.md

[Service]
ExecStart=%s
# SIGTERM to offstage serve alone: it closes every session (ended_by
# supervisor) and reaps every process itself; then systemd kills what is left.
KillMode=mixed
TimeoutStopSec=30
Restart=on-failure

[Install]
WantedBy=default.target
`, strings.Join(quoted, " "))
	return err
}
