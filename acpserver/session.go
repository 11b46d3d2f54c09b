package acpserver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/chanctx"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// session is one ACP session: an agent.Session driven by its Run loop,
// and its output (outbox.go).
type session struct {
	srv   *server
	id    acp.SessionId
	sess  *agent.Session
	tools []*tools.Tool // sess.Tools(), which do not change: toolOf looks a call's tool up there

	input   chan string   // prompts, to Run
	stopRun func()        // ends Run
	ran     chan struct{} // closed when Run returned
	done    chan struct{} // closed by close: nothing waits to write any more
	out     outbox        // its updates, written in order

	prompting chan struct{} // capacity 1: held by the prompt that runs
	// between is set at a prompted turn's end and cleared when an
	// autonomous turn starts: while no prompt runs, it says the Run loop
	// reads input next, once the turn's goroutine has written the
	// response and returned (give waits for it). It stays set through
	// the prompted turns that follow: a prompt that comes during one
	// finds prompting held, and waits as session.prompt does.
	between   atomic.Bool
	cancelled chan struct{} // capacity 1: a session/cancel a waiting prompt must see
	turnEnds  chan agent.Event

	announce      sync.Once   // the available commands, once the client knows the session
	announced     atomic.Bool // set once announce has added them
	announceTimer *time.Timer // set before the session is listed; stopped by close

	mcp      []*mcpServer // the editor's MCP servers, closed with the session
	kept     *kept        // with Config.Keep: what outlives the connection; nil otherwise
	problems []string     // what went wrong connecting them, told the user with the commands

	mu     sync.Mutex
	answer *answer             // guarded by mu: the prompt handed over (handOver) whose response its turn's end owes
	cards  map[string]*card    // guarded by mu: task id → the tool call that started it
	always map[grant]bool      // guarded by mu: tools the user allowed for good, per scope
	spawns map[string][]string // guarded by mu: tool call id → tasks it started, while its result is pending

	dialogs  dialogs              // one permission request open at a time
	subCalls map[string][]subCall // guarded by mu: sub-agent id → its allowed calls whose cards are in_progress

	closeOnce sync.Once
	closeErr  error
}

func newSession(srv *server, abort context.Context, id acp.SessionId, cwd string, resume bool, mcpServers []acp.McpServer) (*session, error) {
	s := blankSession(srv, id)
	life, permit := srv.ctx, s.permit
	var kp *kept
	if k := srv.cfg.Keep; k != nil {
		kp = &kept{}
		life, permit = k.ctx, kp.permit // the session outlives the connection, and asks whoever holds it
	}
	started := srv.connectMCP(life, abort, mcpServers, cwd)
	s.mcp, s.problems = started.servers, started.problems
	cfg, sf := srv.sessionConfig(cwd, permit, started.tools)
	sf.ID, sf.Resume = string(id), resume
	sess, err := agent.Open(life, cfg, sf)
	if err != nil {
		closeMCP(s.mcp)
		return nil, err
	}
	s.sess = sess
	if kp != nil {
		kp.sess, kp.mcp = sess, s.mcp
		s.kept = kp
		if err := srv.cfg.Keep.add(id, kp, s); err != nil {
			sess.Close(context.Background())
			closeMCP(s.mcp)
			return nil, err
		}
	}
	s.start(life)
	return s, nil
}

// attachSession gives srv the kept session id, detached from the
// connection that made it: ok is false when the keeper has none.
func attachSession(srv *server, id acp.SessionId) (s *session, ok bool, err error) {
	s = blankSession(srv, id)
	kp, ok, err := srv.cfg.Keep.take(id, s)
	if !ok || err != nil {
		return nil, ok, err
	}
	s.sess, s.mcp, s.kept = kp.sess, kp.mcp, kp
	s.start(srv.cfg.Keep.ctx)
	return s, true, nil
}

// blankSession is a session's connection side, before its agent session.
func blankSession(srv *server, id acp.SessionId) *session {
	return &session{
		srv: srv, id: id,
		input:     make(chan string),
		ran:       make(chan struct{}),
		done:      make(chan struct{}),
		out:       outbox{token: make(chan struct{}, 1)},
		cancelled: make(chan struct{}, 1),
		prompting: make(chan struct{}, 1),
		turnEnds:  make(chan agent.Event, 1),
		cards:     make(map[string]*card),
		always:    make(map[grant]bool),
		subCalls:  make(map[string][]subCall),
		spawns:    make(map[string][]string),
	}
}

// start runs the session's Run loop, under life.
func (s *session) start(life context.Context) {
	s.tools = s.sess.Tools()
	runCtx, stop := context.WithCancel(life)
	s.stopRun = stop
	go func() {
		defer close(s.ran)
		growStack(0)
		s.sess.Run(runCtx, s.input, s)
	}()
	// The client learns the session's id from the response to
	// session/new, written after this returns: the commands follow it
	// shortly, or come first thing in the first prompt.
	s.announceTimer = time.AfterFunc(100*time.Millisecond, s.announceCommands)
}

// sessionConfig returns a session's configuration in cwd: the template's
// (Config.Agent, Config.Surface) with what is the session's own.
func (srv *server) sessionConfig(cwd string, permit func(context.Context, agent.ToolCall) error, extra []*tools.Tool) (agent.Config, agent.Surface) {
	cfg, sf := srv.cfg.Agent, srv.cfg.Surface
	sf.Name = "acp"
	cfg.Tools.Process.Dir = cwd
	if cfg.Tools.Process.Sandbox.On() && !srv.cfg.NoEscalation {
		// permit asks the user about every sandbox: false call, so a
		// call that gets this far was allowed.
		cfg.Tools.Escalate = func(context.Context, string, string) error { return nil }
	}
	cfg.ExtraTools = append(slices.Clip(cfg.ExtraTools), extra...)
	cfg.Permit = permit
	if first := srv.cfg.Agent.Permit; first != nil {
		cfg.Permit = func(ctx context.Context, c agent.ToolCall) error {
			if err := first(ctx, c); err != nil {
				return err
			}
			return permit(ctx, c)
		}
	}
	return cfg, sf
}

// announceCommands offers the slash commands, once, and says which of
// the editor's MCP servers did not start: the first updates the client
// can take, once it knows the session.
func (s *session) announceCommands() {
	s.announce.Do(func() {
		var cmds []acp.AvailableCommand
		for _, c := range agent.Commands() {
			ac := acp.AvailableCommand{Name: c.Name, Description: c.Description}
			if c.Arg != "" {
				ac.Input = &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: c.Arg}}
			}
			cmds = append(cmds, ac)
		}
		s.update(acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: cmds}})
		for _, p := range s.problems {
			s.message(p + "\n")
		}
		s.announced.Store(true)
	})
}

// prompt runs one prompted turn and says why it stopped. A prompt that
// arrives during an autonomous turn waits for it, up to
// Config.PromptWait, then cancels it and goes first.
func (s *session) prompt(ctx context.Context, text string) (acp.PromptResponse, error) {
	select {
	case s.prompting <- struct{}{}:
	default:
		// One runs. The SDK cancels it when a client sends a new prompt
		// instead of session/cancel; this one waits for it to end (at most
		// PromptWait) and goes on, rather than losing both.
		wait := time.NewTimer(s.srv.cfg.PromptWait)
		defer wait.Stop()
		select {
		case s.prompting <- struct{}{}:
		case <-wait.C:
			return acp.PromptResponse{}, rpcError(-32600, "Invalid request", "a prompt is already running in this session; wait for it, or send session/cancel")
		case <-ctx.Done():
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		case <-s.done:
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil // the session closed under it (session/close, offstage sessions close)
		}
	}
	defer func() { <-s.prompting }()
	if ctx.Err() != nil {
		// Cancelled while it waited, by the prompt after it (whose own
		// wait it may have won) or by session/cancel: it never runs, least
		// of all after the prompt that replaced it (an outsider's
		// finding: two prompts sent at once to a new session ran in the
		// wrong order, 3 in 300).
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	select {
	case <-s.cancelled: // a cancel that came while no prompt ran is not this one's
	default:
	}
	s.announceCommands()
	if handled, resp := s.command(ctx, text); handled {
		return resp, nil
	}
	wait := time.NewTimer(s.srv.cfg.PromptWait)
	defer wait.Stop()
	for handed := false; !handed; {
		if ctx.Err() != nil { // a select would pick at random between it and the hand-over
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		select {
		case s.input <- text:
			handed = true
		case <-wait.C:
			s.srv.cfg.Logger.Info("a prompt waited for an autonomous turn too long; cancelling that turn", "session", s.id)
			s.sess.CancelTurn()
		case <-s.cancelled:
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		case <-ctx.Done():
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		case <-s.done:
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil // the session closed under it (session/close, offstage sessions close)
		}
	}
	var end agent.Event
	select {
	case end = <-s.turnEnds:
	case <-ctx.Done(): // the client gave up on the request, or went away
		s.sess.CancelTurnCause(connectionGone(ctx))
		select {
		case end = <-s.turnEnds:
		case <-s.done:
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
	case <-s.done:
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil // the session closed under it (session/close, offstage sessions close)
	}
	return s.response(end)
}

// response is a prompt's response once its turn ended so.
func (s *session) response(end agent.Event) (acp.PromptResponse, error) {
	r, err := stopReason(end)
	if err != nil {
		return r, err
	}
	return withUsage(r, end.Usage, s.sess.Usage()), nil
}

// handOver gives an idle session's Run loop the prompt's text from the
// reading goroutine, without waiting or, when the turn before has just
// ended, for as long as its goroutine takes to return (give), and reports
// whether it did; the turn's goroutine then answers a when the turn ends,
// with its last updates (turnEnd). It does not when the session is busy
// (a prompt or an autonomous turn runs), when text is a slash command,
// when the commands are not announced yet (announcing may wait on a full
// buffer), or when the request's context has ended: then session.prompt,
// on a goroutine of its own, waits and answers. What prompt does first, handOver does too:
// hold prompting, and discard a cancel that came while no prompt ran.
func (s *session) handOver(text string, a *answer) bool {
	if !s.announced.Load() || a.ended() || agent.IsCommand(strings.TrimSpace(text)) {
		return false
	}
	select {
	case s.prompting <- struct{}{}:
	default:
		return false
	}
	select {
	case <-s.cancelled:
	default:
	}
	s.mu.Lock()
	s.answer = a
	s.mu.Unlock()
	// The client giving up cancels the turn, as prompt's wait does; not
	// before the turn has the text (it would cancel an autonomous one).
	// a.mu is held until the turn is a's: the turn's release of a waits
	// for it.
	a.mu.Lock()
	defer a.mu.Unlock()
	if !s.give(text) {
		s.takeAnswer()
		<-s.prompting
		return false
	}
	a.turn = s
	if a.cancelled { // while it was being handed over
		s.sess.CancelTurn()
	}
	return true
}

// handOverWait bounds how long the reading goroutine waits for the Run
// loop of a session whose prompted turn just ended (see give).
const handOverWait = 5 * time.Millisecond

// give passes text to the Run loop if it waits for input, or is about to:
// the turn before this prompt has ended, and its goroutine is writing the
// response or returning to the loop. A client that reads the response and
// answers at once finds it there one prompt in eight on two cores; going
// the long way then (session.prompt: a goroutine, a timer, three more
// hand-offs) cost more than the wait, which is that write's. It waits at
// most handOverWait (a client that does not read its responses), and not
// at all while an autonomous turn runs.
func (s *session) give(text string) bool {
	select {
	case s.input <- text:
		return true
	default:
	}
	if !s.between.Load() {
		return false
	}
	wait := time.NewTimer(handOverWait)
	defer wait.Stop()
	select {
	case s.input <- text:
		return true
	case <-wait.C:
	case <-s.done:
	}
	return false
}

// takeAnswer returns the answer the turn's end owes, once.
func (s *session) takeAnswer() *answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.answer
	s.answer = nil
	return a
}

// release ends a handed-over prompt's hold on the session: its turn is no
// longer cancelled with its request, and the next prompt may run.
func (s *session) release(a *answer) {
	a.released()
	<-s.prompting
}

// stopReason maps how a turn ended to ACP.
func stopReason(end agent.Event) (acp.PromptResponse, error) {
	switch err := end.Err; {
	case err == nil:
		switch end.Stop {
		case provider.Refusal:
			return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
		case provider.MaxTokens:
			return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case errors.Is(err, agent.ErrTurnCanceled), errors.Is(err, context.Canceled):
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case errors.Is(err, agent.ErrIterationCap):
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, nil
	case errors.As(err, new(*agent.BudgetError)):
		// The user's own bound, not a failure: the turn ends as ACP's
		// limits do, with what it spent (turnEnd said which budget).
		if e := (*agent.BudgetError)(nil); errors.As(err, &e) && e.Budget == agent.BudgetTokens {
			return acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, nil
		}
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, nil
	default:
		return acp.PromptResponse{}, internal("%s", "the turn failed: "+err.Error())
	}
}

// command runs a prompt that is a slash command (agent.Commands) instead
// of a turn, and streams what it shows as the agent's message.
func (s *session) command(ctx context.Context, text string) (bool, acp.PromptResponse) {
	line := strings.TrimSpace(text)
	if !agent.IsCommand(line) {
		return false, acp.PromptResponse{}
	}
	cctx, cancel := chanctx.CancelOn(ctx, s.cancelled) // session/cancel stops a /wait
	defer cancel()
	s.sess.Command(cctx, line, func(out string) { s.message(out + "\n") })
	s.flush(ctx)
	reason := acp.StopReasonEndTurn
	if cctx.Err() != nil && ctx.Err() == nil {
		reason = acp.StopReasonCancelled
	}
	return true, acp.PromptResponse{StopReason: reason}
}

// cancel is session/cancel: the running turn stops (a waiting prompt
// returns cancelled); background tasks go on.
func (s *session) cancel() {
	select {
	case s.cancelled <- struct{}{}:
	default:
	}
	s.sess.CancelTurn()
}

// close ends the session, once: what waits to write is released first (a
// client that is alive but not reading must not stall the close), then
// its turn is cancelled, Run stops, every task is cancelled and every
// process reaped (agent.Session.Close), and what the session still holds
// is written (lastFlush).
// why says what closed it, for the tasks it ends (task.Closed).
func (s *session) close(why string) error { return s.closeCause(task.Closed("acp: " + why)) }

// closeCause is close with the cause the tasks it ends record: one that
// names who closed the session from outside its connection (offstage
// sessions close, through Keeper.CloseSession).
func (s *session) closeCause(cause error) error {
	s.closeOnce.Do(func() {
		s.stop(cause)
		if s.kept != nil {
			s.srv.cfg.Keep.forget(s.id)
		}
		s.closeErr = s.sess.CloseCause(context.Background(), cause)
		closeMCP(s.mcp) // no call is left: every task has ended, and the turn (unless stuck writing, waitRan)
		s.lastFlush()
	})
	return s.closeErr
}

// detach lets go of a kept session when its connection ends, for why:
// its turn is cancelled (no one would see the answer), its foreground
// command recording that the client went away (by the session, not a
// user), and Run stops, so no turn runs while no editor is connected;
// its tasks, shells and MCP servers go on.
func (s *session) detach(why string) {
	s.closeOnce.Do(func() {
		s.stop(task.Ended(task.BySession, "acp: "+why+"; the session goes on"))
		s.lastFlush()
		s.srv.cfg.Keep.release(s.id, s)
	})
}

// stop releases what waits to write (a client that is alive but not
// reading must not stall it), cancels the turn for cause (which its
// foreground command records: never a user's cancel) and stops Run.
func (s *session) stop(cause error) {
	close(s.done)
	s.announceTimer.Stop() // a session closed at once announces nothing
	s.sess.CancelTurnCause(cause)
	s.stopRun()
	s.waitRan()
}

// waitRan waits for Run to return, which it does once its turn is
// cancelled, unless a write of the session's is stuck on a client that
// reads nothing (the turn's goroutine writes its end): then it waits
// sendGrace for that write, and lets Run go, which returns when the write
// does (the connection closes, or the client reads again).
func (s *session) waitRan() {
	for {
		wait := time.NewTimer(sendGrace)
		select {
		case <-s.ran:
			wait.Stop()
			return
		case <-wait.C:
			if s.stuck(sendGrace) {
				s.srv.cfg.Logger.Warn("closed a session whose turn is stuck writing to a client that is not reading", "session", s.id)
				return
			}
		}
	}
}

// turnStack is about the stack a turn's goroutine grows to (a scripted
// turn that lists the tasks needed more than 8 KiB, less than 16).
const turnStack = 16 << 10

// growStack grows the calling goroutine's stack to turnStack at once: a
// goroutine starts with 2 KiB, and a session's first turn grew its Run
// loop's stack three times, each time copying a deep stack (its frames
// adjusted one by one), which cost a new session's first prompt a third
// of its time (24 µs against 17 with the stack grown first). Grown
// while the stack is shallow, it copies next to nothing. i is 0: an
// index the compiler cannot see through, so the array is kept.
//
//go:noinline
func growStack(i int) byte {
	var b [turnStack - 2<<10]byte // what the stack holds besides, and the runtime's guard, fit in the rest
	b[i] = 1
	return b[len(b)-1-i]
}
