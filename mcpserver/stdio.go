package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/rpcline"
)

// maxLine bounds one JSON-RPC message on stdio; a longer line is refused
// and skipped, so memory stays bounded whatever a peer sends. It is the
// SDK's own cap (mcp.DefaultMaxLineLength) less one, past which the SDK
// would end the session.
const maxLine = mcp.DefaultMaxLineLength - 1

// DrainGrace bounds how long, once stdin ends, the requests already read
// may take to be answered before they are answered "abandoned" and the
// session ends.
const DrainGrace = 5 * time.Second

// Stdio returns a transport over in and out (newline-delimited JSON-RPC,
// as MCP's stdio transport specifies) that survives bad input, where the
// SDK's own transport would end the session and with it every task: a
// line that is not JSON gets a parse error (-32700); a batch, a message
// nested deeper than rpcline.DefaultMaxDepth, or one that is not a JSON-RPC
// 2.0 message (an id that is not a string or an integer within ±2^53
// among them) an invalid-request error (-32600); either is then skipped
// and the session goes on. A request whose params have a field of the
// wrong type (tools/call's name, tasks/get's taskId, …) gets an
// invalid-params error (-32602) naming the field and what to send. When in ends, the requests already read are
// answered (for up to DrainGrace) before the session ends. Replies and
// the SDK's messages never interleave within a line. A result a call
// delivered counts as delivered even if its answer could not be written:
// Service.RunStdio takes such results back.
func Stdio(in io.Reader, out io.Writer) mcp.Transport {
	r, w := rpcline.New(in, out, rpcline.Options{MaxLine: maxLine, Drain: DrainGrace, Check: checkParams})
	return &mcp.IOTransport{Reader: r, Writer: w}
}

// RunStdio serves one session over in and out, as
// Server().Run(ctx, Stdio(in, out)) does, and takes back what an answer
// that never reached the client carried: when the answer to a tool call
// that delivered results (task_wait's, a foreground bash's) could not be
// written whole (the write failed on a client that died, or the request
// was abandoned at the end of input), or was never written (the session
// ended first), those results become undelivered again, so that a later
// task_wait, a resume or an attach delivers them once. An answer the
// pipe took counts as delivered, read or not: a client that dies with it
// unread in the pipe cannot be seen.
//
// Over a RelayWriter, an answer counts once the relay has passed it on whole,
// not once the output took it: one still in the relay's hands when the
// relay or its client goes is taken back too. (offstage's relay counts
// an answer passed on once its client has read it, where it can tell: one
// left unread in the client's pipe is taken back as well.) When the input ends,
// RunStdio waits (up to DrainGrace) for the relay to pass on what was
// written before the session ends; a failed write does not end it, as it
// does otherwise (the acks behind it are read first).
//
// When ctx ends, RunStdio returns once the session has, or DrainGrace
// later if an answer is still stuck on a client that reads nothing (an
// outsider's finding: offstage mcp, SIGTERMed, stayed for as long as its
// client did not read): what that answer carried is taken back, and the
// write is cut (rpcline's Writer.Cut) where out keeps write deadlines (a
// pipe or a socket through the poller: internal/pollfd), so that the
// session ends too; elsewhere it is left to end with the process. When
// the input ends, a write stuck on a client that reads nothing is cut in
// the same way once the requests read are answered or abandoned
// (DrainGrace): the session ends, and its tasks with it.
func (s *Service) RunStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	c := s.newConn()
	c.answers = newAnswers()
	sent := func(key string, written bool, _ int64) { c.answers.sent(key, written) }
	relay, relayed := out.(*RelayWriter)
	if relayed {
		sent = func(key string, written bool, end int64) {
			if !written {
				c.answers.sent(key, false)
				return
			}
			relay.reached(end, func(passed bool) { c.answers.sent(key, passed) })
		}
	}
	if relayed {
		out = relayOut{relay}
	}
	r, w := rpcline.New(in, out, rpcline.Options{MaxLine: maxLine, Drain: DrainGrace, Check: checkParams,
		Stamp: stampToolCalls, Sent: sent})
	var input io.ReadCloser = r
	if relayed {
		input = &settling{ReadCloser: r, relay: relay}
	}
	ran := make(chan error, 1)
	go func() { ran <- c.server.Run(ctx, &mcp.IOTransport{Reader: input, Writer: w}) }()
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
	}
	stuck := time.NewTimer(DrainGrace)
	defer stuck.Stop()
	select {
	case err := <-ran:
		return err
	case <-stuck.C:
	}
	// The write stuck on the client, and those queued behind it, are cut
	// where the output can be (a pipe or socket through the poller:
	// internal/pollfd), so that the session ends rather than waiting with
	// the process's end on them (Close waited for ever: an outsider's
	// finding).
	if w.Cut() {
		cut := time.NewTimer(DrainGrace)
		defer cut.Stop()
		select {
		case <-ran:
		case <-cut.C:
		}
	}
	back := c.answers.returnAll()
	s.cfg.Logger.Info("the client read nothing for "+DrainGrace.String()+" after the shutdown began: its session is left with an answer unwritten", "tasks taken back", back)
	return fmt.Errorf("mcpserver: an answer could not be written within %s of the shutdown (the client reads nothing)", DrainGrace)
}

// A RelayWriter is an output whose bytes a relay in the client's process
// passes on, and which learns from the relay how many it has: offstage
// serve's connection to offstage mcp, over which an answer the supervisor
// wrote would otherwise count as delivered though the relay's client died
// before the relay could pass it on. Given one as its output, RunStdio
// counts what an answer carried as delivered once the relay has passed
// the answer on whole, and takes it back once the relay is gone without.
// The transport around it tells it what the relay says: Passed, then Gone
// at the end. Its methods are safe for concurrent use.
type RelayWriter struct {
	w io.Writer

	mu      sync.Mutex
	written int64         // guarded by mu: bytes written to w
	writing int64         // guarded by mu: bytes of the writes under way
	passed  int64         // guarded by mu: bytes the relay passed on
	gone    bool          // guarded by mu: the relay passes nothing more on
	waits   []reachWait   // guarded by mu: what waits for bytes to be passed on
	changed chan struct{} // guarded by mu: closed and made again when passed or gone changes
}

// reachWait is a Reached waiting for its bytes.
type reachWait struct {
	end int64
	f   func(passed bool)
}

// NewRelayWriter returns a RelayWriter writing to w. Nothing else may
// write to w: the relay counts every byte it passes on.
func NewRelayWriter(w io.Writer) *RelayWriter {
	return &RelayWriter{w: w, changed: make(chan struct{})}
}

// Write writes p to the output.
func (r *RelayWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writing += int64(len(p))
	r.mu.Unlock()
	n, err := r.w.Write(p)
	r.mu.Lock()
	r.written += int64(n)
	r.writing -= int64(len(p))
	r.mu.Unlock()
	return n, err
}

// SyscallConn is the output's, where it has one: the transport looks
// through the RelayWriter to tell whether the output's reader is gone
// (the relay's end of the connection closed), as it does without one.
func (r *RelayWriter) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := r.w.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// Passed says the relay has passed on the first n bytes written. A count
// that goes back or past what was written is the relay's error: it is
// taken as far as it is true. A write under way counts as written: the
// relay can pass its bytes on, and say so, before the write returns (a
// count cut to what was written then was lost, and with it an answer the
// client had read, when no ack came after it).
func (r *RelayWriter) Passed(n int64) {
	r.mu.Lock()
	n = min(n, r.written+r.writing)
	if r.gone || n <= r.passed {
		r.mu.Unlock()
		return
	}
	r.passed = n
	var due []reachWait
	kept := r.waits[:0]
	for _, w := range r.waits {
		if w.end <= n {
			due = append(due, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waits[len(kept):])
	r.waits = kept
	r.signalLocked()
	r.mu.Unlock()
	for _, w := range due {
		w.f(true)
	}
}

// Gone says the relay passes nothing more on: what it has not passed on
// never reaches the client.
func (r *RelayWriter) Gone() {
	r.mu.Lock()
	if r.gone {
		r.mu.Unlock()
		return
	}
	r.gone = true
	due := r.waits
	r.waits = nil
	r.signalLocked()
	r.mu.Unlock()
	for _, w := range due {
		w.f(false)
	}
}

func (r *RelayWriter) signalLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// reached calls f(true) once the first end bytes written have been passed
// on, or f(false) once they never will be; perhaps before it returns.
func (r *RelayWriter) reached(end int64, f func(passed bool)) {
	r.mu.Lock()
	switch {
	case end <= r.passed:
		r.mu.Unlock()
		f(true)
	case r.gone:
		r.mu.Unlock()
		f(false)
	default:
		r.waits = append(r.waits, reachWait{end, f})
		r.mu.Unlock()
	}
}

// relayOut is RunStdio's output over a RelayWriter. A write that fails
// is reported to the SDK as written: the SDK ends a session on its first
// failed write and stops reading its input, and the input still holds
// the relay's acks for answers its client did read (the relay's client
// closed its end after reading an answer; the relay told, and closed the
// connection; the supervisor's next write, a list_changed notification
// or a later answer, failed first: an outsider's finding, 1 to 10 of 40
// results read and yet offered again). Over a relay the session ends with
// its input, which follows at once (the relay closed the connection, or
// the supervisor cut it), after every ack was read. What a failed write
// carried is never passed on, so the answer in it is taken back: the
// relay's count of bytes passed cannot reach its end.
type relayOut struct{ *RelayWriter }

func (o relayOut) Write(p []byte) (int, error) {
	o.RelayWriter.Write(p)
	return len(p), nil
}

// settle waits until what was written so far has been passed on, or the
// relay is gone, or ctx ends; then the relay counts as gone.
func (r *RelayWriter) settle(ctx context.Context) {
	for {
		r.mu.Lock()
		done := r.gone || r.passed >= r.written
		changed := r.changed
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			r.Gone()
			return
		}
	}
}

// settling is a session's input over a RelayWriter: at its end (after
// the guard's drain, every request read answered) it waits up to
// DrainGrace for the relay to pass on what was written, so that the
// session's end, which takes back what no answer was told of, comes after
// the relay told of every answer.
type settling struct {
	io.ReadCloser
	relay   *RelayWriter
	settled bool
}

func (s *settling) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if err != nil && !s.settled {
		s.settled = true
		ctx, cancel := context.WithTimeout(context.Background(), DrainGrace)
		s.relay.settle(ctx)
		cancel()
	}
	return n, err
}
