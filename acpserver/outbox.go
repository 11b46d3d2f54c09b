package acpserver

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
)

// A session's updates are encoded by the goroutine that makes them, into
// one buffer (outbox), and written in order by whichever goroutine holds
// the session's writer's token: the turn's own goroutine when it ends,
// which writes the turn's last updates and the prompt's response in one
// write; a delayed flush, flushDelay after an update was added, for
// updates made while a turn runs long (a model's stream, a tool call's
// card) or while none runs (the task follower's); or the goroutine that
// added an update when the buffer holds maxBuffered already (the client
// reads slowly: the turn, the tool calls and the follower then go at its
// pace; nothing is dropped).
//
// A goroutine of its own per session wrote a queue of updates before:
// every prompt handed its updates to it, and its answer with them, one
// more hand-off between goroutines (and threads) per prompt, which cost
// more than encoding the updates did. Rejected too: writing each update
// at once from the goroutine that made it, one write (and one wake-up of
// the client) per update, where a turn's burst took one.

// flushDelay bounds how long an update waits before it is written when
// nothing writes it sooner: a turn that ends within it writes its updates
// with its response, in one write; a model's stream goes out in pieces of
// at most this long.
const flushDelay = time.Millisecond

// maxBuffered bounds the updates a session holds encoded and not yet
// written; past it, the goroutine that adds one writes them itself.
const maxBuffered = 64 << 10

// coalesceBytes bounds a joined chunk.
const coalesceBytes = 16 << 10

// outbox is a session's output.
type outbox struct {
	// token, of capacity 1, is held by the goroutine writing the session's
	// updates, which writes them in order until none is left.
	token chan struct{}

	mu      sync.Mutex
	buf     []byte      // guarded by mu: update lines encoded, not yet taken by a writer
	spare   []byte      // guarded by mu: a buffer written, emptied for reuse
	joined  []byte      // guarded by mu: the text of the message or thought chunks being joined
	joining bool        // guarded by mu: chunks are being joined (their text may be empty)
	thought bool        // guarded by mu: the chunks being joined are thoughts
	timer   *time.Timer // guarded by mu: the delayed flush, made with the first update
	armed   bool        // guarded by mu: a delayed flush is due (its timer runs, or its function does)
	since   time.Time   // guarded by mu: when the write under way began; zero when none
}

// message adds a chunk of the agent's message.
func (s *session) message(text string) { s.addChunk(false, text) }

// thought adds a chunk of the agent's thoughts.
func (s *session) thought(text string) { s.addChunk(true, text) }

// addChunk adds a message or thought chunk. A model streams them word by
// word: chunks of one kind added one after the other go out as one chunk
// of their joined text, up to coalesceBytes, where an update per word
// was encoded and sent.
func (s *session) addChunk(thought bool, text string) {
	o := &s.out
	o.mu.Lock()
	if o.joining && (o.thought != thought || len(o.joined)+len(text) > coalesceBytes) {
		s.encodeJoinedLocked()
	}
	was := o.mark()
	o.joining, o.thought = true, thought
	o.joined = append(o.joined, text...)
	s.addedLocked(was)
}

// update adds an update.
func (s *session) update(u acp.SessionUpdate) {
	o := &s.out
	o.mu.Lock()
	s.encodeJoinedLocked()
	was := o.mark()
	if line, ok := appendUpdate(o.buf, s.id, &u); ok {
		o.buf = line
	} else {
		o.buf = s.appendSDKUpdate(o.buf, &u)
	}
	s.addedLocked(was)
}

// cardStarted adds the tool_call update that starts a call's card, with
// its input as rawInput (appendCardStart).
func (s *session) cardStarted(call, title string, kind acp.ToolKind, input []byte) {
	raw, ok := asJSON(input)
	o := &s.out
	o.mu.Lock()
	s.encodeJoinedLocked()
	was := o.mark()
	if ok {
		o.buf = appendCardStart(o.buf, s.id, call, title, kind, acp.ToolCallStatusPending, raw, "")
	} else {
		o.buf = appendCardStart(o.buf, s.id, call, title, kind, acp.ToolCallStatusPending, nil, string(input))
	}
	s.addedLocked(was)
}

// cardEnded adds the tool_call_update that ends a call's card: its status,
// the text it shows, and the result as rawOutput (appendCardEnd).
func (s *session) cardEnded(call string, status acp.ToolCallStatus, text string, rawJSON jsonText, rawText string) {
	o := &s.out
	o.mu.Lock()
	s.encodeJoinedLocked()
	was := o.mark()
	o.buf = appendCardEnd(o.buf, s.id, call, status, text, rawJSON, rawText)
	s.addedLocked(was)
}

// cardStatusChanged adds the tool_call_update that sets a card's status
// (appendCardStatus).
func (s *session) cardStatusChanged(call string, status acp.ToolCallStatus) {
	o := &s.out
	o.mu.Lock()
	s.encodeJoinedLocked()
	was := o.mark()
	o.buf = appendCardStatus(o.buf, s.id, call, status)
	s.addedLocked(was)
}

// mark is what the outbox holds before an update is added, for
// addedLocked to take it back.
type mark struct {
	buf, joined int
	joining     bool
}

func (o *outbox) mark() mark { return mark{len(o.buf), len(o.joined), o.joining} }

// appendSDKUpdate appends the line of an update appendUpdate does not
// write (a plan, a diff, a terminal), encoded by the SDK's types as its
// SessionUpdate would send it.
func (s *session) appendSDKUpdate(dst []byte, u *acp.SessionUpdate) []byte {
	params, err := json.Marshal(acp.SessionNotification{SessionId: s.id, Update: *u})
	if err != nil {
		s.srv.cfg.Logger.Debug("session update not sent", "session", s.id, "err", err)
		return dst
	}
	dst = append(dst, `{"jsonrpc":"2.0","method":"`+acp.ClientMethodSessionUpdate+`","params":`...)
	dst = append(dst, params...)
	return append(dst, "}\n"...)
}

// encodeJoinedLocked encodes the chunk being joined, if any.
func (s *session) encodeJoinedLocked() {
	o := &s.out
	if !o.joining {
		return
	}
	o.buf = appendChunkLine(o.buf, s.id, o.thought, o.joined)
	o.joined, o.joining = o.joined[:0], false
	if cap(o.joined) > coalesceBytes {
		o.joined = nil // one long chunk is not kept for the session's life
	}
}

// addedLocked sees to what was just added (since was) being written, and
// unlocks o.mu: by the goroutine that added it when the session holds too
// much already, else flushDelay from now at the latest. Once the session
// is closed, what would overflow is dropped: nobody writes it any more.
func (s *session) addedLocked(was mark) {
	o := &s.out
	if len(o.buf)+len(o.joined) >= maxBuffered {
		o.mu.Unlock()
		if s.acquire(s.done, nil) {
			s.drain("", nil)
			return
		}
		o.mu.Lock()
		if len(o.buf)+len(o.joined) >= maxBuffered && was.buf <= len(o.buf) && was.joined <= len(o.joined) {
			o.buf, o.joined, o.joining = o.buf[:was.buf], o.joined[:was.joined], was.joining
		}
		o.mu.Unlock()
		return
	}
	if !o.armed {
		o.armed = true
		if o.timer == nil {
			o.timer = time.AfterFunc(flushDelay, s.delayedFlush)
		} else {
			o.timer.Reset(flushDelay)
		}
	}
	o.mu.Unlock()
}

// delayedFlush writes what the session holds, flushDelay after an update
// was added while none was due, unless a writer took it first.
//
// A writer does not stop the timer when it takes what the timer would
// have written: the timer runs out and finds nothing, once, where
// stopping it and setting it again at the next update did it for every
// prompt, and setting a timer sooner than any other wakes a thread (the
// runtime's, to wait for it).
func (s *session) delayedFlush() {
	o := &s.out
	o.mu.Lock()
	if len(o.buf) == 0 && !o.joining {
		o.armed = false
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	if !s.acquire(s.done, nil) {
		return // the session closed: its last flush writes what is left
	}
	o.mu.Lock()
	o.armed = false
	o.mu.Unlock()
	s.drain("", nil)
}

// acquire takes the writer's token, waiting while another goroutine
// writes, unless stop or also is closed first (also may be nil).
func (s *session) acquire(stop, also <-chan struct{}) bool {
	select {
	case s.out.token <- struct{}{}:
		return true
	default:
	}
	select {
	case s.out.token <- struct{}{}:
		return true
	case <-stop:
		return false
	case <-also:
		return false
	}
}

// drain writes, holding the token, what the session holds and what is
// added meanwhile, and gives the token back. respond, if set, appends the
// response to the request whose key (rpcline's Request.Key) is key after
// the lines held now: it goes out with them, in one write (rpcline's
// Writer.WriteAnswer).
func (s *session) drain(key string, respond func([]byte) []byte) {
	o := &s.out
	for {
		o.mu.Lock()
		s.encodeJoinedLocked()
		at := len(o.buf)
		if respond != nil {
			o.buf = respond(o.buf)
			respond = nil
		}
		p := o.buf
		if len(p) == 0 {
			<-o.token
			o.mu.Unlock()
			return
		}
		o.buf, o.spare = o.spare[:0], nil
		o.since = time.Now()
		o.mu.Unlock()
		s.writeLines(p, at, key)
		o.mu.Lock()
		o.since = time.Time{}
		switch {
		case cap(p) > maxKeptLine: // one long output is not kept for the session's life
		case len(o.buf) == 0 && cap(o.buf) == 0:
			o.buf = p[:0] // nothing came meanwhile: one buffer serves
		default:
			o.spare = p[:0]
		}
		o.mu.Unlock()
	}
}

// writeLines writes the update lines p[:at], and the response p[at:] to
// the request whose key is key after them if there is one, in one write.
func (s *session) writeLines(p []byte, at int, key string) {
	if s.srv.ctx.Err() != nil { // as the SDK: no update goes out once the connection ended
		p, at = p[at:], 0
	}
	var err error
	switch {
	case at < len(p):
		_, err = s.srv.out.WriteAnswer(p, at, key)
	case len(p) > 0:
		_, err = s.srv.out.Write(p)
	}
	if err != nil {
		s.srv.cfg.Logger.Debug("session update not sent", "session", s.id, "err", err)
	}
}

// announceAfter writes resp, the response to the session/new that opened
// the session (the request whose key is key), with the slash commands
// after it, in one write: the client learns the session's id, then its
// commands, and the first prompt finds them announced (handOver). Should
// the connection have ended meanwhile, resp goes alone.
func (s *session) announceAfter(key string, resp []byte) {
	s.announceCommands()
	s.announceTimer.Stop()
	if !s.acquire(s.done, nil) { // closed at once: its last flush took the rest
		s.srv.respondLine(key, resp)
		return
	}
	o := &s.out
	o.mu.Lock()
	s.encodeJoinedLocked()
	p := resp
	if s.srv.ctx.Err() == nil { // as writeLines: no update once the connection ended
		p = append(p, o.buf...)
	}
	o.buf = o.buf[:0]
	o.since = time.Now()
	o.mu.Unlock()
	s.srv.respondLine(key, p)
	o.mu.Lock()
	o.since = time.Time{}
	o.mu.Unlock()
	s.drain("", nil) // what came meanwhile; it gives the token back
}

// stuck reports whether a write of the session's has been under way for
// at least d: the client reads nothing.
func (s *session) stuck(d time.Duration) bool {
	s.out.mu.Lock()
	defer s.out.mu.Unlock()
	return !s.out.since.IsZero() && time.Since(s.out.since) >= d
}

// flush waits until everything added so far has been written.
func (s *session) flush(ctx context.Context) {
	if s.acquire(ctx.Done(), s.done) {
		s.drain("", nil)
	}
}

// turnEnd is the end of a prompted turn: the prompt handed over to it
// (handOver) is answered, after the turn's updates and in one write with
// the last of them; otherwise, once they are written, the prompt waiting
// for it (session.prompt) is told. It runs on the turn's goroutine.
func (s *session) turnEnd(end agent.Event) {
	s.between.Store(true)
	if errors.Is(end.Err, agent.ErrBudget) { // its stop reason alone would not say which budget
		s.message("\n\n⊘ " + end.Err.Error() + ".\n")
	}
	if !s.acquire(s.done, nil) {
		return // the session closed: close answers a prompt handed over
	}
	if a := s.takeAnswer(); a != nil {
		s.answerTurn(a, end)
		return
	}
	s.drain("", nil)
	select {
	case s.turnEnds <- end:
	case <-s.done:
	}
}

// answerTurn answers a prompt handed over, whose turn ended so, holding
// the token: in one write with the last of the turn's updates.
func (s *session) answerTurn(a *answer, end agent.Event) {
	r, err := stopReason(end)
	usage := s.sess.Usage() // before the next prompt may start
	s.release(a)
	a.done()
	s.drain(a.key, func(dst []byte) []byte {
		if err != nil {
			return appendResponse(dst, a.id, nil, err)
		}
		return appendPromptResponse(dst, a.id, r.StopReason, end.Usage, usage)
	})
}

// lastFlush writes, once the session is stopped, what it still holds,
// and answers a prompt handed over whose turn's end never came
// (cancelled, as prompt answers then): for up to sendGrace, the time a
// client that reads nothing is waited for. Past it, what is left goes
// with the connection, and the prompt is forgotten unanswered (its
// answer would wait behind the write that is stuck).
func (s *session) lastFlush() {
	wait := time.NewTimer(sendGrace)
	defer wait.Stop()
	giveUp := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		if !s.acquire(giveUp, nil) {
			return
		}
		a := s.takeAnswer()
		if a == nil {
			s.drain("", nil)
			return
		}
		s.release(a)
		a.done()
		s.drain(a.key, func(dst []byte) []byte {
			return appendResponse(dst, a.id, acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil)
		})
	}()
	select {
	case <-sent:
	case <-wait.C:
		close(giveUp)
		s.srv.cfg.Logger.Warn("closed a session whose client is not reading its updates", "session", s.id)
	}
	if a := s.takeAnswer(); a != nil {
		s.release(a)
		a.done()
	}
	s.out.mu.Lock()
	if s.out.timer != nil {
		s.out.timer.Stop() // its flush would find the session closed
	}
	s.out.mu.Unlock()
}

// sendGrace bounds how long closing a session waits for its last updates
// to be written.
const sendGrace = 5 * time.Second
