package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/offstage/offstage/mcpserver"
)

// The acknowledgements of a relayed mcp face. offstage mcp, under offstage
// serve, is a relay: the supervisor writes the session's answers to the
// relay's connection, and the relay passes them on to its client. The
// supervisor used to count a task_wait's results as delivered once it had
// written the answer to the connection; a client that died then, with the
// answer still in the socket or the relay's hands, never got them, and no
// later wait did either. Now the relay says how many bytes of the output
// its client has read, and the supervisor counts an answer once they
// cover it (mcpserver.RelayWriter); what they never cover is taken back
// when the connection ends, undelivered again. Where the client's end is
// a pipe, what it has read is what the relay wrote less what the pipe
// still holds (clientQueue): an answer left unread there when the client
// dies is not counted; elsewhere (a socket, a terminal, a file) what the
// relay wrote counts.
//
// The relay says so in control lines, between two lines of its client's
// input: the record separator (0x1e, which begins no JSON text), then
// "ack N" (the client has read the first N bytes of the output) or "eof" (the
// client's input ended: the connection stays open for the acks of what
// is answered after). A line of the client's that begins with the
// separator is no JSON-RPC message either way; the relay changes that
// byte to '?', so that the client cannot speak for the relay.

// ackMark begins a control line.
const ackMark = 0x1e

// maxControlLine bounds a control line ("\x1eack " and 19 digits).
const maxControlLine = 32

// relayAcks is the relay's side: it passes its client's input on to the
// supervisor, and tells it, at the first boundary between two lines of
// that input, how many bytes of output its client has read.
type relayAcks struct {
	c       io.ReadWriter // the connection to the supervisor
	passed  atomic.Int64  // bytes of the output written to the client
	queue   *clientQueue  // what the client has read of them; nil: all
	kick    chan struct{} // capacity 1: passed grew
	stopped chan struct{} // closed by stop: tell ends

	// outMu is held while a write to the client is under way and until
	// it is counted in passed, and by tellNow (before mu, never after):
	// a tellNow for a client that went (its reader gone) waits for the
	// write, so that what the client read before it went counts (an
	// outsider's finding: the watcher told the count before the write's,
	// and dropped the connection). A write to a client that went fails at
	// once.
	outMu sync.Mutex

	mu      sync.Mutex // held by whoever writes to c
	held    []byte     // guarded by mu: the start of the client's line being written, kept back (see sendInput)
	midLine bool       // guarded by mu: the last input byte sent was no newline
	told    int64      // guarded by mu: the count last told
	failed  error      // guarded by mu: the write to c that failed
	// recheck, while the client has not read everything written, kicks
	// tell again after wait (doubling up to maxRecheck): reading makes no
	// event on the writer's end, so the queue is looked at.
	recheck *time.Timer   // guarded by mu
	armed   bool          // guarded by mu: a recheck is due
	wait    time.Duration // guarded by mu: the last recheck's delay
	looked  int64         // guarded by mu: the count written at the last look
}

// The delays between two looks at a client's unread output: the first
// after firstRecheck, each after twice the one before, up to maxRecheck.
// A client that reads at once is looked at again after a millisecond; one
// that stopped reading, ten times a second.
const (
	firstRecheck = time.Millisecond
	maxRecheck   = 100 * time.Millisecond
)

// maxHeld bounds the start of a line the relay keeps back until its end.
// A longer line is passed on as it comes, and the acks wait for its end.
const maxHeld = 64 << 10

// newRelayAcks tells over c what the client has read of out.
func newRelayAcks(c io.ReadWriter, out io.Writer) *relayAcks {
	a := &relayAcks{c: c, queue: newClientQueue(out), kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	go a.tell()
	return a
}

// stop ends the goroutine that tells what was passed on.
func (a *relayAcks) stop() {
	close(a.stopped)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recheck != nil {
		a.recheck.Stop()
	}
}

// tell tells the supervisor what was passed on, as it grows, without
// holding up the copy of the output (a supervisor that stops reading
// must not stop the relay passing its answers on).
func (a *relayAcks) tell() {
	for {
		select {
		case <-a.kick:
		case <-a.stopped:
			return
		}
		a.mu.Lock()
		a.tellLocked()
		a.mu.Unlock()
	}
}

// tellLocked sends an ack of what the client has read, if it grew and
// the input is between two lines; while the client has not read all
// that was written, it looks again later (recheckLocked).
func (a *relayAcks) tellLocked() {
	if a.failed != nil {
		return
	}
	n := a.passed.Load()
	if a.queue != nil {
		wrote := n > a.looked
		a.looked = n
		if read := a.queue.readOf(n); read < n {
			n = read
			a.recheckLocked(wrote)
		}
	}
	if a.midLine || n <= a.told {
		return
	}
	a.told = n
	a.writeLocked(fmt.Appendf(nil, "%cack %d\n", ackMark, n))
}

// recheckLocked has tell look at the client's output again after the
// next delay, unless a look is due already; after a write, the delays
// start again from the first.
func (a *relayAcks) recheckLocked(wrote bool) {
	switch {
	case wrote:
		a.wait = 0
	case a.armed:
		return
	}
	a.wait = min(max(2*a.wait, firstRecheck), maxRecheck)
	a.armed = true
	if a.recheck == nil {
		a.recheck = time.AfterFunc(a.wait, a.rechecked)
	} else {
		a.recheck.Reset(a.wait)
	}
}

// rechecked is a recheck's time: tell looks again.
func (a *relayAcks) rechecked() {
	a.mu.Lock()
	a.armed = false
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

func (a *relayAcks) writeLocked(p []byte) {
	if a.failed != nil {
		return
	}
	if _, err := a.c.Write(p); err != nil {
		a.failed = err
	}
}

// copyIn passes the client's input on until it ends, then says so.
func (a *relayAcks) copyIn(stdin io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := stdin.Read(buf)
		if n > 0 && !a.sendInput(buf[:n]) {
			return // the connection is broken: the output's end says why
		}
		if err != nil {
			break
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.held) > 0 {
		a.sendHeldLocked()
		a.midLine = true
	}
	if a.midLine { // the last line, cut short: ended, so the ack can follow
		a.writeLocked([]byte("\n"))
		a.midLine = false
	}
	a.tellLocked()
	a.writeLocked([]byte{ackMark, 'e', 'o', 'f', '\n'})
}

// sendInput passes p, some of the client's input, on: up to its last
// newline, then an ack if one is due, then the rest. It reports false
// once a write to the supervisor has failed.
//
// The start of a line that has not ended yet is kept back until it does
// (up to maxHeld), so that the connection is between two lines whenever
// an ack is due: one goes out at once, not after the line's end, which a
// client that dies while writing a line never sends (an outsider's
// finding: the answer it had read counted as undelivered). The
// supervisor can do nothing with a line before its end anyway.
func (a *relayAcks) sendInput(p []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	start := !a.midLine && len(a.held) == 0
	for i, b := range p {
		if b == ackMark && start {
			p[i] = '?'
		}
		start = b == '\n'
	}
	tail := p
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		a.sendHeldLocked()
		a.writeLocked(p[:i+1])
		a.midLine = false
		a.tellLocked()
		tail = p[i+1:]
	}
	switch {
	case len(tail) == 0:
	case !a.midLine && len(a.held)+len(tail) <= maxHeld:
		a.held = append(a.held, tail...)
	default: // a long line: it goes as it comes
		a.sendHeldLocked()
		a.writeLocked(tail)
		a.midLine = true
	}
	return a.failed == nil
}

// sendHeldLocked passes on the start of a line kept back.
func (a *relayAcks) sendHeldLocked() {
	if len(a.held) == 0 {
		return
	}
	a.writeLocked(a.held)
	a.held = a.held[:0]
	if cap(a.held) > maxHeld { // not kept for the relay's life
		a.held = nil
	}
}

// tellNow sends an ack of what was passed on: before the relay drops the
// connection when its client has gone. A write to the client under way
// is waited for, and counts as far as it went. A line of the client's
// that was being passed on as it came (longer than maxHeld) is ended
// first, as at the end of its input: the client will never end it, and
// no ack goes out in the middle of a line (an outsider's finding: the
// answer read by a client that went while writing a long request counted
// as undelivered).
func (a *relayAcks) tellNow() {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	a.tellLast()
}

// tellLast sends the last ack, ending a line of the client's cut short
// first (tellNow), without waiting for a write to the client under way:
// what that write has passed on is not counted. A relay that is stopped
// tells so before it drops the connection: a client that stops its
// server right after reading an answer (SIGTERM), before the relay's
// next look at the pipe, would otherwise have it taken back.
func (a *relayAcks) tellLast() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.midLine {
		a.writeLocked([]byte("\n"))
		a.midLine = false
	}
	a.tellLocked()
}

// copyOut passes the supervisor's output on to the client until the
// connection ends, and has each write told.
func (a *relayAcks) copyOut(stdout io.Writer) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := a.c.Read(buf)
		if n > 0 {
			a.outMu.Lock()
			// What a write that failed part way passed on counts: the end
			// of an answer the client read may be in it (an outsider's
			// finding: two answers in one read, the client read the first
			// whole and went).
			w, werr := stdout.Write(buf[:n])
			a.passed.Add(int64(w))
			a.outMu.Unlock()
			if werr != nil {
				return werr
			}
			select {
			case a.kick <- struct{}{}:
			default:
			}
		}
		if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
			// Its end; reset where it closed with acks of ours unread.
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ackInput is the supervisor's side: a relayed mcp face's input, its
// client's lines with the relay's control lines between them, which it
// takes out and tells out of. After the relay's "eof", or once the
// supervisor cut the input (cut, a stop: what is answered after still
// counts once passed on), it reads on for the acks that follow, until the
// connection ends; when the connection ends, or says what it should not,
// the relay is gone for out.
type ackInput struct {
	br      *bufio.Reader
	out     *mcpserver.RelayWriter
	conn    net.Conn     // whose read deadline cuts the input
	cut     *atomic.Bool // set when the supervisor cut the input
	midLine bool         // the last byte passed on was no newline
	ended   bool         // the relay said its client's input ended, or it was cut
}

func (r *ackInput) Read(p []byte) (int, error) {
	if r.ended {
		return 0, io.EOF
	}
	for {
		b, err := r.br.Peek(1)
		if err != nil {
			return 0, r.failed(err)
		}
		if r.midLine || b[0] != ackMark {
			break
		}
		eof, err := r.control()
		if err != nil {
			return 0, r.failed(err)
		}
		if eof {
			r.ended = true
			go r.rest()
			return 0, io.EOF
		}
	}
	chunk, _ := r.br.Peek(min(len(p), r.br.Buffered()))
	if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
		chunk = chunk[:i+1]
		r.midLine = false
	} else {
		r.midLine = true
	}
	n := copy(p, chunk)
	r.br.Discard(n)
	return n, nil
}

// failed ends the input on err: the relay is gone, unless the supervisor
// cut the input (its read deadline), when the acks are read on.
func (r *ackInput) failed(err error) error {
	if r.cut != nil && r.cut.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		r.conn.SetReadDeadline(time.Time{})
		r.ended = true
		go r.rest()
		return err
	}
	r.out.Gone()
	return err
}

// rest reads the acks that follow the end of the input, until the
// connection ends; the client's lines that still come (after a cut) are
// dropped.
func (r *ackInput) rest() {
	defer r.out.Gone()
	atStart := !r.midLine
	for {
		b, err := r.br.Peek(1)
		if err != nil {
			return
		}
		if atStart && b[0] == ackMark {
			if _, err := r.control(); err != nil {
				return
			}
			continue
		}
		_, err = r.br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		atStart = err == nil
	}
}

// errControl is a control line that is none of the relay's.
var errControl = errors.New("offstage serve: the relay sent a control line it does not send (an offstage of another version?)")

// control reads a control line: it tells out of an ack, and reports
// whether it was the end of the client's input.
func (r *ackInput) control() (eof bool, err error) {
	line, err := r.br.Peek(min(maxControlLine, max(r.br.Buffered(), 1)))
	i := bytes.IndexByte(line, '\n')
	for i < 0 && err == nil && len(line) < maxControlLine {
		line, err = r.br.Peek(min(maxControlLine, len(line)+1))
		i = bytes.IndexByte(line, '\n')
	}
	if i < 0 {
		if err == nil || err == bufio.ErrBufferFull {
			err = errControl
		}
		return false, err
	}
	body := string(line[1:i])
	r.br.Discard(i + 1)
	if body == "eof" {
		return true, nil
	}
	num, ok := bytes.CutPrefix([]byte(body), []byte("ack "))
	n, perr := strconv.ParseInt(string(num), 10, 64)
	if !ok || perr != nil || n < 0 || len(num) == 0 || num[0] == '+' {
		return false, errControl
	}
	r.out.Passed(n)
	return false, nil
}
