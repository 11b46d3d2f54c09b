package acpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
)

// Config configures the agent.
type Config struct {
	// Agent is every session's configuration, the template agent.Open is
	// given: the model (required; it answers every session, and
	// sub-agents without their own), the system prompt, the profiles (nil
	// means agent.DefaultProfiles()), the tools, the task table's options,
	// the limits. Each session sets on its copy what is its own: the
	// shells' directory (Tools.Process.Dir, the cwd session/new gave),
	// Permit (asked after the template's, if any: the editor's permission
	// requests), ExtraTools (the template's, then the editor's MCP
	// servers' tools) and Tools.Escalate (see NoEscalation).
	Agent agent.Config
	// Surface is every session's agent.Surface: Journal, if set, records
	// each session (its conversation, tasks and their output logs) and
	// answers session/list and session/load from the sessions recorded
	// earlier (package journal's Recorder); Model describes the model in
	// the record; NoProjectInstructions turns off reading each session's
	// AGENTS.md (agent.FindProjectInstructions, from the session's cwd);
	// Logger (nil: Config.Logger) hears what Open read. Each session sets
	// Name ("acp"), ID and Resume.
	Surface agent.Surface
	// NoModel, with Agent.Model nil, says why there is no model and what
	// to set (no key, say): initialize is still answered, so an editor
	// shows a live agent, and session/new and session/load fail with
	// NoModel as their error's message, which the editor shows.
	NoModel string
	// AllowAll runs every tool call without asking the client (the
	// command's --yolo). Otherwise execute and destructive calls ask.
	AllowAll bool
	// NoEscalation refuses, without asking, every bash call with sandbox:
	// false while Agent.Tools.Process.Sandbox is on. Otherwise each such call is
	// a permission request saying "outside the sandbox", even with
	// AllowAll (Tools.Escalate is not used: the request is the user's
	// answer).
	NoEscalation bool
	// PromptWait bounds how long a prompt that arrives during an
	// autonomous turn waits for it before cancelling it. Default 30s.
	PromptWait time.Duration
	// MaxSessions bounds the sessions one connection holds at once (each
	// has a task table and two goroutines). Default 64.
	MaxSessions int
	// MCPTimeout bounds how long each of the editor's MCP servers may take
	// to start and list its tools when a session opens (they start at
	// once; session/new answers when all have or this passed). Default
	// 30s.
	MCPTimeout time.Duration
	// Logger receives diagnostics; nil discards them. Never stdout: on
	// stdio, stdout is the protocol.
	Logger *slog.Logger
	// Version is reported to clients.
	Version string
	// Keep, if set, keeps sessions across connections (see Keeper): a
	// connection that ends detaches its sessions, and session/load of a
	// live one attaches to it. Nil: a session ends with its connection.
	Keep *Keeper
}

const (
	defaultPromptWait  = 30 * time.Second
	defaultMaxSessions = 64
)

// Serve runs the agent for one client that writes to r and reads from w
// (the agent's stdin and stdout), until the client disconnects or ctx
// ends. Then every session is closed: its turn cancelled, its tasks
// cancelled and every process reaped. It returns once that is done.
func Serve(ctx context.Context, cfg Config, r io.Reader, w io.Writer) error {
	if cfg.Agent.Model == nil && cfg.NoModel == "" {
		return errors.New("acpserver: Config.Agent.Model is nil, and Config.NoModel does not say why")
	}
	if cfg.PromptWait <= 0 {
		cfg.PromptWait = defaultPromptWait
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = defaultMaxSessions
	}
	if cfg.MCPTimeout <= 0 {
		cfg.MCPTimeout = defaultMCPTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Surface.Logger == nil {
		cfg.Surface.Logger = cfg.Logger
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Malformed lines are answered and skipped before the SDK, which alone
	// would log and drop them (or hang up on an overlong one).
	// When the input ends, the requests already read are answered (for up
	// to DrainGrace) before the SDK sees the end, which cancels them.
	reqCtx, endRequests := context.WithCancelCause(ctx)
	defer endRequests(nil)
	srv := &server{cfg: cfg, ctx: ctx, reqCtx: reqCtx, sessions: make(map[acp.SessionId]*session), prompts: make(map[acp.SessionId]*answer), opens: make(map[string]func())}
	guarded, out := rpcline.New(r, w, rpcline.Options{MaxLine: maxLine, Drain: DrainGrace,
		Dropped:      func(why string) { cfg.Logger.Warn("dropped a message from the client", "why", why) },
		Check:        srv.check,
		Notification: notification,
		Take:         srv.take})
	srv.out = out
	in := gate(guarded)
	srv.conn = acp.NewAgentSideConnection(srv, out, in)
	srv.conn.SetLogger(cfg.Logger)
	in.open()
	why := "the client went away (its connection closed)"
	select {
	case <-srv.conn.Done():
	case <-ctx.Done():
		why = "the agent was stopped (" + context.Cause(ctx).Error() + ")"
	}
	guarded.Close() // a drain under way stops: everything closes now
	// As the SDK cancels its requests' contexts; a turn they cancel
	// records why (connectionGone).
	endRequests(task.Ended(task.BySession, "acp: "+why))
	err := srv.closeAll(why)
	cancel() // a session/new still starting the editor's MCP servers stops
	srv.waitAnswering()
	return err
}

// server is one connection's agent: the sessions the client made.
type server struct {
	cfg  Config
	ctx  context.Context // ends with the connection
	conn *acp.AgentSideConnection
	out  *rpcline.Writer // the connection's output, shared with the SDK: whole lines (wire.go)
	// reqCtx ends when the connection's input does: the prompts' requests
	// are its children (prompt.go), as the SDK's requests are its
	// connection's. Its cause is a *task.EndError saying the client went
	// away (connectionGone).
	reqCtx context.Context

	// answering counts the requests answered on goroutines of their own
	// (take: session/new, session/close), which Serve waits for; none
	// starts once closed is set.
	answering sync.WaitGroup

	mu       sync.Mutex
	opening  int                        // guarded by mu: places reserved for sessions being opened (reserve)
	sessions map[acp.SessionId]*session // guarded by mu
	prompts  map[acp.SessionId]*answer  // guarded by mu: each session's prompt being answered (prompt.go)
	opens    map[string]func()          // guarded by mu: the session/new being answered, by their ids' cancelKey → what cancels it
	closed   bool                       // guarded by mu
	// ended says why a session this connection held was closed under it
	// (Keeper.CloseSession: offstage sessions close), for a prompt that
	// still names it; at most maxEnded are kept.
	ended map[acp.SessionId]error // guarded by mu
}

// check is the line guard's Options.Check: checkParams, and
// $/cancel_request seen for the prompts answered here.
func (srv *server) check(method string, params json.RawMessage) error {
	if method == "$/cancel_request" {
		srv.cancelRequest(params)
	}
	return checkParams(method, params)
}

// notification is the line guard's Options.Notification: a client sends
// session/cancel, the protocol's $/ messages and extensions' _ ones as
// notifications; anything else it sends so is dropped (the SDK would run
// a session/new, or a session/load, and answer nobody).
func notification(method string) bool {
	return method == acp.AgentMethodSessionCancel || strings.HasPrefix(method, "$/") || strings.HasPrefix(method, "_")
}

var _ acp.Agent = (*server)(nil)

func (srv *server) Initialize(ctx context.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "offstage", Title: acp.Ptr("offstage"), Version: srv.cfg.Version},
		AgentCapabilities: acp.AgentCapabilities{
			// Text, and text carried in resources (files the editor
			// attaches); no images or audio: the prompt is text to the
			// model.
			PromptCapabilities:  acp.PromptCapabilities{EmbeddedContext: true},
			SessionCapabilities: srv.sessionCapabilities(),
			LoadSession:         srv.cfg.Surface.Journal != nil,
			// The editor's MCP servers: stdio always, and these.
			McpCapabilities: acp.McpCapabilities{Http: true, Sse: true},
		},
		AuthMethods: []acp.AuthMethod{},
	}, nil
}

func (srv *server) Authenticate(ctx context.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, invalid("offstage needs no authentication: the model's key comes from its environment")
}

func (srv *server) NewSession(ctx context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	s, err := srv.openSession(ctx, p)
	if err != nil {
		return acp.NewSessionResponse{}, err
	}
	return acp.NewSessionResponse{SessionId: s.id}, nil
}

// openSession starts the session session/new asks for; the end of ctx
// (the request cancelled) stops the start of the editor's MCP servers.
func (srv *server) openSession(ctx context.Context, p acp.NewSessionRequest) (*session, error) {
	if err := srv.noModel(); err != nil {
		return nil, err
	}
	if err := checkCwd(p.Cwd); err != nil {
		return nil, err
	}
	if err := srv.reserve(); err != nil {
		return nil, err
	}
	id := srv.newID()
	s, err := newSession(srv, ctx, id, filepath.Clean(p.Cwd), false, p.McpServers)
	if err != nil {
		srv.unreserve()
		return nil, internal("%s", err.Error())
	}
	if err := srv.add(id, s); err != nil {
		return nil, err
	}
	srv.cfg.Logger.Info("session started", "session", id, "cwd", p.Cwd, "mcp_servers", len(p.McpServers))
	return s, nil
}

// startNewSession answers a session/new the line guard handed over
// (take), on a goroutine of its own that Serve waits for
// (answerNewSession); $/cancel_request naming it cancels it: the start of
// its MCP servers stops, and it is answered cancelled (-32800), its
// session closed. Once the connection is closing, it says so instead.
func (srv *server) startNewSession(id json.RawMessage, key string, p acp.NewSessionRequest) {
	ck := cancelKey(id) // never "": the guard passes string and integer ids alone
	srv.mu.Lock()
	if srv.closed {
		srv.mu.Unlock()
		srv.respondLine(key, appendResponse(nil, id, nil, internal("%s", "the agent is shutting down")))
		return
	}
	ctx, cancel := context.WithCancel(srv.reqCtx)
	srv.opens[ck] = cancel
	srv.answering.Go(func() {
		defer func() {
			srv.mu.Lock()
			delete(srv.opens, ck)
			srv.mu.Unlock()
			cancel()
		}()
		srv.answerNewSession(ctx, id, key, p)
	})
	srv.mu.Unlock()
}

// waitAnswering waits for the requests answered on goroutines of their
// own (startNewSession, startClose): a session/new under way when the
// connection ended closes the session it made and what it started. It
// waits up to
// sendGrace: past it, one is stuck writing its answer to a client that
// reads nothing, and ends with that write.
func (srv *server) waitAnswering() {
	done := make(chan struct{})
	go func() {
		srv.answering.Wait()
		close(done)
	}()
	wait := time.NewTimer(sendGrace)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
		srv.cfg.Logger.Warn("a request's answer is stuck on a client that is not reading; returning without it")
	}
}

// answerNewSession answers a session/new the line guard handed over
// (take), on a goroutine of its own as the SDK did (the editor's MCP
// servers may take Config.MCPTimeout to start), its stack grown first
// (growStack): the response, and the slash commands after it in the same
// write (session.announceAfter). A timer announced them 100 ms after the
// response before, so the prompt an editor sends at once went the long
// way (session.prompt, which announces first): a new session's first
// prompt cost twice its second.
func (srv *server) answerNewSession(ctx context.Context, id json.RawMessage, key string, p acp.NewSessionRequest) {
	growStack(0)
	s, err := srv.openSession(ctx, p)
	switch {
	case err == nil && ctx.Err() != nil: // cancelled while it started: the session the client gave up on goes
		srv.mu.Lock()
		delete(srv.sessions, s.id)
		srv.mu.Unlock()
		s.close("its session/new was cancelled")
		err = context.Cause(ctx)
	case err == nil:
		s.announceAfter(key, appendResponse(nil, id, acp.NewSessionResponse{SessionId: s.id}, nil))
		return
	}
	srv.respondLine(key, appendResponse(nil, id, nil, err))
}

// startClose answers a session/close of session sid the line guard
// handed over (take): the session leaves the connection at once, on the
// reading goroutine, so that what the client sent after the close finds
// it closed (a prompt is refused, saying so; a session/new has its
// place), and is closed on a goroutine of its own, its stack grown first
// (growStack), which answers; closing reaps its processes. On the SDK's
// goroutine the close came after what followed it, at random: a prompt
// sent after it ran in the closing session, and a session/new found no
// place (an outsider's findings).
func (srv *server) startClose(id json.RawMessage, key string, sid acp.SessionId) {
	s, err := srv.leave(sid)
	if err != nil {
		srv.respondLine(key, appendResponse(nil, id, nil, err))
		return
	}
	go func() {
		defer srv.answering.Done()
		growStack(0)
		resp, err := closeLeft(s)
		srv.respondLine(key, appendResponse(nil, id, resp, err))
	}()
}

// noModel is the error of a session asked for while the agent has no
// model (Config.NoModel), or nil.
func (srv *server) noModel() error {
	if srv.cfg.Agent.Model != nil {
		return nil
	}
	return internal("%s", srv.cfg.NoModel)
}

// checkCwd refuses a session directory that is not an absolute path to a
// directory that exists, quoting it to at most 200 characters (one of
// megabytes was echoed whole, twice: message and data).
func checkCwd(cwd string) error {
	q := text.Quote(cwd, 200)
	if !filepath.IsAbs(cwd) {
		return invalid("cwd %s is not an absolute path; send the project's absolute directory", q)
	}
	st, err := os.Stat(cwd)
	switch {
	case errors.Is(err, syscall.ENAMETOOLONG):
		return invalid("cwd %s is longer than this system takes for a path (%d bytes)", q, len(cwd))
	case err != nil || !st.IsDir():
		return invalid("cwd %s is not a directory that exists", q)
	}
	return nil
}

func (srv *server) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	s, err := srv.session(p.SessionId)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	text, err := promptText(p.Prompt)
	if err != nil {
		return acp.PromptResponse{}, err
	}
	return s.prompt(ctx, text)
}

func (srv *server) Cancel(ctx context.Context, p acp.CancelNotification) error {
	srv.cancelPrompt(p.SessionId)
	s, err := srv.session(p.SessionId)
	if err != nil {
		srv.cfg.Logger.Info("cancel for an unknown session", "session", p.SessionId)
		return nil // a notification has no answer
	}
	s.cancel()
	return nil
}

func (srv *server) CloseSession(ctx context.Context, p acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	s, err := srv.leave(p.SessionId)
	if err != nil {
		return acp.CloseSessionResponse{}, err
	}
	defer srv.answering.Done()
	return closeLeft(s)
}

// leave takes session sid off the connection for session/close, or says
// why it cannot (no such session; the connection closing, which closes
// it). The caller then closes it (closeLeft) and answers, counted in
// answering, which Serve waits for, until it calls answering.Done.
func (srv *server) leave(sid acp.SessionId) (*session, error) {
	srv.mu.Lock()
	s, ok := srv.sessions[sid]
	if ok && !srv.closed {
		delete(srv.sessions, sid)
		srv.rememberLocked(sid, errClosedByClient)
		srv.answering.Add(1) // with closed checked: never once Serve waits
		srv.mu.Unlock()
		return s, nil
	}
	srv.mu.Unlock()
	if _, err := srv.session(sid); err != nil {
		return nil, err
	}
	return nil, internal("%s", "the agent is shutting down")
}

// closeLeft closes s, which leave took, and returns session/close's
// answer.
func closeLeft(s *session) (acp.CloseSessionResponse, error) {
	if err := s.close("session/close"); err != nil {
		return acp.CloseSessionResponse{}, internal("%s", err.Error())
	}
	return acp.CloseSessionResponse{}, nil
}

func (srv *server) sessionCapabilities() acp.SessionCapabilities {
	c := acp.SessionCapabilities{Close: &acp.SessionCloseCapabilities{}}
	if srv.cfg.Surface.Journal != nil {
		c.List = &acp.SessionListCapabilities{}
	}
	return c
}

func (srv *server) ListSessions(ctx context.Context, p acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	if srv.cfg.Surface.Journal == nil {
		return acp.ListSessionsResponse{}, notOffered(acp.AgentMethodSessionList, "this agent keeps no journal")
	}
	cwd := ""
	if p.Cwd != nil {
		cwd = filepath.Clean(*p.Cwd)
	}
	all, err := srv.cfg.Surface.Journal.List(ctx, cwd, 200)
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled ($/cancel_request, the end of the connection):
			// the journal is fine, and the SDK answers "Request cancelled".
			return acp.ListSessionsResponse{}, ctx.Err()
		}
		return acp.ListSessionsResponse{}, internal("listing the recorded sessions: %s", err.Error())
	}
	list := []acp.SessionInfo{}
	for _, s := range all {
		if s.Surface == "mcp" {
			continue // an MCP session has no conversation to load
		}
		info := acp.SessionInfo{SessionId: acp.SessionId(s.ID), Cwd: s.Dir, UpdatedAt: acp.Ptr(s.Updated.UTC().Format(time.RFC3339))}
		if s.Title != "" {
			info.Title = acp.Ptr(s.Title)
		}
		list = append(list, info)
	}
	return acp.ListSessionsResponse{Sessions: list}, nil
}

// LoadSession continues a recorded session: its conversation is replayed
// to the client as updates, then it goes on as any session, its task ids
// numbered on; results it had not been told and tasks a restart orphaned
// reach the model with the next prompt.
func (srv *server) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	if srv.cfg.Surface.Journal == nil {
		return acp.LoadSessionResponse{}, notOffered(acp.AgentMethodSessionLoad, "this agent keeps no journal")
	}
	if err := checkCwd(p.Cwd); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	if _, err := srv.session(p.SessionId); err == nil {
		return acp.LoadSessionResponse{}, invalid("session %s is already open on this connection", quoted(p.SessionId))
	}
	if err := srv.reserve(); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	added := false // add takes the place reserve held, whatever it says
	defer func() {
		if !added {
			srv.unreserve()
		}
	}()
	if srv.cfg.Keep != nil {
		s, live, err := attachSession(srv, p.SessionId)
		switch {
		case err != nil:
			return acp.LoadSessionResponse{}, invalid("session %s is live, and cannot be loaded here: %s", quoted(p.SessionId), err.Error())
		case live:
			// Live: its own conversation is replayed, and what its model
			// has not seen waits in its table for the next prompt.
			history := s.sess.History()
			s.replay(history)
			s.flush(ctx)
			added = true
			if err := srv.add(p.SessionId, s); err != nil {
				return acp.LoadSessionResponse{}, err
			}
			srv.cfg.Logger.Info("live session attached", "session", p.SessionId, "messages", len(history))
			return acp.LoadSessionResponse{}, nil
		}
	}
	// A live session has its model; one loaded from the journal needs
	// this agent's (asked after, so that a held session says it is held).
	if err := srv.noModel(); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	s, err := newSession(srv, ctx, p.SessionId, filepath.Clean(p.Cwd), true, p.McpServers)
	switch {
	case errors.Is(err, agent.ErrUnknownSession):
		// The whole id only: a start of one would load that session under
		// the name sent (ACP ids are exact), and one that several ids
		// start with is no session either.
		return acp.LoadSessionResponse{}, invalid("unknown session %s: session/load takes a whole sessionId, as session/list gives them", quoted(p.SessionId))
	case err != nil:
		return acp.LoadSessionResponse{}, internal("loading session %s: %s", quoted(p.SessionId), err.Error())
	}
	history := s.sess.History()
	s.replay(history)
	s.flush(ctx)
	added = true
	if err := srv.add(p.SessionId, s); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	srv.cfg.Logger.Info("session loaded", "session", p.SessionId, "cwd", p.Cwd, "messages", len(history))
	return acp.LoadSessionResponse{}, nil
}

func (srv *server) ResumeSession(ctx context.Context, p acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, notOffered(acp.AgentMethodSessionResume, "use session/load, which loadSession offers when the agent keeps a journal")
}

func (srv *server) SetSessionConfigOption(ctx context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, notOffered(acp.AgentMethodSessionSetConfigOption, "offstage has no session config options")
}

func (srv *server) SetSessionMode(ctx context.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, notOffered(acp.AgentMethodSessionSetMode, "offstage has no session modes")
}

// add makes s the connection's session id, in the place reserve held,
// unless the connection is closing or has a session of that id: then it
// closes s and says why. The place is given back either way.
func (srv *server) add(id acp.SessionId, s *session) error {
	srv.mu.Lock()
	srv.opening--
	_, taken := srv.sessions[id]
	closed := srv.closed
	if !closed && !taken {
		srv.sessions[id] = s // the check and the insert are one critical section
		delete(srv.ended, id)
	}
	srv.mu.Unlock()
	switch {
	case closed:
		s.close("the agent was shutting down")
		return internal("%s", "the agent is shutting down")
	case taken: // a session/load of the same id at the same time
		s.close("a session of that id was loaded at the same time")
		return invalid("session %s is already open on this connection", quoted(id))
	}
	return nil
}

// reserve holds a place for a session being opened (session/new,
// session/load), or says why there is none: the sessions being opened
// count toward Config.MaxSessions with those open, so that a burst of
// session/new starts no more sessions, and no more of the editor's MCP
// servers, than the cap (an outsider sent 150 at once: 150 servers
// started for 64 places). add, or unreserve, gives the place back.
func (srv *server) reserve() error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	switch {
	case srv.closed:
		return internal("%s", "the agent is shutting down")
	case len(srv.sessions)+srv.opening >= srv.cfg.MaxSessions:
		return srv.fullError()
	}
	srv.opening++
	return nil
}

// unreserve gives back a place reserve held for a session that did not
// open.
func (srv *server) unreserve() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.opening--
}

// fullError is the refusal of a session past Config.MaxSessions: a
// server's limit (-32000, as JSON-RPC leaves those codes to servers), not
// a malformed request.
func (srv *server) fullError() *acp.RequestError {
	n := fmt.Sprintf("%d sessions", srv.cfg.MaxSessions)
	if srv.cfg.MaxSessions == 1 {
		n = "1 session"
	}
	return rpcError(-32000, "Too many sessions", "this connection already holds "+n+", open or opening, the most it may; close one with session/close first")
}

// session returns the session called id, or an error for the client.
func (srv *server) session(id acp.SessionId) (*session, error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	s, ok := srv.sessions[id]
	if !ok {
		if cause := srv.ended[id]; cause != nil {
			if srv.cfg.Surface.Journal == nil { // nothing to load it from
				return nil, invalid("session %s was closed (%s): create one with session/new", quoted(id), cause.Error())
			}
			return nil, invalid("session %s was closed (%s): session/load it to go on with its conversation, or create one with session/new", quoted(id), cause.Error())
		}
		if srv.cfg.Keep != nil { // sessions outlive the connection: load it
			return nil, invalid("session %s is not open on this connection: session/load it (session/list lists them), or create one with session/new", quoted(id))
		}
		return nil, invalid("unknown session %s: create one with session/new (sessions do not survive a restart of the agent)", quoted(id))
	}
	return s, nil
}

// maxEnded bounds server.ended.
const maxEnded = 64

// closedUnder takes s, the session id that the keeper is closing with
// cause while this connection holds it, out of the connection's
// sessions: the id is free again, so a session/load loads it from the
// journal as after a restart (it answered "already open"), and a prompt
// that names it is told it was closed and how to go on.
func (srv *server) closedUnder(id acp.SessionId, s *session, cause error) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.sessions[id] != s {
		return // session/close, or the connection's end, took it first
	}
	delete(srv.sessions, id)
	srv.rememberLocked(id, cause)
}

// errClosedByClient is why a session the client closed is gone.
var errClosedByClient = errors.New("by session/close")

// rememberLocked keeps why session id ended, for a request that names it
// later: at most maxEnded of them (when full, it starts again, empty).
func (srv *server) rememberLocked(id acp.SessionId, cause error) {
	if srv.ended == nil || len(srv.ended) >= maxEnded {
		srv.ended = make(map[acp.SessionId]error)
	}
	srv.ended[id] = cause
}

// closeAll closes every session, once the connection is gone, for why.
func (srv *server) closeAll(why string) error {
	srv.mu.Lock()
	srv.closed = true
	all := make([]*session, 0, len(srv.sessions))
	for id, s := range srv.sessions {
		all = append(all, s)
		delete(srv.sessions, id)
	}
	srv.mu.Unlock()
	var errs []error
	for _, s := range all {
		if s.kept != nil {
			s.detach(why) // Config.Keep: it goes on without the connection
			continue
		}
		errs = append(errs, s.close(why))
	}
	return errors.Join(errs...)
}

// invalid is a JSON-RPC "invalid params" error whose message says what
// to fix (clients show the message; the SDK's helpers put it in data).
func invalid(format string, args ...any) *acp.RequestError {
	return rpcError(-32602, "Invalid params", fmt.Sprintf(format, args...))
}

// notOffered is "Method not found" for a method the capabilities do not
// offer, saying why in message, not only in data.
func notOffered(method, why string) *acp.RequestError {
	return rpcError(-32601, "Method not found", method+" is not offered: "+why)
}

// internal is a JSON-RPC internal error that says what went wrong.
func internal(format string, args ...any) *acp.RequestError {
	return rpcError(-32603, "Internal error", fmt.Sprintf(format, args...))
}

// connectionGone is the cause to cancel a turn with when its prompt's
// request ctx ended: the connection's end, which names itself (reqCtx's
// cause), or nil for the client's own cancel of the request, a user's.
func connectionGone(ctx context.Context) error {
	var e *task.EndError
	if errors.As(context.Cause(ctx), &e) {
		return e
	}
	return nil
}

// quoted is a session id as an error names it: quoted, control
// characters escaped, at most 80 characters (a client may send anything).
func quoted(id acp.SessionId) string { return text.Quote(string(id), 80) }

func rpcError(code int, kind, sentence string) *acp.RequestError {
	return &acp.RequestError{Code: code, Message: kind + ": " + sentence, Data: map[string]any{"error": sentence}}
}

// newID names a new session as every surface does (agent.NewID: sortable
// by time, as `offstage tasks` lists them), one not open on this
// connection. Two sessions started in the same second differ in their
// random part; in the rare case they do not, another is drawn.
func (srv *server) newID() acp.SessionId {
	for {
		id := acp.SessionId(agent.NewID())
		srv.mu.Lock()
		_, taken := srv.sessions[id] // not srv.session: its error for a free id cost a formatted sentence and a map
		srv.mu.Unlock()
		if !taken {
			return id
		}
	}
}
