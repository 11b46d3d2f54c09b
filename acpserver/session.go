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

// queueSize bounds a session's queue of updates not yet written. A full
// queue makes the session wait (the model's stream, tool calls and the
// task follower slow down to the client's pace); nothing is dropped. The
// queue's buffer is allocated with the session, whether or not it is
// ever used: at 1,024 it was a quarter of what a new session allocated
// (32 KB), and the sender, which joins the chunks queued behind each
// other, keeps up with a model's stream with far fewer. At 256 entries of
// a queued (an interface, 16 bytes) it is 4 KB.
const queueSize = 256

// session is one ACP session: an agent.Session driven by its Run loop, and
// the goroutine that writes its updates in order.
type session struct {
	srv   *server
	id    acp.SessionId
	sess  *agent.Session
	tools []*tools.Tool // sess.Tools(), which do not change: toolOf looks a call's tool up there

	input   chan string   // prompts, to Run
	stopRun func()        // ends Run
	ran     chan struct{} // closed when Run returned
	queue   chan queued   // to the sender
	done    chan struct{} // closed by close: emitters stop waiting on a full queue
	sent    chan struct{} // closed when the sender returned
	line    []byte        // the sender's: the update lines encoded and not yet written (wire.go, flushLines)
	joined  []byte        // the sender's: the text of chunks being joined (writeCoalesced)

	prompting chan struct{} // capacity 1: held by the prompt that runs
	cancelled chan struct{} // capacity 1: a session/cancel a waiting prompt must see
	turnEnds  chan agent.Event

	announce      sync.Once   // the available commands, once the client knows the session
	announced     atomic.Bool // set once announce has queued them
	announceTimer *time.Timer // set before the session is listed; stopped by close

	mcp      []*mcpServer // the editor's MCP servers, closed with the session
	kept     *kept        // with Config.Keep: what outlives the connection; nil otherwise
	problems []string     // what went wrong connecting them, told the user with the commands

	mu     sync.Mutex
	answer *answer             // guarded by mu: the prompt handed over (handOver) whose response the sender owes
	cards  map[string]*card    // guarded by mu: task id → the tool call that started it
	calls  map[string]*call    // guarded by mu: tool call id → what it is (until it ends)
	always map[grant]bool      // guarded by mu: tools the user allowed for good, per scope
	spawns map[string][]string // guarded by mu: tool call id → tasks it started, while its result is pending

	dialogs  dialogs              // one permission request open at a time
	subCalls map[string][]subCall // guarded by mu: sub-agent id → its allowed calls whose cards are in_progress

	closeOnce sync.Once
	closeErr  error
}

// queued is one entry of the sender's queue: an update to write
// (*acp.SessionUpdate, *chunk), or a marker whose channel is closed
// (chan struct{}) or turn end delivered (*agent.Event) once everything
// before it has been written. One interface, not a struct of the four:
// the queue's buffer, allocated with every session, is half the size
// (4 KB, not 8), and a new session's garbage is collected during the
// prompts that follow it.
type queued interface{}

// chunk is a message or thought chunk of the agent's, queued as its text
// alone: a model streams them word by word, and the sender joins those
// queued behind each other and encodes them itself (appendChunkLine),
// where an acp.SessionUpdate, its chunk and its content block were built
// for each word.
type chunk struct {
	thought bool
	text    string
}

// message queues a chunk of the agent's message.
func (s *session) message(text string) { s.push(&chunk{text: text}) }

// thought queues a chunk of the agent's thoughts.
func (s *session) thought(text string) { s.push(&chunk{thought: true, text: text}) }

func newSession(srv *server, id acp.SessionId, cwd string, resume bool, mcpServers []acp.McpServer) (*session, error) {
	s := blankSession(srv, id)
	life, permit := srv.ctx, s.permit
	var kp *kept
	if k := srv.cfg.Keep; k != nil {
		kp = &kept{}
		life, permit = k.ctx, kp.permit // the session outlives the connection, and asks whoever holds it
	}
	started := srv.connectMCP(life, mcpServers, cwd)
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
		queue:     make(chan queued, queueSize),
		done:      make(chan struct{}),
		sent:      make(chan struct{}),
		cancelled: make(chan struct{}, 1),
		prompting: make(chan struct{}, 1),
		turnEnds:  make(chan agent.Event, 1),
		cards:     make(map[string]*card),
		calls:     make(map[string]*call),
		always:    make(map[grant]bool),
		subCalls:  make(map[string][]subCall),
		spawns:    make(map[string][]string),
	}
}

// start runs the session's sender and Run loop, under life.
func (s *session) start(life context.Context) {
	s.tools = s.sess.Tools()
	runCtx, stop := context.WithCancel(life)
	s.stopRun = stop
	go s.send()
	go func() {
		defer close(s.ran)
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
		s.push(&acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: cmds}})
		for _, p := range s.problems {
			s.message(p + "\n")
		}
		s.announced.Store(true)
	})
}

// send writes the queue's updates in order until close.
func (s *session) send() {
	defer close(s.sent)
	for {
		select {
		case q := <-s.queue:
			s.writeCoalesced(q)
		case <-s.done:
			for { // what was queued before close still goes out
				select {
				case q := <-s.queue:
					s.write(q)
				default:
					s.flushLines()
					return
				}
			}
		}
	}
}

// writeCoalesced writes q, first joining to it the message or thought
// chunks of the same kind queued right behind it: a model streams word by
// word, and an editor gains nothing from a notification per word when the
// writer is behind anyway.
func (s *session) writeCoalesced(q queued) {
	for {
		c, ok := q.(*chunk)
		if !ok {
			break
		}
		s.joined = append(s.joined[:0], c.text...)
		for {
			select {
			case next := <-s.queue:
				if n, ok := next.(*chunk); ok && n.thought == c.thought && len(s.joined)+len(n.text) <= coalesceBytes {
					s.joined = append(s.joined, n.text...)
					continue
				}
				q = next
			default:
				q = nil
			}
			break
		}
		s.line = appendChunkLine(s.line, s.id, c.thought, s.joined)
		if cap(s.joined) > coalesceBytes {
			s.joined = nil // one long chunk is not kept for the session's life
		}
		if q == nil {
			s.written()
			return
		}
		if len(s.line) >= maxKeptLine {
			s.flushLines()
		}
	}
	s.write(q)
}

// coalesceBytes bounds a joined chunk.
const coalesceBytes = 16 << 10

func (s *session) write(q queued) {
	switch q := q.(type) {
	case *chunk:
		s.line = appendChunkLine(s.line, s.id, q.thought, q.text)
		s.written()
	case *acp.SessionUpdate:
		if line, ok := appendUpdate(s.line, s.id, q); ok {
			s.line = line
			s.written()
			return
		}
		s.flushLines()
		if err := s.srv.conn.SessionUpdate(s.srv.ctx, acp.SessionNotification{SessionId: s.id, Update: *q}); err != nil {
			s.srv.cfg.Logger.Debug("session update not sent", "session", s.id, "err", err)
		}
	case chan struct{}:
		s.flushLines()
		close(q)
	case *agent.Event:
		if a := s.takeAnswer(); a != nil {
			s.answerTurn(a, *q)
			return
		}
		s.flushLines()
		select {
		case s.turnEnds <- *q:
		case <-s.done:
		}
	}
}

// written writes the lines held unless more updates are queued behind
// them (and they are not too many).
func (s *session) written() {
	if len(s.queue) == 0 || len(s.line) >= maxKeptLine {
		s.flushLines()
	}
}

// flushLines writes the update lines encoded and not yet written, in one
// write. The sender holds lines back while more updates are queued behind
// them (a turn's updates come in bursts): one write, where each line was
// one, and one wake-up of the client's reader.
func (s *session) flushLines() {
	if len(s.line) > 0 {
		s.writeLines(len(s.line))
	}
}

// writeLines writes the update lines held, s.line[:at], and the response
// s.line[at:] after them if there is one, in one write.
func (s *session) writeLines(at int) {
	p := s.line
	if s.srv.ctx.Err() != nil { // as the SDK: no update goes out once the connection ended
		p, at = p[at:], 0
	}
	var err error
	switch {
	case at < len(p):
		_, err = s.srv.out.WriteEnding(p, at)
	case len(p) > 0:
		_, err = s.srv.out.Write(p)
	}
	if err != nil {
		s.srv.cfg.Logger.Debug("session update not sent", "session", s.id, "err", err)
	}
	s.line = s.line[:0]
	if cap(s.line) > maxKeptLine {
		s.line = nil
	}
}

// push queues q, waiting while the queue is full; after close it drops q
// (or queues it, if there is room: the sender's last drain may write it,
// as it may when the two cases below are ready together).
func (s *session) push(q queued) {
	select {
	case s.queue <- q: // the common case, without the cost of a select of two
		return
	default:
	}
	select {
	case s.queue <- q:
	case <-s.done:
	}
}

func (s *session) update(u acp.SessionUpdate) { s.push(&u) }

// flush waits until everything queued so far has been written.
func (s *session) flush(ctx context.Context) {
	ch := make(chan struct{})
	s.push(ch)
	select {
	case <-ch:
	case <-ctx.Done():
	case <-s.sent:
	}
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
// reading goroutine, without waiting, and reports whether it did; the
// sender then answers a once it has written the turn's updates
// (answerTurn). It does not when the session is busy (a prompt or an
// autonomous turn runs), when text is a slash command, when the commands
// are not announced yet (announcing may wait on the queue), or when the
// request's context has ended: then session.prompt, on a goroutine of its
// own, waits and answers. What prompt does first, handOver does too:
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
	// a.mu is held until the turn is a's: the sender's release of a waits
	// for it.
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case s.input <- text:
		a.turn = s
		if a.cancelled { // while it was being handed over
			s.sess.CancelTurn()
		}
		return true
	default:
		s.takeAnswer()
		<-s.prompting
		return false
	}
}

// takeAnswer returns the answer the sender owes, once.
func (s *session) takeAnswer() *answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.answer
	s.answer = nil
	return a
}

// answerTurn answers a prompt handed over, whose turn ended so; from the
// sender, in one write with the last of the turn's updates.
func (s *session) answerTurn(a *answer, end agent.Event) {
	r, err := stopReason(end)
	usage := s.sess.Usage() // before the next prompt may start
	s.release(a)
	a.done()
	at := len(s.line)
	if err != nil {
		s.line = appendResponse(s.line, a.id, nil, err)
	} else {
		s.line = appendPromptResponse(s.line, a.id, r.StopReason, end.Usage, usage)
	}
	s.writeLines(at)
}

// answerClosed answers a prompt handed over whose turn's end never came:
// the session closed, and the prompt is cancelled, as prompt answers
// then (an internal error told the editor of a fault where there was
// none, an outsider's finding).
func (s *session) answerClosed() {
	a := s.takeAnswer()
	if a == nil {
		return
	}
	s.release(a)
	if a.ended() {
		a.respond(acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil)
		return
	}
	a.respond(acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil)
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

// close ends the session, once: what waits on a full queue is released
// first (a client that is alive but not reading must not stall the
// close), then its turn is cancelled, Run stops, every task is cancelled
// and every process reaped (agent.Session.Close), and the sender stops.
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
		closeMCP(s.mcp) // no call is left: every turn and task has ended
		s.waitSent()
		s.answerClosed()
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
		s.waitSent()
		s.answerClosed()
		s.srv.cfg.Keep.release(s.id, s)
	})
}

// stop releases what waits on a full queue (a client that is alive but
// not reading must not stall it), cancels the turn for cause (which its
// foreground command records: never a user's cancel) and stops Run.
func (s *session) stop(cause error) {
	close(s.done)
	s.announceTimer.Stop() // a session closed at once announces nothing
	s.sess.CancelTurnCause(cause)
	s.stopRun()
	<-s.ran
}

// waitSent waits, a little, for the sender to write what it holds.
func (s *session) waitSent() {
	select {
	case <-s.sent:
	case <-time.After(sendGrace):
		// The sender is stuck writing to a client that reads nothing:
		// what it still holds goes with the connection.
		s.srv.cfg.Logger.Warn("closed a session whose client is not reading its updates", "session", s.id)
	}
}

// sendGrace bounds how long closing a session waits for its last updates
// to be written.
const sendGrace = 5 * time.Second
