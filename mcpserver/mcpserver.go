// Package mcpserver serves offstage's tools over the Model Context
// Protocol (with the official SDK, github.com/modelcontextprotocol/go-sdk),
// so any MCP client gets background shells, and sub-agents when a model is
// configured, that never leak and never lose output.
//
// # Sessions
//
// Every MCP session gets an mcp.Server of its own, with its own task table:
// a session sees only its own tasks, and ids are its own (shell:1 in one
// session is not shell:1 in another). When the session ends (stdin closes,
// the HTTP session is deleted or idle for Config.IdleTimeout), its table
// is closed: every task is cancelled and every process reaped, unless
// Config.KeepOnDisconnect. Service.Close closes all of them.
//
// With Config.Keep (offstage serve, which outlives its clients), a
// session whose client goes away is not closed but detached: its tasks go
// on, contained and recorded, and the Keeper, told of it, closes it when
// its policy says (an idle policy, a user's request, its own stop).
//
// # Tools, progress, resources
//
// The tools are package tools' (and spawn_agent, through package agent,
// when Config.Agent.Model is set): the same names, schemas and results, each
// with its output schema, and the descriptions of the face where nothing
// reaches the model unless it asks (tools.Config.NoPush: a result comes
// from task_wait, never by itself; the session's sub-agents still get
// theirs pushed, and are told so). A
// task_wait whose request carries a progress token sends progress
// notifications while it waits (elapsed seconds, tasks still running); a
// client cancelling the request (notifications/cancelled) ends the wait at
// once without cancelling the tasks. Each shell's output is a resource,
// offstage://task/shell:N/output (its cleaned last 64 KiB), and a
// subscribed client gets notifications/resources/updated as output
// arrives, at most once per Config.UpdateInterval. resources/list holds the outputs of the
// session's live shells (queued or running), as the table is when it is
// asked (a shell bash just started is there), and the client gets
// notifications/resources/list_changed as they start and finish; a
// finished shell's output stays readable by its URI.
//
// Over stdio, Service.RunStdio counts a result a tool call delivered (a
// task_wait's, a foreground bash's) as delivered only once the answer
// carrying it was written whole; when the write fails, the answer is
// abandoned at the end of input, or the session ends before it is
// written, the result is undelivered again (task.Receipt), for a later
// wait or an attach. Over HTTP (Service.Handler) each tools/call POST is
// told the same way: its answer went out when the SDK wrote it to a
// client still connected and the connection took it; when the client
// went first (the POST's connection closed while a task_wait waited: a
// timeout of the client's, a network that failed), the results the call
// delivers are undelivered again, for the session's next wait. A result
// carried by an answer the kernel took counts, as over stdio one the pipe
// took does. A JSON-RPC batch (protocol 2025-03-26) is not told of: its
// calls' results count when they return.
//
// # The Tasks extension
//
// Every session's server declares MCP's Tasks extension
// (io.modelcontextprotocol/tasks, the 2026-07-28 schema; tasks.go). A
// tools/call of bash or spawn_agent whose _meta declares the extension is
// run in the background and answered at once with a task handle
// (resultType "task"); tasks/get reports it working, input_required (a
// shell that seems to wait on a prompt, with an elicitation request whose
// answer tasks/update types into it), completed (the tool's result, with
// isError when the command failed or timed out) or cancelled;
// tasks/cancel is task_cancel. A handle is reachable only from the
// session that made it; its ttlMs is null while it runs, then covers the
// table's retention. Calls that do not declare the extension, and the
// task methods sent without it (refused with -32021), see no change.
//
// # Concurrency properties
//
// A Service is safe for concurrent use; each session's server runs its
// handlers concurrently, as the SDK does, and the task table and tools are
// safe for that. Each initialised session has four goroutines of its own
// (one waiting for it to end, one sending resource updates, one following
// its task events: notices for the log, the resource list; and one that
// stops the last when the session ends), besides those of its running
// tasks; they end with it.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/chanctx"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/internal/tracing"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// Config configures a Service.
type Config struct {
	// Agent is every session's configuration, the template agent.Open is
	// given: the tools (the shells' template: working directory,
	// environment and its policy, limits, sandbox; result budgets), the
	// task table's options, and, when Model is set, spawn_agent with
	// Profiles (nil means agent.DefaultProfiles()) and
	// ProjectInstructions (AGENTS.md, for sub-agents unless their profile
	// opts out; empty: each session reads them from Tools.Process.Dir,
	// unless Surface.NoProjectInstructions). Each session's copy has
	// Tools.NoPush and NoContinuation set: an MCP client is sent no result
	// it did not ask for.
	Agent agent.Config
	// Surface is every session's agent.Surface: Journal, if set, records
	// each MCP session (its tasks and their output logs; package
	// journal's Recorder); Model describes the model in the record;
	// Logger (nil: Config.Logger) hears what Open read. Each session sets
	// Name ("mcp") and ID.
	Surface agent.Surface
	// KeepOnDisconnect leaves a session's tasks running after it ends;
	// they are then cancelled and reaped by Service.Close.
	KeepOnDisconnect bool
	// Logger receives diagnostics; nil discards them. Never stdout: on
	// stdio, stdout is the protocol.
	Logger *slog.Logger
	// UpdateInterval rate-limits resource update notifications and
	// ProgressInterval task_wait's progress notifications. Default 1s each.
	UpdateInterval   time.Duration
	ProgressInterval time.Duration
	// Version is reported to clients.
	Version string
	// IdleTimeout closes an HTTP session that has had no request in flight
	// and no stream open for this long, as if its client had deleted it
	// (see HTTPHandler). Default DefaultIdleTimeout; negative: never.
	IdleTimeout time.Duration
	// MaxSessions bounds the HTTP sessions open at once, per handler
	// (each holds a task table and may hold processes): a request that
	// would start one more gets 503 (see HTTPHandler). Default
	// DefaultMaxSessions; negative: no bound.
	MaxSessions int
	// FullAdvice is added to what a client refused for MaxSessions is
	// told, and to the log line: how to serve more, in the terms of the
	// program serving (offstage's: "start offstage mcp with a higher
	// --max-sessions"). Empty: the refusal says what a client can do.
	FullAdvice string
	// Keep, if set, keeps sessions past their client, for a process that
	// outlives its clients (offstage serve): it is told of each session
	// as it opens, and a session whose client goes away detaches instead
	// of closing: its tasks go on, contained and recorded, and closing it
	// (agent.Session.CloseCause) is Keep's from then on. Such a session
	// lives under the Service's context less its cancellation, so that
	// Service.Close, which leaves detached sessions alone, does not end
	// their work; a session still attached is closed by Service.Close as
	// any other. Keep takes precedence over KeepOnDisconnect.
	Keep Keeper
}

// Keeper keeps sessions past their client; see Config.Keep. Its methods
// are called from the session's goroutines, and must not block long.
type Keeper interface {
	// Opened is told of a session as it opens, before its first request
	// is served. An error refuses it: the session closes at once, and
	// its client's calls are answered with the error.
	Opened(*agent.Session) error
	// Detached is told of a session whose client went away; the session,
	// still open, is the keeper's to close.
	Detached(*agent.Session)
}

// Service makes per-session MCP servers and owns what they start.
type Service struct {
	cfg       Config
	ctx       context.Context
	cancel    context.CancelFunc
	probe     *mcp.Server   // serves version checks of requests for existing HTTP sessions
	defs      []*tools.Tool // the tools every session serves (definitions; each session calls its own)
	published []*mcp.Tool   // defs as MCP publishes them, in the same order

	mu     sync.Mutex
	conns  map[*conn]struct{} // guarded by mu: sessions with a task table
	left   chan struct{}      // guarded by mu: closed, and replaced, when a session leaves conns (Wait)
	idle   []*idleSessions    // guarded by mu: the HTTP handlers' sessions
	closed bool               // guarded by mu
	wg     sync.WaitGroup     // session goroutines
}

// New returns a Service whose tasks descend from ctx. It fails only on a
// configuration no session could run (profiles with empty or repeated
// names, a tool whose schema cannot be marshalled).
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UpdateInterval <= 0 {
		cfg.UpdateInterval = time.Second
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Surface.Logger == nil {
		cfg.Surface.Logger = cfg.Logger
	}
	cfg.Surface.Name = "mcp"
	// An MCP client is sent no result it did not ask for.
	cfg.Agent.Tools.NoPush, cfg.Agent.NoContinuation = true, true
	s := &Service{cfg: cfg, conns: make(map[*conn]struct{}), left: make(chan struct{})}
	defs, err := agent.ToolDefs(s.cfg.Agent)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s.defs = defs
	for _, t := range defs { // built once, shared read-only by every session's server
		tool := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, Annotations: annotations(t)}
		if t.OutputSchema != nil { // a nil *jsonschema.Schema in the interface would be published as null
			tool.OutputSchema = t.OutputSchema
		}
		s.published = append(s.published, tool)
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.probe = mcp.NewServer(s.implementation(), nil)
	return s, nil
}

func (s *Service) implementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "offstage", Title: "offstage: background shells and sub-agents", Version: s.cfg.Version}
}

const instructions = `offstage runs shell commands and sub-agents in the background for you. Start long work (builds, tests, servers) with bash and run_in_background: true, keep working, and read its output with task_output or wait with task_wait (one call, not a loop). Your tasks are yours alone, and they end when this session ends.`

// keptInstructions are instructions for a session that outlives its
// connection (Config.Keep, KeepOnDisconnect): its tasks go on when the
// client goes.
const keptInstructions = `offstage runs shell commands and sub-agents in the background for you. Start long work (builds, tests, servers) with bash and run_in_background: true, keep working, and read its output with task_output or wait with task_wait (one call, not a loop). Your tasks are yours alone. If this connection ends while they run, they go on to their end and are recorded (offstage tasks shows them), and nobody can reach them from another connection.`

// Server returns a new server for one MCP session. It is cheap until its
// session initialises: only then does it get a task table.
func (s *Service) Server() *mcp.Server { return s.newConn().server }

// newConn returns the state of a new session, with its server.
func (s *Service) newConn() *conn {
	c := &conn{svc: s, done: make(chan struct{}), kick: make(chan struct{}, 1), subs: make(map[string]int64), listed: make(map[string]struct{})}
	says := instructions
	if s.cfg.Keep != nil || s.cfg.KeepOnDisconnect {
		says = keptInstructions
	}
	c.server = mcp.NewServer(s.implementation(), &mcp.ServerOptions{
		Instructions:       says,
		Logger:             sdkLogger(s.cfg.Logger),
		InitializedHandler: func(ctx context.Context, req *mcp.InitializedRequest) { c.start(req.Session) },
		SubscribeHandler:   c.subscribe,
		UnsubscribeHandler: c.unsubscribe,
		Capabilities:       capabilities(),
	})
	c.serveTasks()
	c.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "resources/list" && c.following.Load() {
				// The list follow keeps lags the table by a hand-off:
				// a client that lists right after bash returned got
				// none while its shell ran. It is made now as well.
				c.listResources()
			}
			return next(ctx, method, req)
		}
	})
	for i, t := range s.defs {
		c.server.AddTool(s.published[i], c.handler(t.Name, t.OutputSchema != nil))
	}
	c.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "task-output",
		Title:       "Output of a shell task",
		URITemplate: "offstage://task/{+task_id}/output", // {+…}: reserved expansion, so the id's ":" matches
		MIMEType:    "text/plain",
		Description: "The cleaned last 64 KiB of a shell task's output (stdout and stderr interleaved). Subscribe to be told as it grows.",
	}, c.readResource)
	return c
}

// capabilities are what every session's server declares beyond what the
// SDK infers from its tools and resources: logging (the SDK's default,
// kept) and the Tasks extension.
func capabilities() *mcp.ServerCapabilities {
	//lint:ignore SA1019 kept as the SDK declares it by default: setting Capabilities would otherwise drop it for clients that still ask
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}
	caps.AddExtension(TasksExtension, map[string]any{})
	return caps
}

// annotations turns a tool's safety class into MCP's hints, so a client
// can decide whether to ask its user before calling it.
func annotations(t *tools.Tool) *mcp.ToolAnnotations {
	destructive, openWorld := t.Safety.Consequential(), t.OpenWorld
	return &mcp.ToolAnnotations{
		Title:           t.Title,
		ReadOnlyHint:    t.Safety == tools.ReadOnly,
		DestructiveHint: &destructive,
		IdempotentHint:  t.Idempotent,
		OpenWorldHint:   &openWorld,
	}
}

// Close stops the service: it refuses new sessions, cancels and reaps
// every session's tasks (all sessions at once: SIGTERM, their grace,
// SIGKILL), then closes the sessions themselves, which ends their
// requests and streams, and waits for the sessions' goroutines, or until
// ctx ends. It returns as soon as that is done. It is idempotent.
//
// When ctx ends first, Close returns; the goroutines closing the sessions
// outlive it, until they are done.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	idle := slices.Clone(s.idle)
	s.mu.Unlock()
	results := make(chan error, len(conns)) // never blocks a sender
	var closing sync.WaitGroup
	for _, c := range conns {
		closing.Go(func() {
			results <- c.close(ctx, "the server was shut down")
			if c.ss != nil {
				c.ss.Close() // its requests and streams end; ss.Wait returns
			}
		})
	}
	done := make(chan struct{})
	go func() {
		closing.Wait()
		for _, t := range idle {
			t.closeAll() // sessions that never initialised, too
		}
		s.cancel()
		s.wg.Wait()
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		errs = append(errs, context.Cause(ctx))
	}
	for len(results) > 0 {
		errs = append(errs, <-results)
	}
	return errors.Join(errs...)
}

// closing reports whether Close was called.
func (s *Service) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Wait blocks until no session holds a task table: each one's client went
// away or it was closed, and its tasks have ended. It returns ctx's error
// if ctx ends first. Over stdio, a Server().Run that returned because its
// client went away is followed by Wait, then Close: the session's tasks
// then record that the client went away, which Close alone, racing the
// session's own ending, could record as the server shutting down. With
// Config.KeepOnDisconnect a session whose client went away is closed only
// by Close.
func (s *Service) Wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, left := len(s.conns), s.left
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-left:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sessions returns how many sessions currently hold a task table.
func (s *Service) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// conn is one session's state.
type conn struct {
	svc    *Service
	server *mcp.Server
	done   chan struct{}      // closed when the session's state is released
	kick   chan struct{}      // capacity 1: output may have grown (follow to updates)
	ss     *mcp.ServerSession // set by start before the conn is listed in svc.conns; nil in tests without a session

	once    sync.Once
	table   *task.Table    // set by start
	view    *task.View     // set by start
	tools   []*tools.Tool  // set by start
	session *agent.Session // set by start
	ext     *extTasks      // the Tasks extension's handles; set by Server
	err     error          // set by start: why the session has no table
	answers *answers       // set by RunStdio before the session runs: nil on a transport that cannot tell a written answer

	mu     sync.Mutex
	subs   map[string]int64    // guarded by mu: subscribed resource URI → output bytes last notified
	listed map[string]struct{} // guarded by mu: the output resources in resources/list (live shells)
	why    string              // guarded by mu: why the session is ending, when known before it ends (closingFor)

	// listMu makes each listResources whole: follow's and a
	// resources/list's, so that additions and removals stay in order.
	listMu    sync.Mutex
	briefs    []task.Brief // guarded by listMu: listResources' buffer
	following atomic.Bool  // start has set view and started follow

	closeOnce sync.Once
	closeErr  error
}

// start gives the session its task table, once, and starts its goroutines.
func (c *conn) start(ss *mcp.ServerSession) {
	c.once.Do(func() {
		svc := c.svc
		c.ss = ss
		if svc.closing() {
			c.err = errors.New("the server is shutting down")
			return
		}
		// The session's id is offstage's own (agent.NewID: its start time,
		// then random hex), as every face's is, so that offstage tasks
		// lists one format sorted by time; the journal names a stdio
		// session, which has no MCP session id. Over HTTP the SDK's
		// Mcp-Session-Id (random letters, which the SDK's own log lines
		// name) is the client's handle, not a record's name: the log says
		// which is which.
		sf := svc.cfg.Surface
		mcpID := ""
		if ss != nil {
			mcpID = ss.ID()
		}
		if mcpID != "" {
			sf.ID = agent.NewID()
		}
		life := svc.ctx
		if svc.cfg.Keep != nil { // it may outlive the Service (Config.Keep)
			life = context.WithoutCancel(life)
		}
		sess, err := agent.Open(life, svc.cfg.Agent, sf)
		if err != nil {
			c.err = err
			svc.cfg.Logger.Error("cannot open a session", "err", err, "mcp_session", mcpID)
			return
		}
		if mcpID != "" {
			svc.cfg.Logger.Info("session opened", "session", sess.ID(), "mcp_session", mcpID)
		}
		svc.mu.Lock()
		closed := svc.closed
		if !closed {
			svc.conns[c] = struct{}{}
			svc.wg.Add(3)
		}
		svc.mu.Unlock()
		if closed { // Close began meanwhile, and would not see this session
			sess.Close(context.Background())
			c.err = errors.New("the server is shutting down")
			return
		}
		c.session, c.table, c.tools = sess, sess.Table(), sess.Tools()
		c.view = c.table.View("")
		if k := svc.cfg.Keep; k != nil {
			if err := k.Opened(sess); err != nil {
				sess.Close(context.Background())
				c.err = err
			}
		}
		go func() {
			defer svc.wg.Done()
			if ss != nil {
				ss.Wait()
			} else {
				<-svc.ctx.Done()
			}
			c.disconnected()
		}()
		go func() {
			defer svc.wg.Done()
			c.updates()
		}()
		go func() {
			defer svc.wg.Done()
			c.follow()
		}()
		c.following.Store(true)
	})
}

// follow reads the session's event log until the session's state is
// released: it logs notices (see notice) and keeps the output resources
// listed those of the live shells (see listResources).
func (c *conn) follow() {
	ctx, cancel := chanctx.CancelOn(c.svc.ctx, c.done)
	defer cancel()
	events := c.table.Events()
	seq := events.Last()
	c.listResources() // a list newer than seq: whatever follows seq comes below
	for {
		evs, err := events.Wait(ctx, seq)
		if ctx.Err() != nil {
			return
		}
		relist := errors.Is(err, task.ErrEventsDropped)
		grew := relist
		for i := range evs {
			e := &evs[i]
			seq = e.Seq
			c.notice(e)
			switch e.Type {
			case task.EventSpawned, task.EventStarted, task.EventFinished:
				relist = relist || e.Owner == ""
			}
			grew = grew || (e.Type == task.EventOutput || e.Type == task.EventFinished) && e.Owner == ""
		}
		if grew {
			c.wake()
		}
		if relist {
			c.listResources()
		}
	}
}

// notice writes the notices the session's own tasks post (a shell that
// seems to wait for input, lines a notify_on watch looked for) to the
// server's log at info, where the person running it can see them
// (offstage mcp --log-level info). MCP has no way
// into the model's conversation, and its logging messages are deprecated
// (SEP-2577, which points stdio servers to stderr), so the model gets
// notices from task_wait, which they end as in any surface, and the
// waiting_for_input of task_list. It reads the event log, so the notices
// stay in the table for task_wait.
func (c *conn) notice(e *task.Event) {
	if e.Type == task.EventIdle {
		c.svc.cfg.Logger.Info("background idle: every task has finished")
		return
	}
	if e.Type != task.EventNotice || e.Owner != "" {
		return
	}
	kind, text, _ := strings.Cut(e.Text, ": ") // the event says "kind: text", cut to 512 bytes
	c.svc.cfg.Logger.Info("task notice", "task_id", e.ID, "kind", kind, "notice", text)
}

// listResources makes resources/list hold the output resources of the
// session's live shells (queued or running), and only those: the SDK
// sends notifications/resources/list_changed for each change (debounced).
// A finished shell's output stays readable through the template. Each
// call is whole (listMu), from the table as it is then, so its additions
// and removals stay in order.
func (c *conn) listResources() {
	c.listMu.Lock()
	defer c.listMu.Unlock()
	c.briefs, _ = c.view.AppendBriefs(c.briefs[:0], task.Query{Kind: "shell", States: []task.State{task.Queued, task.Running}})
	live := make(map[string]*task.Brief, len(c.briefs))
	for k := range c.briefs {
		i := &c.briefs[k]
		live[resourcePrefix+i.ID+resourceSuffix] = i
	}
	var add []*mcp.Resource
	var remove []string
	c.mu.Lock()
	for uri := range c.listed {
		if _, ok := live[uri]; !ok {
			remove = append(remove, uri)
			delete(c.listed, uri)
		}
	}
	for uri, i := range live {
		if _, ok := c.listed[uri]; !ok {
			add = append(add, &mcp.Resource{URI: uri, Name: i.ID + " output", Title: "Output of " + i.ID + ": " + shorten(i.Label, 80), MIMEType: "text/plain",
				Description: "The cleaned last 64 KiB of " + i.ID + "'s output, while it runs (" + shorten(i.Label, 200) + ")."})
			c.listed[uri] = struct{}{}
		}
	}
	c.mu.Unlock()
	slices.SortFunc(add, func(a, b *mcp.Resource) int { return strings.Compare(a.URI, b.URI) })
	for _, r := range add {
		c.server.AddResource(r, c.readResource)
	}
	if len(remove) > 0 {
		c.server.RemoveResources(remove...)
	}
}

// shorten cuts s to at most n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// disconnected runs when the session ends.
func (c *conn) disconnected() {
	svc := c.svc
	if back := c.answers.returnAll(); len(back) > 0 {
		svc.cfg.Logger.Info("the client went before it got these results; they wait to be delivered again", "session", c.session.ID(), "tasks", back)
	}
	c.mu.Lock()
	why := c.why
	c.mu.Unlock()
	if why == "" && svc.cfg.Keep != nil && c.err == nil {
		if c.release() {
			svc.cfg.Logger.Info("session detached; its tasks go on", "session", c.session.ID())
			svc.cfg.Keep.Detached(c.session)
		}
		return
	}
	if why == "" {
		why = "the client went away (its connection or session ended)"
	}
	if svc.cfg.KeepOnDisconnect {
		svc.cfg.Logger.Info("session ended; its tasks keep running", "session", c.session.ID(), "tasks", len(c.table.List()))
		select {
		case <-svc.ctx.Done():
		case <-c.done:
		}
		why = "the server was shut down (its client had gone, and KeepOnDisconnect kept its tasks until then)"
	}
	if err := c.close(context.Background(), why); err != nil { // agent.Session.Close bounds it
		svc.cfg.Logger.Error("closing a session's tasks", "err", err)
	}
}

// closingFor records why the session of server is about to end (an
// HTTP DELETE, the idle policy, a shutdown), for its tasks, and returns
// its conn (nil if there is none).
func (s *Service) closingFor(server *mcp.Server, why string) *conn {
	s.mu.Lock()
	var c *conn
	for x := range s.conns {
		if x.server == server {
			c = x
			break
		}
	}
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	if c.why == "" {
		c.why = why
	}
	c.mu.Unlock()
	return c
}

// closeFor closes the session of server now, for why: its tasks are
// cancelled and reaped, and its calls in flight answered (a task_wait
// with the results the close gave), before the SDK ends the session,
// which waits for those calls. An HTTP DELETE waited for them before,
// as long as a task_wait's timeout (up to 300 s), its tasks running on
// (an outsider's finding).
func (s *Service) closeFor(server *mcp.Server, why string) {
	if c := s.closingFor(server, why); c != nil {
		if err := c.close(context.Background(), why); err != nil { // agent.Session.Close bounds it
			s.cfg.Logger.Error("closing a session's tasks", "err", err)
		}
	}
}

// close cancels and reaps the session's tasks, once; why says what ended
// the session, for the tasks (task.Closed).
func (c *conn) close(ctx context.Context, why string) error {
	// A conn is listed in svc.conns, where Close finds it, while start is
	// still giving it its table: wait for start to finish.
	c.once.Do(func() {})
	c.closeOnce.Do(func() {
		if c.session != nil {
			c.closeErr = c.session.CloseCause(ctx, task.Closed("mcp: "+why))
		}
		c.forget()
	})
	return c.closeErr
}

// release lets go of the session without closing it (Config.Keep): its
// goroutines here end, and the Service forgets it. It reports whether it
// did, once: false if the session was closed first.
func (c *conn) release() bool {
	c.once.Do(func() {})
	released := false
	c.closeOnce.Do(func() {
		released = true
		c.forget()
	})
	return released
}

// forget ends the session's goroutines and takes it out of the Service.
func (c *conn) forget() {
	close(c.done)
	c.svc.mu.Lock()
	delete(c.svc.conns, c)
	close(c.svc.left)
	c.svc.left = make(chan struct{})
	c.svc.mu.Unlock()
}

// handler serves one tool for this session. A result that is not an
// error carries its JSON as structuredContent too, if the tool publishes
// an output schema (structured), which it then fits.
func (c *conn) handler(name string, structured bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c.start(req.Session)
		if c.err != nil {
			return errorResult("offstage cannot serve this session: " + c.err.Error()), nil
		}
		var tool *tools.Tool
		for _, t := range c.tools {
			if t.Name == name {
				tool = t
			}
		}
		if tool == nil {
			return errorResult("no tool " + name), nil
		}
		ctx, span := tracing.Root(ctx, c.svc.cfg.Agent.Tracer, "execute_tool "+name, nil, tracing.OperationName.String("execute_tool"),
			tracing.ToolName.String(name), tracing.Conversation(c.session.ID()))
		defer span.End()
		if token := req.Params.GetProgressToken(); token != nil && name == "task_wait" && req.Session != nil {
			stop := c.progress(ctx, req.Session, token, req.Params.Arguments)
			defer stop()
		}
		ctx, stopGone := connectionGone(ctx)
		defer stopGone()
		ctx, held := c.answers.hold(ctx, req.Params.Meta)
		defer held()
		res, err := tool.Call(ctx, c.view, req.Params.Arguments)
		if err != nil {
			c.svc.cfg.Logger.Error("tool failed in the runtime", "tool", name, "err", err)
			return errorResult("offstage failed to run " + name + ": " + err.Error()), nil
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}, IsError: res.IsError}
		if !res.IsError && structured {
			out.StructuredContent = json.RawMessage(res.Text)
		}
		return out, nil
	}
}

// connectionGone returns a ctx that ends with a tool call's request ctx,
// and whose cause, when the SDK ended that because the connection did
// (its cause is then the read's error; a cancel notification from the
// client has none), says the client went away, as an *task.EndError by
// the session: a foreground command the call ends records that, not a
// user's cancel. stop must be called once the call returns.
func connectionGone(req context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(req))
	after := context.AfterFunc(req, func() {
		cause := context.Cause(req)
		switch {
		case errors.Is(cause, context.Canceled), errors.Is(cause, context.DeadlineExceeded):
			cancel(cause) // the client cancelled the call: a user's cancel
		case errors.Is(cause, io.EOF):
			cancel(task.Ended(task.BySession, "mcp: the client went away (its connection ended)"))
		default:
			cancel(task.Ended(task.BySession, "mcp: the client went away (its connection failed: "+text.OneLine(cause.Error(), 200)+")"))
		}
	})
	return ctx, func() {
		after()
		cancel(nil)
	}
}

func errorResult(msg string) *mcp.CallToolResult {
	b, _ := text.JSON(tools.ErrorOutput{Error: msg})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: true}
}

// progress sends task_wait's progress notifications until stop is called.
func (c *conn) progress(ctx context.Context, ss *mcp.ServerSession, token any, args json.RawMessage) (stop func()) {
	var in struct {
		TaskIDs []any `json:"task_ids"`
	}
	json.Unmarshal(args, &in)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		ticker := time.NewTicker(c.svc.cfg.ProgressInterval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			var running []string
			for _, raw := range in.TaskIDs {
				id := strings.TrimSpace(fmt.Sprint(raw))
				if info, err := c.view.Info(id); err == nil && !info.State.Finished() {
					running = append(running, id)
				}
			}
			elapsed := time.Since(start).Round(time.Second)
			msg := fmt.Sprintf("waited %s; still running: %s", elapsed, strings.Join(running, ", "))
			if len(running) == 0 {
				msg = fmt.Sprintf("waited %s", elapsed)
			}
			ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: elapsed.Seconds(), Message: msg})
		}
	}()
	return func() { cancel(); <-done }
}

const resourcePrefix, resourceSuffix = "offstage://task/", "/output"

// resourceBytes is how much of a shell's output a resource read returns.
const resourceBytes = 64 << 10

// process returns the process behind a shell's output resource: nil, and
// no error, for a shell that has none yet (queued, or just starting); an
// error for anything else that is not one of the session's shells.
func (c *conn) process(uri string) (*proc.Process, error) {
	id, ok := strings.CutPrefix(uri, resourcePrefix)
	if ok {
		id, ok = strings.CutSuffix(id, resourceSuffix)
	}
	if !ok || id == "" || c.view == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	p, ok := tools.Shell(c.view, id)
	if !ok {
		if info, err := c.view.Info(id); err == nil && info.Kind == "shell" {
			if out, _ := c.view.Output(id); out == nil {
				return nil, nil // queued, or just starting: no output yet
			}
		}
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return p, nil
}

func (c *conn) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	c.start(req.Session)
	p, err := c.process(req.Params.URI)
	if err != nil {
		return nil, err
	}
	var text string
	if p != nil {
		text = proc.Clean(p.TailLines(proc.Combined, 1<<30, resourceBytes).Data)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: text}}}, nil
}

func (c *conn) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	c.start(req.Session)
	p, err := c.process(req.Params.URI)
	if err != nil {
		return err
	}
	var written int64
	if p != nil {
		written = p.Written()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs[req.Params.URI] = written
	return nil
}

func (c *conn) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.subs, req.Params.URI)
	return nil
}

// updates notifies subscribers of output growth, at most once per
// interval per resource, until the session's state is released. It is
// woken by follow when a shell reports output or finishes (kick), never
// by a ticker: two hundred idle sessions cost no wake-ups (issue 35).
func (c *conn) updates() {
	for {
		select {
		case <-c.done:
			return
		case <-c.kick:
		}
		c.notifyUpdated()
		pause := time.NewTimer(c.svc.cfg.UpdateInterval)
		select {
		case <-c.done:
			pause.Stop()
			return
		case <-pause.C:
		}
	}
}

// wake tells updates that output may have grown.
func (c *conn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// notifyUpdated sends notifications/resources/updated for each
// subscribed output that grew since it was last notified.
func (c *conn) notifyUpdated() {
	c.mu.Lock()
	uris := make([]string, 0, len(c.subs))
	for uri := range c.subs {
		uris = append(uris, uri)
	}
	c.mu.Unlock()
	slices.Sort(uris)
	for _, uri := range uris {
		p, err := c.process(uri)
		if err != nil || p == nil {
			continue
		}
		n := p.Written()
		c.mu.Lock()
		last, ok := c.subs[uri]
		changed := ok && n != last
		if changed {
			c.subs[uri] = n
		}
		c.mu.Unlock()
		if changed {
			c.server.ResourceUpdated(c.svc.ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
}

// sdkLogger is the logger the SDK gets: a notification the client has no
// stream open for (a client that never opened the optional GET stream is
// told of no list change), or one left unsent as its session ends, is
// normal, not a warning, so it is logged at debug level.
func sdkLogger(l *slog.Logger) *slog.Logger { return slog.New(quietTransport{l.Handler()}) }

type quietTransport struct{ slog.Handler }

// closingNote says whether msg is the SDK's word that a notification was
// not sent because its session is ending: as ordinary as the end (an
// outsider's finding: a warning in offstage serve's log when a client
// closed its input as a list changed).
func closingNote(msg string) bool {
	return strings.HasPrefix(msg, "calling notifications/") &&
		(strings.Contains(msg, ": client is closing") || strings.Contains(msg, ": server is closing"))
}

func (h quietTransport) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && (strings.Contains(r.Message, "rejected by transport") || closingNote(r.Message)) {
		r.Level = slog.LevelDebug
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h quietTransport) WithAttrs(as []slog.Attr) slog.Handler {
	return quietTransport{h.Handler.WithAttrs(as)}
}
func (h quietTransport) WithGroup(name string) slog.Handler {
	return quietTransport{h.Handler.WithGroup(name)}
}
