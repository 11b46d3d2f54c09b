package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/cmd/offstage/internal/fleet"
	"github.com/offstage/offstage/cmd/offstage/internal/metrics"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
)

// minTokenLen is the length under which a given bearer token is warned
// about: it guards a shell.
const minTokenLen = 16

const mcpUsage = `Usage: offstage mcp [flags]

Serves offstage's tools over the Model Context Protocol: bash, task_list,
task_inspect, task_output, task_wait, task_cancel, task_input, and
spawn_agent when a model is configured (same flags and environment as
"offstage run"). On stdio by default; with --http, over the streamable HTTP
transport, which needs a bearer token (OFFSTAGE_MCP_TOKEN, or one generated
and printed to stderr) and listens on loopback unless --allow-remote. With
--http it also serves, behind the same token, a live dashboard of the
journal's tasks at /ui (a login form sets a cookie for browsers; see
"offstage dashboard") and Prometheus metrics at /metrics.

Each MCP session sees only its own tasks; when it ends, they are cancelled
and every process is reaped (unless --keep-on-disconnect). While offstage
serve runs, offstage mcp on stdio hosts its session there and says so on
stderr (--no-serve keeps it here): when the client goes, the session's
running work goes on (offstage sessions lists it, offstage sessions close
ends it). Over HTTP, a
session also ends when it has had no request and no open stream for
--idle-timeout (a client that vanished without DELETE), and at most
--max-sessions sessions are open at once (a client over it gets 503).
On SIGTERM or
Ctrl-C it stops taking requests, stops every task, closes the sessions and
exits. Logs go to stderr or --log, never stdout: warnings and errors, and
the lines a user needs whatever the level (how shells are contained, where
it serves, the token over HTTP, that it stopped); --log-level info adds
sessions, task notices and the MCP SDK's own lines, debug more.`

const mcpExamples = `  offstage mcp
  offstage mcp --dir ~/src/project
  OPENAI_API_KEY=sk-... offstage mcp            # with spawn_agent
  OFFSTAGE_MCP_TOKEN=s3cret offstage mcp --http 127.0.0.1:7777

  In an MCP client's configuration (Claude Desktop, Cursor, …):
    {"mcpServers": {"offstage": {"command": "offstage", "args": ["mcp", "--dir", "/path/to/project"]}}}
`

func mcpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	stdin, stdout, restore := protocolStdio(stdin, stdout)
	defer restore()
	return mcpFace(ctx, localFace(stdin, stdout, stderr), args, stdin, stdout, stderr)
}

// mcpFace is offstage mcp for a face: this process's stdio (or --http),
// or, under offstage serve (f.host), a relayed stdio connection whose
// session the supervisor keeps when its client goes.
func mcpFace(ctx context.Context, f *face, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	// Warnings and errors by default: the SDK's info lines (a session
	// connected, with session_id="" on stdio) read as trouble to a user.
	sf := serverFlags{level: slog.LevelWarn}
	sf.register(fs, "for spawn_agent; none unless a key is set")
	dir := fs.String("dir", "", "working directory of the shells (default: the current one)")
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address instead of stdio (loopback unless --allow-remote)")
	allowRemote := fs.Bool("allow-remote", false, "with --http: allow listening on a non-loopback address")
	origins := fs.String("allow-origin", "", "with --http: comma-separated extra allowed Origin values, besides loopback")
	keep := fs.Bool("keep-on-disconnect", false, "keep a session's tasks running after it ends (until offstage exits)")
	maxSessions := fs.Int("max-sessions", mcpserver.DefaultMaxSessions, "with --http: how many MCP sessions may be open at once (each holds its tasks and their processes); a client over it gets 503")
	idle := fs.Duration("idle-timeout", mcpserver.DefaultIdleTimeout, "with --http: end a session that has had no request in flight and no stream open for this long, stopping its tasks (0: never)")
	noServe := fs.Bool("no-serve", false, "on stdio, host the session in this process even when offstage serve runs (its work then ends with the client)")
	if f.served() {
		args = absPaths(fs, args, f.abs)
	}
	rest, err := parse(fs, args, mcpUsage, mcpExamples, stdout)
	if err != nil {
		return err
	}
	if *idle < 0 {
		return usagef("--idle-timeout must be 0 (never) or more, not %s", *idle)
	}
	if *idle == 0 {
		*idle = -1 // mcpserver: negative is never, 0 the default
	}
	if *maxSessions < 1 {
		return usagef("--max-sessions must be at least 1, not %d", *maxSessions)
	}
	mf := sf.model
	var model provider.Model
	if mf != (modelFlags{}) || f.getenv("OPENAI_API_KEY") != "" || f.getenv("ANTHROPIC_API_KEY") != "" {
		if model, err = newModel(mf, f.getenv); err != nil {
			return err
		}
	}
	if *dir == "" {
		*dir = f.cwd
	}
	if *dir, err = workDir(*dir); err != nil {
		return err
	}
	// The model and the directory are checked here first, so that a
	// relayed client says what is wrong on its own stderr, not only in
	// the supervisor's log.
	if !f.served() && *httpAddr == "" && !*noServe && !sf.journal.noJournal {
		if conn, sock, p, err := dialLive(sf.journal); err == nil {
			fmt.Fprintf(stderr, "offstage: the MCP session is hosted by offstage serve (%s): its work goes on when the client goes; offstage sessions lists it.\n", sock)
			return relayStream(ctx, conn, "mcp", p.Acks, args, stdin, stdout)
		} else if !errors.Is(err, errNoServe) {
			fmt.Fprintf(stderr, "offstage: offstage serve does not answer at %s (%v); the session runs in this process.\n", sock, err)
		}
	}
	if f.served() {
		return servedMCP(ctx, f, &sf, model, *dir, rest, stdin, stdout, stderr)
	}
	sf.workspace = *dir
	srv, err := sf.open(ctx, "mcp", rest, stderr)
	if err != nil {
		return err
	}
	defer srv.close(&err)
	ctx, logger, status := srv.ctx, srv.logger, srv.status
	var profiles []agent.Profile
	if model != nil {
		profiles = sf.agents.profiles(*dir, mf, stderr)
	}
	var svc *mcpserver.Service
	journal := srv.rec.journal()
	var m *metrics.Metrics
	if *httpAddr != "" {
		src := metrics.Sources{Sessions: func() int { return svc.Sessions() }}
		if srv.rec != nil {
			src.Journal = srv.rec.Stats
		}
		m = metrics.New(src)
		journal = m.Wrap(journal)
	}
	cfg, surface := sf.template(model, profiles, srv.policy, *dir, journal)
	cfg.Tools.Escalate, cfg.Tracer = sf.sandbox.escalate(false), srv.tracer
	// The service outlives ctx: a signal ends the serving (RunStdio,
	// serveHTTP), then Close stops the tasks and closes the sessions with
	// its reason ("mcp: the server was shut down"), where ending with ctx
	// they said only that a context was cancelled (an outsider's finding).
	svc, err = mcpserver.New(context.WithoutCancel(ctx), mcpserver.Config{
		Agent:            cfg,
		Surface:          surface,
		KeepOnDisconnect: *keep,
		IdleTimeout:      *idle,
		MaxSessions:      *maxSessions,
		FullAdvice:       "start offstage mcp with a higher --max-sessions",
		Logger:           logger,
		Version:          version(),
	})
	if err != nil {
		return usagef("%v", err)
	}
	defer func() {
		if err := svc.Close(context.Background()); err != nil {
			logger.Error("closing", "err", err)
		}
	}()
	if *httpAddr == "" {
		status.Info("serving MCP on stdio", "dir", *dir, "spawn_agent", model != nil)
		err := svc.RunStdio(ctx, stdin, stdout)
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			logger.Info("session ended", "err", err)
		}
		if ctx.Err() == nil && !*keep {
			// The client went away: its session is closing on its own
			// (stopping its tasks, each within its grace), and so records
			// why; Close would say the server was shut down.
			wctx, cancel := context.WithTimeout(ctx, stdioCloseWait)
			svc.Wait(wctx)
			cancel()
		}
		return nil
	}
	var dash interface{ Close() }
	mount := func(mux *http.ServeMux, token string, allowed []string, addr *net.TCPAddr) {
		// Metrics: a scraper sends the same bearer token as an MCP client.
		mux.Handle("/metrics", mcpserver.Authorized(token, allowed, m.Handler()))
		if srv.rec == nil {
			mux.Handle("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "the dashboard shows the journal, and this offstage mcp runs with --no-journal", http.StatusNotFound)
			}))
			return
		}
		// The fleet's peers follow this instance's tasks here, with the
		// secret the journal records (package fleet); the address goes on
		// record with the lease.
		mux.Handle(fleet.OutputPath, fleet.Handler(srv.rec.Recorder))
		srv.rec.SetPeerAddr(peerURL(addr))
		dash = mountDashboard(ctx, mux, srv.rec.Store(), srv.rec.writable, token, allowed)
	}
	defer func() {
		if dash != nil {
			dash.Close()
		}
	}()
	return serveHTTP(ctx, svc, *httpAddr, *allowRemote, *origins, mount, stderr, logger, status)
}

// serveHTTP serves svc's sessions at /mcp, and what mount adds (guarded
// by the same token and origins; told the address it listens on), until
// ctx ends.
func serveHTTP(ctx context.Context, svc *mcpserver.Service, addr string, allowRemote bool, origins string, mount func(mux *http.ServeMux, token string, allowed []string, addr *net.TCPAddr), stderr io.Writer, logger, status *slog.Logger) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--http %q is not host:port (%v)", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !allowRemote && !isLoopback(host) {
		return usagef("--http %s would accept connections from other machines: this runs commands, so pass --allow-remote if you mean it", addr)
	}
	token, generated, err := dashboardToken()
	if err != nil {
		return err
	}
	var allowed []string
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, strings.TrimSuffix(o, "/"))
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return usagef("cannot listen on %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", svc.HTTPHandler(token, allowed))
	if mount != nil {
		mount(mux, token, allowed, ln.Addr().(*net.TCPAddr))
	}
	srv := &http.Server{Handler: mcpserver.BoundBodies(mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleConn} // every body bounded, the dashboard's too
	fmt.Fprintf(stderr, "offstage mcp: listening on http://%s/mcp\n", ln.Addr())
	if generated {
		fmt.Fprintf(stderr, "offstage mcp: send \"Authorization: Bearer %s\"\n", token)
	} else {
		// The user chose it and has it: a secret printed is a secret in
		// terminal scrollback and in log files.
		warnShortToken(stderr, "mcp", token, "runs commands here")
		fmt.Fprintln(stderr, "offstage mcp: send \"Authorization: Bearer $OFFSTAGE_MCP_TOKEN\" (the token it was given)")
	}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	stopHTTP(srv, svc, logger, status)
	return nil
}

// stopHTTP stops serving: it stops taking connections and requests, stops
// every task (SIGTERM, their grace, SIGKILL) and closes the sessions, which
// ends their streams, then says in one line what it did and how long it
// took. It returns as soon as that is done: http.Server.Shutdown alone
// would wait for the sessions' GET streams, which never go idle.
func stopHTTP(srv *http.Server, svc *mcpserver.Service, logger, status *slog.Logger) {
	start := time.Now()
	sessions := svc.Sessions()
	shutdown := make(chan struct{})
	go func() {
		defer close(shutdown)
		srv.Shutdown(context.Background()) // closes the listener and the idle connections at once
	}()
	err := svc.Close(context.Background()) // each session's Close is bounded (agent.Session.Close)
	select {
	case <-shutdown:
	case <-time.After(handlerGrace):
		srv.Close() // a handler that outlived its session
		<-shutdown
	}
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		logger.Error("stopped serving HTTP; some sessions' tasks did not end in time", "sessions", sessions, "took", took, "err", err)
		return
	}
	status.Info("stopped serving HTTP: every task stopped, every session closed", "sessions", sessions, "took", took)
}

// endsQuietly is the log of a relayed mcp face's service: the
// supervisor's, where the SDK logs a session that ended on an error as an
// error. One ended by offstage serve itself (stopped, or closed by
// offstage sessions close: errInputCut), or by a relay that went with
// bytes of the supervisor's unread (a reset connection) or before a
// write reached it (a broken pipe), ended as it should: it is logged at
// info, saying so (an outsider's finding: an ordinary stop logged an
// error per attached client).
func endsQuietly(l *slog.Logger) *slog.Logger { return slog.New(quietEnds{l.Handler()}) }

type quietEnds struct{ slog.Handler }

// sessionEndedWithError is what the MCP SDK logs when a session ends on
// an error.
const sessionEndedWithError = "server session ended with error"

func (h quietEnds) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != sessionEndedWithError {
		return h.Handler.Handle(ctx, r)
	}
	var err error
	r.Attrs(func(a slog.Attr) bool {
		if e, ok := a.Value.Any().(error); ok && a.Key == "error" {
			err = e
		}
		return err == nil
	})
	why := ""
	switch {
	case errors.Is(err, errInputCut):
		why = "offstage serve ended it"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		why = "its client went"
	default:
		return h.Handler.Handle(ctx, r)
	}
	quiet := slog.NewRecord(r.Time, slog.LevelInfo, "server session ended: "+why, r.PC)
	quiet.AddAttrs(slog.String("how", err.Error()))
	if !h.Handler.Enabled(ctx, quiet.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, quiet)
}

func (h quietEnds) WithAttrs(as []slog.Attr) slog.Handler { return quietEnds{h.Handler.WithAttrs(as)} }
func (h quietEnds) WithGroup(name string) slog.Handler    { return quietEnds{h.Handler.WithGroup(name)} }

// servedMCP serves one MCP session on a relayed stdio connection in
// offstage serve: the supervisor's journal, tracer and log; the client's
// flags and environment for the model and the shells. When its client
// goes the session detaches (mcpKeep): its work goes on.
func servedMCP(ctx context.Context, f *face, sf *serverFlags, model provider.Model, dir string, rest []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(rest) > 0 {
		return usagef("mcp takes no arguments (got %q)", rest[0])
	}
	sf.readFrom(f.getenv) // the client's config file and profiles, as in process
	p, err := sf.policy()
	if err != nil {
		return err
	}
	sup := f.host
	var profiles []agent.Profile
	if model != nil {
		profiles = sf.agents.profiles(dir, sf.model, stderr)
	}
	cfg, surface := sf.template(model, profiles, p, dir, sup.rec.journal())
	cfg.Tools.Escalate, cfg.Tracer = sf.sandbox.escalate(false), sup.tracer
	cfg.Tools.Process.Env = f.environ
	conn, hangup := context.WithCancel(ctx)
	defer hangup()
	svc, err := mcpserver.New(sup.life, mcpserver.Config{Agent: cfg, Surface: surface, Logger: endsQuietly(sup.logger), Version: version(), Keep: mcpKeep{sup, hangup}})
	if err != nil {
		return usagef("%v", err)
	}
	defer svc.Close(context.Background()) // a session still attached: the supervisor stops
	// When conn ends (hangup, or the stop) the connection's input ends,
	// not Run's context: the SDK refuses every write once its connection
	// is closed, so the answer of a call in flight, a task_wait whose
	// result the session's close just delivered, would be dropped unsaid.
	// With the input ended, the stdio transport answers the calls in
	// flight (for up to mcpserver.DrainGrace, then with an error) before
	// the session ends.
	stop := context.AfterFunc(conn, f.endInput)
	defer stop()
	err = svc.RunStdio(context.WithoutCancel(conn), stdin, stdout)
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		sup.logger.Info("mcp: session ended", "err", err)
	}
	if ctx.Err() == nil { // the client went: its session detaches (mcpKeep.Detached), or closes, by itself
		wctx, cancel := context.WithTimeout(ctx, stdioCloseWait)
		svc.Wait(wctx)
		cancel()
	}
	return nil
}

// stdioCloseWait bounds how long offstage mcp on stdio waits for the
// session whose client went away to close itself before it closes it.
const stdioCloseWait = time.Minute

// handlerGrace is how long the HTTP server gets to finish once every
// session is closed, before its connections are closed: what is left are
// requests that raced the stop (answered at once: 404, 503) and
// connections a client opened but sent nothing on, which Shutdown would
// wait 5 s for.
const handlerGrace = 500 * time.Millisecond

// openLog returns the loggers of a server command, to path, or to stderr
// when path is empty; never stdout, which is the protocol. logger writes
// from level on; status writes at info whatever the level, for the lines a
// user needs (see server.status). They share one handler, so their lines
// never interleave.
func openLog(path string, level slog.Level, stderr io.Writer) (logger, status *slog.Logger, closeLog func(), err error) {
	out, closeLog := stderr, func() {}
	if path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, nil, usagef("cannot open the log file: %v", err)
		}
		out, closeLog = f, func() { f.Close() }
	}
	h := slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(leveled{h, level}), slog.New(leveled{h, slog.LevelInfo}), closeLog, nil
}

// leveled passes on the records of its level and above.
type leveled struct {
	slog.Handler
	level slog.Level
}

func (l leveled) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= l.level && l.Handler.Enabled(ctx, level)
}

func (l leveled) WithAttrs(attrs []slog.Attr) slog.Handler {
	return leveled{l.Handler.WithAttrs(attrs), l.level}
}

func (l leveled) WithGroup(name string) slog.Handler {
	return leveled{l.Handler.WithGroup(name), l.level}
}

// peerURL is the address the fleet reaches this instance at: the one it
// listens on, or this machine's name where that is every address.
func peerURL(a *net.TCPAddr) string {
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host, _ = os.Hostname()
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(a.Port))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// logContainment says at start-up how shells are contained (a cgroup per
// task, or the marks, and why), and fails when OFFSTAGE_CONTAINMENT asks
// for one that cannot be had.
func logContainment(logger *slog.Logger) error {
	c := proc.Containment()
	if c.Err != nil {
		return c.Err
	}
	attrs := []any{"mode", c.Mode, "dir", c.Dir, "reason", c.Reason}
	if c.Root != "" { // run as root: what its commands can do to their containment
		attrs = append(attrs, "root", c.Root)
	}
	logger.Info("containment", attrs...)
	return nil
}

// warnShortToken warns, as offstage NAME, that a token the user chose
// (OFFSTAGE_MCP_TOKEN) is short enough to guess; power says what its
// guesser could do.
func warnShortToken(stderr io.Writer, name, token, power string) {
	if n := len(token); n < minTokenLen {
		fmt.Fprintf(stderr, "offstage %s: warning: OFFSTAGE_MCP_TOKEN is only %d characters, and whoever guesses it %s; use %d or more random ones (openssl rand -hex 24)\n", name, n, power, 2*minTokenLen)
	}
}
