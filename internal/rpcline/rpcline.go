// Package rpcline guards a stream of newline-delimited JSON-RPC 2.0
// messages, as MCP's and ACP's stdio transports carry them, for the SDKs
// behind offstage's surfaces, which alone end the connection (MCP) or drop
// the line (ACP) on input they cannot take.
//
// Every line the Reader passes on is one JSON-RPC 2.0 object, re-encoded
// from what it understood (so an SDK never meets a key spelled in another
// case, a duplicate key or an id it would mangle). Every other non-blank
// line is answered on the Writer and skipped, and the stream goes on:
//   - not JSON: parse error (-32700), with the request's id if a scan of
//     the line finds one (a raw control character in a string), else null;
//   - longer than Options.MaxLine, or nesting deeper than
//     Options.MaxDepth: invalid request (-32600); an overlong line is
//     read to its end keeping only what its answer needs (bounded), so
//     the answer carries the request's id wherever in the line it is;
//   - a batch (a JSON array; MCP dropped batches in 2025-06-18 and ACP
//     never had them): one invalid-request error per member that needs an
//     answer, in an array, as JSON-RPC answers a batch;
//   - not a JSON-RPC 2.0 request or notification (no "jsonrpc":"2.0", a
//     method that is not a string, params that are not structured, an id
//     that is not a string or an integer within ±2^53, a null id on a
//     request (one on a method named "notifications/…" or "$/…" passes as
//     a notification), an id still in use by a request being answered):
//     invalid request (-32600);
//   - refused by Options.Check, the server's own look at its params:
//     the error Check gave (invalid params, -32602, unless it says
//     otherwise); a notification it refuses is dropped.
//
// A request the server answers itself (Options.Take) is not passed on:
// the server decodes it once and answers it on the Writer, and it is
// tracked as the SDK's are.
//
// An error reply carries the line's id when it has a usable one (a string
// or a number, echoed as sent), and null otherwise. Responses from the peer
// (to requests the server sent) are passed on when well formed and dropped
// otherwise, never answered: answering a response could start two guards
// answering each other for ever.
//
// # End of input
//
// The Reader and Writer of one stream (New) track the requests passed on
// until the Writer carries their response. When the input ends, the Reader
// holds back end of input until every such request is answered, for up to
// Options.Drain; then it answers those still pending itself (internal
// error, "abandoned"), drops their late responses, and returns end of
// input. The SDKs stop writing once they see end of input, so without this
// a request read just before it would get no reply.
//
// # Concurrency properties
//
// A Reader is read by one goroutine (the SDK's); Close may be called from
// any. The Writer is safe for concurrent use and serialises whole
// messages: the SDKs write each message with its newline in one call, and
// so do the Reader's replies, so the two never interleave within a line.
// Memory is bounded by the line cap, whatever a peer sends, plus one entry
// per request the server is still answering.
package rpcline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Options shape a stream's guard.
type Options struct {
	// MaxLine caps one message, in bytes (the SDK's own cap, if it has
	// one, minus one). Required.
	MaxLine int
	// MaxDepth caps how deep a message's objects and arrays nest, the
	// envelope included. Default DefaultMaxDepth.
	MaxDepth int
	// Drain bounds how long the end of input waits for the replies to the
	// requests already read. Zero does not wait.
	Drain time.Duration
	// Dropped, if set, is told about each message dropped without an
	// answer (a malformed response from the peer, a notification Check
	// refused), and why.
	Dropped func(why string)
	// Check, if set, is asked about each request and notification that
	// is otherwise well formed, with its method and params (nil when it
	// has none), before it is passed on: the server's own look at what
	// its SDK would decode, so a mistake is answered in words. An error
	// refuses it: a request is answered with the error (an *Error's code
	// and message; any other error as invalid params, -32602, its text
	// the message), a notification is dropped. It is called from the
	// reading goroutine and must not block.
	Check func(method string, params json.RawMessage) error
	// Notification, if set, reports whether method may come as a
	// notification (without an id); a notification of any other method
	// is dropped, and Dropped told why. A server's SDK would run a
	// request's handler for it and answer nobody: an ACP session/new
	// sent without an id made a session no client knew of.
	Notification func(method string) bool
	// Take, if set, is offered each request (a message with a method and
	// an id) that is otherwise well formed, before Check: a server that
	// answers a method itself, without its SDK's dispatch, takes it here
	// (acpserver takes session/prompt, to decode it once and spare the
	// SDK's goroutine). ok false leaves the request to Check and the SDK.
	// Otherwise err refuses it, answered as Check's is, or start, called
	// once the request's id is tracked (never when the id is in use),
	// begins answering it: its response goes on the Writer, one line
	// written as the SDKs write one ({"jsonrpc":"2.0","id":…), and the
	// request counts as pending, for the end of input, until it is
	// written. Take and start run on the reading goroutine: they must
	// not block, except to write on the Writer.
	Take func(Request) (start func(), ok bool, err error)
	// Stamp, if set, names for a request's method the member of its
	// params' _meta that gets the request's key ("" for none): the
	// Reader writes the key there, replacing whatever the peer sent
	// under that name, so that a server whose SDK hides a request's id
	// from its handler can tell which answer is its (see Sent). The key
	// is the request's own, a number the Reader gives each request in
	// turn, not its id: a peer may use an id again once the answer to
	// the first is being written, and each must be told of apart. A
	// request without params, or whose params or _meta are not objects,
	// passes unstamped. It is called from the reading goroutine and must
	// not block.
	Stamp func(method string) string
	// Sent, if set, is told of each response to a request passed on,
	// once its write has ended: the request's key (as Stamp writes it),
	// whether it was written whole, and, when it was, end: how many bytes
	// the Writer had written to the output by the end of that response
	// (a relay that tells which bytes reached the client tells which
	// answers did: mcpserver.Relay). False means the write failed
	// (the client is gone: a broken pipe) or the request was abandoned at
	// the end of input and its response dropped. True means the output
	// took it, not that the client read it: a client that dies with the
	// answer in the pipe is not seen. A response the SDK never writes
	// (it refuses to once its input has ended) is never told of. It is
	// called on the writing goroutine and must not block.
	Sent func(key string, written bool, end int64)
}

// Request is a request Options.Take is offered.
type Request struct {
	Method string
	ID     json.RawMessage // as sent: a string or an integer
	Params json.RawMessage // nil when it has none
	// Key is the request's among those pending, for Writer.WriteAnswer.
	Key string
}

// Error is an error reply Options.Check gives: its JSON-RPC code and the
// message a client shows, which says what is wrong and what to send.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

// DefaultMaxDepth is the nesting a message may have unless
// Options.MaxDepth says otherwise: far more than any MCP or ACP message
// needs (a handful of levels, a tool's arguments a few more), far less
// than where the SDKs' decoders give up (MCP's at 1,000 levels ends the
// connection).
const DefaultMaxDepth = 128

// maxSafeID bounds integer ids: past 2^53 the MCP SDK, which decodes ids
// as float64, would answer a different id.
const maxSafeID = 1 << 53

// New returns the two ends of a guarded stream: a Reader of in, whose
// error replies go to out, and the Writer to out that the SDK writes to.
func New(in io.Reader, out io.Writer, opts Options) (*Reader, *Writer) {
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	w := &Writer{w: out, gone: readerGone(out), sent: opts.Sent, pending: make(map[string]*request), token: make(chan struct{}, 1)}
	r := &Reader{r: bufio.NewReaderSize(in, 64<<10), w: w, opts: opts, closed: make(chan struct{})}
	return r, w
}

// Writer serialises writes to the stream's output and notes the responses
// to the requests its Reader passed on. Close does nothing: the stream's
// owner closes the output.
type Writer struct {
	// token, of capacity 1, is held by the goroutine writing a message:
	// it serialises whole messages, and, unlike a mutex, can be waited
	// for a while only (abandon).
	token chan struct{}
	w     io.Writer
	// gone, if set, says whether the output's reader is gone for good:
	// the drain then waits no more (see Reader.drain).
	gone func() bool
	// sent is Options.Sent.
	sent func(key string, written bool, end int64)
	// total is how many bytes were written to w; guarded by token.
	total int64

	mu        sync.Mutex
	pending   map[string]*request // guarded by mu: id key → a request passed on and not answered yet
	abandoned map[string]string   // guarded by mu: id keys answered by the guard at the end of input → the request's key
	idle      chan struct{}       // guarded by mu: closed when pending empties; nil until a drain waits
}

// request is a request passed on to the SDK.
type request struct {
	id       json.RawMessage
	key      string // its own (Options.Stamp), told to Options.Sent
	replying bool   // guarded by Writer.mu: its response is being written
}

// Write writes one message. A response to a request the guard abandoned
// is dropped (reported as written). A request counts as answered once
// its response is written, so a drain ends only after that.
func (l *Writer) Write(p []byte) (int, error) { return l.writeEnding(p, 0) }

// WriteEnding writes p, whole messages each with its newline, in one
// write, where p[at:] is a response (or any one message), noted as Write
// notes one: a server writes the notifications a request streamed and
// its response together, one write where there were two. When the
// response's request was abandoned, p[:at] alone is written.
func (l *Writer) WriteEnding(p []byte, at int) (int, error) { return l.writeEnding(p, at) }

// WriteAnswer is WriteEnding for the response p[at:] to the request
// whose Request.Key (Options.Take's) is key: the response is not read
// for its id. Lines that must follow the response may follow it in
// p[at:] (the first updates of the session it opened): they are dropped
// with it when its request was abandoned.
func (l *Writer) WriteAnswer(p []byte, at int, key string) (int, error) {
	return l.writeAnswer(p, at, key)
}

func (l *Writer) writeEnding(p []byte, at int) (int, error) {
	key, ok := responseKey(p[at:])
	if !ok {
		n, _, err := l.write(p)
		return n, err
	}
	return l.writeAnswer(p, at, key)
}

func (l *Writer) writeAnswer(p []byte, at int, key string) (int, error) {
	l.mu.Lock()
	r := l.pending[key]
	own, abandoned := l.abandoned[key]
	if r != nil {
		r.replying = true
	}
	l.mu.Unlock()
	if abandoned {
		if l.sent != nil {
			l.sent(own, false, 0)
		}
		if at > 0 {
			if _, _, err := l.write(p[:at]); err != nil {
				return 0, err
			}
		}
		return len(p), nil
	}
	n, end, err := l.write(p)
	// Told even if an abandon cleared the request while its answer was
	// being written (it skips those): the write went out, or failed. Told
	// before the request counts as answered, so that a drain waiting for
	// it ends after: a relayed session's end, which takes back what no
	// answer was told of, came before a busy writer told of the last one
	// (a test's flake under load, 1 run in 15).
	if r != nil && l.sent != nil {
		l.sent(r.key, err == nil, end)
	}
	l.mu.Lock()
	if r != nil && l.pending[key] == r {
		delete(l.pending, key)
		if len(l.pending) == 0 && l.idle != nil {
			close(l.idle)
			l.idle = nil
		}
	}
	l.mu.Unlock()
	return n, err
}

// write writes p, and returns how many bytes the output was written in
// all by the end of it.
func (l *Writer) write(p []byte) (int, int64, error) {
	l.token <- struct{}{}
	defer func() { <-l.token }()
	return l.writeHeld(p)
}

// writeHeld is write with the token held.
func (l *Writer) writeHeld(p []byte) (int, int64, error) {
	n, err := l.w.Write(p)
	l.total += int64(n)
	return n, l.total, err
}

// Close does nothing; it lets a Writer be an io.WriteCloser.
func (l *Writer) Close() error { return nil }

// track notes a request passed on; it reports false if its id is in use
// by a request not answered yet (one whose response is being written
// does not count: the peer may have read it already).
func (l *Writer) track(key string, id json.RawMessage, own string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.pending[key]; ok && !r.replying {
		return false
	}
	l.pending[key] = &request{id: id, key: own}
	delete(l.abandoned, key)
	return true
}

// inUse reports whether key is the id of a request passed on and not
// answered yet.
func (l *Writer) inUse(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.pending[key]
	return ok && !r.replying
}

// waiting returns a channel closed when no request is pending, or nil if
// none is.
func (l *Writer) waiting() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return nil
	}
	if l.idle == nil {
		l.idle = make(chan struct{})
	}
	return l.idle
}

// abandon answers every pending request with an error, saying how the
// input ended (cause: io.EOF, or the reader's error), and drops their
// late responses; after 0 (the output's reader is gone), it drops them
// unanswered. A write still stuck abandonWait later has the output cut.
func (l *Writer) abandon(after time.Duration, cause error) {
	l.mu.Lock()
	ids := make([]json.RawMessage, 0, len(l.pending))
	for key, r := range l.pending {
		if r.replying {
			continue // answered as we speak
		}
		ids = append(ids, r.id)
		if l.abandoned == nil {
			l.abandoned = make(map[string]string)
		}
		l.abandoned[key] = r.key
	}
	clear(l.pending)
	if l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	l.mu.Unlock()
	if after == 0 {
		return // the output's reader is gone: nobody to answer
	}
	how := "the input ended"
	if !errors.Is(cause, io.EOF) {
		how = "the input ended (" + cause.Error() + ")"
	}
	var msgs []byte
	for _, id := range ids {
		msgs = append(msgs, reply(id, -32603, fmt.Sprintf("Internal error: %s and this request was not answered within %s of it; it was abandoned", how, after))...)
	}
	// A write under way may be stuck on a client that reads nothing (its
	// turn's updates filled the pipe): waiting on it here would keep the
	// end of the input from the server for as long, and the server, its
	// sessions and their work from ending (an outsider's finding). After
	// abandonWait, the output is cut (Cut): that write fails, and so do
	// the ones queued behind it, which a server's end waits for (another
	// outsider's finding: an MCP session whose answers filled the pipe of
	// a client that then closed its input never ended, nor its shells).
	// The answers are left to a goroutine, and the input's end goes on.
	wait := time.NewTimer(abandonWait)
	defer wait.Stop()
	select {
	case l.token <- struct{}{}:
		if len(msgs) > 0 {
			l.writeHeld(msgs)
		}
		<-l.token
	case <-wait.C:
		l.Cut()
		if len(msgs) > 0 {
			go l.write(msgs)
		}
	}
}

// Cut ends the output for a session that is ending while its client
// reads nothing: the write under way, stuck on it, fails, and so does
// every write after it (what they carried is told to Options.Sent as not
// written). It can only where the output keeps write deadlines (a pipe
// or a socket read through the poller: internal/pollfd); it reports
// whether it could.
func (l *Writer) Cut() bool {
	d, ok := l.w.(interface{ SetWriteDeadline(time.Time) error })
	return ok && d.SetWriteDeadline(time.Unix(1, 0)) == nil
}

// abandonWait is how long abandon waits for a write under way before it
// leaves its answers to a goroutine.
const abandonWait = time.Second

// Reader passes valid messages on, one per line with its newline, and
// answers the rest on the Writer. Blank lines are dropped.
type Reader struct {
	r         *bufio.Reader
	w         *Writer
	opts      Options
	serial    uint64 // the last request's own key (Options.Stamp), from 1
	pending   []byte
	closeOnce sync.Once
	closed    chan struct{} // closed by Close: stop draining
}

func (t *Reader) Read(p []byte) (int, error) {
	for len(t.pending) == 0 {
		line, err := t.line()
		if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if out, rejection := t.check(msg); rejection != nil {
				t.w.write(rejection)
			} else if out != nil {
				t.pending = out
			}
		}
		if err != nil {
			if len(t.pending) > 0 {
				break
			}
			t.drain(err)
			return 0, err
		}
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

// Close stops a drain under way. It does not close the input, which the
// stream's owner closes.
func (t *Reader) Close() error {
	t.closeOnce.Do(func() { close(t.closed) })
	return nil
}

// drain waits, up to Options.Drain, until every request passed on is
// answered; then it answers the rest itself, saying the input ended with
// err. Where the output's reader is gone for good (a client that died:
// its input ended with it), nobody would read an answer: the drain stops
// at once, and the session ends, cancelling the calls in flight, whose
// results would otherwise be taken as given (a task_wait's marked
// delivered, an outsider's finding). It looks every goneEvery while it
// waits.
func (t *Reader) drain(err error) {
	if t.opts.Drain <= 0 {
		return
	}
	timer := time.NewTimer(t.opts.Drain)
	defer timer.Stop()
	var look <-chan time.Time
	if t.w.gone != nil {
		tick := time.NewTicker(goneEvery)
		defer tick.Stop()
		look = tick.C
	}
	for {
		idle := t.w.waiting()
		if idle == nil {
			return
		}
		if t.w.gone != nil && t.w.gone() {
			t.w.abandon(0, err)
			return
		}
		select {
		case <-idle:
		case <-look:
		case <-timer.C:
			t.w.abandon(t.opts.Drain, err)
			return
		case <-t.closed:
			return
		}
	}
}

// goneEvery is how often a drain looks whether the output's reader went.
const goneEvery = 100 * time.Millisecond

// line reads one line, with its newline. A line over the cap is read to
// its end and dropped (nil is returned), and answered: with its id when
// it is a request whose id can be read (see idScan) and is not in use,
// so the caller's pending call gets its error; with null otherwise.
func (t *Reader) line() ([]byte, error) {
	var buf []byte
	var scan *idScan
	for {
		chunk, err := t.r.ReadSlice('\n')
		switch {
		case scan != nil:
			scan.write(chunk)
		case len(buf)+len(chunk) > t.opts.MaxLine:
			scan = new(idScan)
			scan.write(buf)
			scan.write(chunk)
			buf = nil
		default:
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if scan != nil {
			id, key := scan.replyID()
			if id != nil && t.w.inUse(key) {
				id = nil // the reply would answer another request
			}
			t.w.write(reply(id, -32600, fmt.Sprintf("Invalid Request: a message longer than %d bytes was dropped; send a shorter one (a large argument can go in a file)", t.opts.MaxLine)))
		}
		return buf, err
	}
}

// scannedID returns the id of the request a line that cannot be parsed
// holds, read as an overlong line's is (idScan), or nil: JSON-RPC answers
// a parse error with a null id, which leaves the caller of a request that
// is JSON but for one raw control character in a string waiting for ever.
// An id another request in flight uses is not echoed.
func (t *Reader) scannedID(msg []byte) json.RawMessage {
	var s idScan
	s.write(msg)
	id, key := s.replyID()
	if id != nil && t.w.inUse(key) {
		return nil
	}
	return id
}

// check returns the message to pass on (nil for none) or the error reply.
func (t *Reader) check(msg []byte) (out, rejection []byte) {
	d, valid := Valid(msg)
	if !valid {
		d = depth(msg) // what nests too deep is said first, valid or not
	}
	if d > t.opts.MaxDepth {
		return nil, reply(t.scannedID(msg), -32600, fmt.Sprintf("Invalid Request: the message nests deeper than %d levels; offstage takes no deeper JSON", t.opts.MaxDepth))
	}
	if !valid {
		return nil, reply(t.scannedID(msg), -32700, "Parse error: the line is not JSON; send one JSON-RPC message per line")
	}
	switch msg[0] {
	case '[':
		return nil, batchReply(msg)
	case '{':
	default:
		return nil, reply(nil, -32600, "Invalid Request: a JSON-RPC message is a JSON object; send one per line")
	}
	m, err := parse(msg)
	if err != nil {
		if m.isResponse {
			if t.opts.Dropped != nil {
				t.opts.Dropped(err.Error())
			}
			return nil, nil // never answer a response
		}
		return nil, reply(m.replyID, -32600, "Invalid Request: "+err.Error())
	}
	if m.Method != "" && m.key == "" && t.opts.Notification != nil && !t.opts.Notification(m.Method) {
		if t.opts.Dropped != nil {
			t.opts.Dropped(m.Method + " came without an id, as a notification: it is a request, which needs one")
		}
		return nil, nil
	}
	if m.isRequest() && t.opts.Take != nil {
		if start, ok, err := t.opts.Take(Request{Method: m.Method, ID: m.ID, Params: m.Params, Key: m.key}); ok {
			return nil, t.taken(&m, start, err)
		}
	}
	if m.Method != "" && t.opts.Check != nil {
		if err := t.opts.Check(m.Method, m.Params); err != nil {
			if m.key == "" { // a notification: nobody waits for an answer
				if t.opts.Dropped != nil {
					t.opts.Dropped(m.Method + ": " + err.Error())
				}
				return nil, nil
			}
			return nil, refusal(m.ID, err)
		}
	}
	var own string
	if m.isRequest() {
		t.serial++
		own = strconv.FormatUint(t.serial, 10)
		if t.opts.Stamp != nil {
			if member := t.opts.Stamp(m.Method); member != "" {
				m.Params = StampParams(m.Params, member, own)
			}
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// A copy to encode: m escaping to Encode would be allocated for every
	// message, taken ones too.
	wire := m.message
	if err := enc.Encode(&wire); err != nil { // cannot happen: every part was checked
		return nil, reply(m.replyID, -32600, "Invalid Request: "+err.Error())
	}
	if m.isRequest() && !t.w.track(m.key, m.ID, own) {
		return nil, inUseReply(m.ID)
	}
	return b.Bytes(), nil
}

// StampParams returns params with _meta[member] set to key (see
// Options.Stamp; an HTTP transport stamps its requests with it too), or
// params as they are when they or their _meta are not objects. Decoding into maps reads what the SDK will (escaped keys, the
// last of duplicates), so what a peer wrote under member never survives.
func StampParams(params json.RawMessage, member, key string) json.RawMessage {
	var fields, meta map[string]json.RawMessage
	if len(params) == 0 || params[0] != '{' || json.Unmarshal(params, &fields) != nil {
		return params
	}
	if raw, ok := fields["_meta"]; ok && !isNull(raw) {
		if raw[0] != '{' || json.Unmarshal(raw, &meta) != nil {
			return params
		}
	}
	if meta == nil {
		meta = make(map[string]json.RawMessage, 1)
	}
	meta[member] = encode(key)
	fields["_meta"] = encode(meta)
	return encode(fields)
}

// encode is json.Marshal without HTML escapes, without its newline.
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // cannot fail: strings and raw messages already checked
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// taken answers a request Options.Take took: its refusal, the in-use
// error, or nothing (start answers it).
func (t *Reader) taken(m *parsed, start func(), err error) []byte {
	switch {
	case err != nil:
		return refusal(m.ID, err)
	case !t.w.track(m.key, m.ID, ""):
		return inUseReply(m.ID)
	}
	start()
	return nil
}

// refusal answers a request Check or Take refused: with an *Error's code
// and message, any other error as invalid params.
func refusal(id json.RawMessage, err error) []byte {
	code, msg := -32602, "Invalid params: "+err.Error()
	if re := (*Error)(nil); errors.As(err, &re) {
		code, msg = re.Code, re.Message
	}
	return reply(id, code, msg)
}

func inUseReply(id json.RawMessage) []byte {
	return reply(nil, -32600, fmt.Sprintf("Invalid Request: id %s is in use by a request still being answered; use a new id", id))
}

// message is what passes on, re-encoded.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *wireError      `json:"error,omitempty"`
}

type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// parsed is a checked message and what the guard needs to know of it.
type parsed struct {
	message
	key        string          // the id's key, for a request with an id
	replyID    json.RawMessage // the id an error reply carries (nil: null)
	isResponse bool
}

func (m *parsed) isRequest() bool { return m.Method != "" && m.key != "" }

// parse checks one JSON object (valid JSON) as a JSON-RPC 2.0 message.
// Keys are matched exactly; of duplicates the last counts.
func parse(msg []byte) (parsed, error) {
	var m parsed
	fields, ok := readEnvelope(msg)
	if !ok {
		return m, errors.New("a JSON-RPC message is a JSON object")
	}
	method, hasMethod := fields.get("method")
	_, hasResult := fields.get("result")
	_, hasError := fields.get("error")
	m.isResponse = !hasMethod && (hasResult || hasError)
	if id, ok := fields.get("id"); ok && isNull(id) && hasMethod && !notificationName(method) {
		// JSON-RPC 2.0 discourages it and MCP forbids it; taking a
		// request for a notification would leave its caller waiting for
		// an answer that never comes. A null id on what is named as a
		// notification passes as one: some clients write it so.
		return m, errors.New("the id must be a string or an integer, not null (leave it out to send a notification)")
	}
	if id, ok := fields.get("id"); ok && !isNull(id) {
		key, err := idKey(id)
		if err != nil {
			m.replyID = refusedID(id)
			return m, err
		}
		m.ID, m.replyID, m.key = id, id, key
	}
	if v, ok := fields.get("jsonrpc"); !ok || !isString(v, "2.0") {
		return m, errors.New(`the message lacks "jsonrpc":"2.0"`)
	}
	m.JSONRPC = "2.0"
	switch {
	case hasMethod:
		if m.Method, ok = unquote(method); !ok || m.Method == "" {
			return m, errors.New("the method must be a non-empty string")
		}
		if p, ok := fields.get("params"); ok && !isNull(p) {
			if p[0] != '{' && p[0] != '[' {
				return m, errors.New("params must be an object or an array")
			}
			m.Params = p
		}
		return m, nil
	case m.isResponse:
		if m.key == "" {
			return m, errors.New("a response without a usable id was dropped")
		}
		if e, ok := fields.get("error"); ok && !isNull(e) {
			m.Error = new(wireError)
			if err := checkError(e, m.Error); err != nil {
				return m, err
			}
		} else {
			m.Result, _ = fields.get("result")
			if m.Result == nil {
				m.Result = json.RawMessage("null")
			}
		}
		return m, nil
	}
	return m, errors.New("not a JSON-RPC 2.0 message: it has no method, result or error")
}

// checkError decodes a response's error object.
func checkError(raw json.RawMessage, e *wireError) error {
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		return errors.New("a response's error must be an object")
	}
	code, ok := f["code"]
	if !ok || !isInteger(code) || json.Unmarshal(code, &e.Code) != nil {
		return errors.New("a response's error code must be an integer")
	}
	if msg, ok := f["message"]; ok && !isNull(msg) && json.Unmarshal(msg, &e.Message) != nil {
		return errors.New("a response's error message must be a string")
	}
	if d, ok := f["data"]; ok && !isNull(d) {
		e.Data = d
	}
	return nil
}

// CheckID checks a request's id (present, not null) as the guard does:
// a string of whole Unicode, or an integer within ±2^53 written plainly,
// which a response carries back unchanged. For an id it refuses, replyID
// is the id its error reply carries (refusedID). An HTTP transport checks
// its POSTs' ids with it, as stdio's guard checks every line's.
func CheckID(id json.RawMessage) (replyID json.RawMessage, err error) {
	if _, err := idKey(id); err != nil {
		return refusedID(id), err
	}
	return id, nil
}

// refusedID is the id the error reply to a request whose id is refused
// carries: a string or a number echoed as sent, which its client decodes
// and matches; nil (null) for the rest.
func refusedID(id json.RawMessage) json.RawMessage {
	switch _, ferr := strconv.ParseFloat(string(id), 64); {
	case id[0] == '"' && utf8.Valid(id):
		return id
	case id[0] == '"':
		// Bytes that are not UTF-8, echoed, would make the reply a
		// line that is no JSON text (RFC 8259 §8.1): null.
	case ferr == nil && (id[0] == '-' || (id[0] >= '0' && id[0] <= '9')):
		return id // a number, echoed as sent: a client decodes it
	} // else (1e400) null: no JSON decoder of a float64 takes it back
	return nil
}

// idKey returns the key of a usable id (a string, or an integer within
// ±2^53 written plainly): what matches a response's id to its request.
func idKey(id json.RawMessage) (string, error) {
	switch {
	case id[0] == '"':
		s, ok := unquote(id)
		if !ok {
			return "", errors.New("the id is not a valid string")
		}
		if !wholeUnicode(id) {
			// Decoded, it would hold U+FFFD in place of what it held, and
			// its answer would carry an id the peer never sent.
			return "", errors.New("the id is not valid Unicode (a byte that is not UTF-8, or a lone surrogate escape such as \\ud800); use another string")
		}
		return "s" + s, nil
	case isInteger(id):
		n, err := strconv.ParseInt(string(id), 10, 64)
		if err != nil || n > maxSafeID || n < -maxSafeID {
			return "", fmt.Errorf("id %s is out of range; use a string or an integer within ±2^53", id)
		}
		return "n" + string(id), nil
	case id[0] == '-' || (id[0] >= '0' && id[0] <= '9'):
		return "", fmt.Errorf("id %s is not an integer; use a string or an integer within ±2^53", id)
	}
	return "", fmt.Errorf("the id must be a string or an integer, not %s", kind(id))
}

// wholeUnicode reports whether the JSON string q (quotes included, valid
// JSON) decodes without replacement: its bytes are UTF-8, and each
// \uD800–\uDBFF escape is followed by a \uDC00–\uDFFF one, which
// comes after no other.
func wholeUnicode(q []byte) bool {
	if !utf8.Valid(q) {
		return false
	}
	high := false // the last escape was a high surrogate, waiting for its low one
	for i := 1; i < len(q)-1; i++ {
		if q[i] != '\\' {
			if high {
				return false
			}
			continue
		}
		i++
		if q[i] != 'u' {
			if high {
				return false
			}
			continue
		}
		r, err := strconv.ParseUint(string(q[i+1:i+5]), 16, 16)
		if err != nil {
			return false
		}
		i += 4
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if high {
				return false
			}
			high = true
		case r >= 0xDC00 && r < 0xE000:
			if !high {
				return false
			}
			high = false
		case high:
			return false
		}
	}
	return !high
}

// notificationPrefix begins a message with a method (a notification or a
// request), as encoding/json writes the SDKs' messages and acpserver its
// session updates.
var notificationPrefix = []byte(`{"jsonrpc":"2.0","method":`)

// sdkResponseKey reads the id of a response written as the Go SDKs
// write one, {"jsonrpc":"2.0","id":7,"result":… (or "error"), without
// decoding the rest: a plain integer id, or a string one without escapes.
// Anything else reports false, for responseKey to decode.
func sdkResponseKey(p []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(p, responsePrefix)
	if !ok {
		return "", false
	}
	end := bytes.IndexByte(rest, ',')
	if end <= 0 {
		return "", false
	}
	id, after := rest[:end], rest[end:]
	if !bytes.HasPrefix(after, []byte(`,"result":`)) && !bytes.HasPrefix(after, []byte(`,"error":`)) {
		return "", false
	}
	switch {
	case id[0] == '"':
		if len(id) < 2 || id[len(id)-1] != '"' || bytes.IndexByte(id[1:len(id)-1], '"') >= 0 || bytes.IndexByte(id, '\\') >= 0 {
			return "", false
		}
	case !isInteger(id):
		return "", false
	}
	key, err := idKey(id)
	return key, err == nil
}

// responsePrefix begins a response as the Go SDKs write one.
var responsePrefix = []byte(`{"jsonrpc":"2.0","id":`)

// responseKey returns the id key of a response, as the SDKs write them.
func responseKey(p []byte) (string, bool) {
	if bytes.HasPrefix(p, notificationPrefix) {
		return "", false // it has a method: not a response (the common case, decided without decoding)
	}
	if key, ok := sdkResponseKey(p); ok {
		return key, true
	}
	return decodedResponseKey(p)
}

// decodedResponseKey is responseKey by decoding the message.
func decodedResponseKey(p []byte) (string, bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
	}
	p = bytes.TrimSpace(p)
	if len(p) == 0 || p[0] != '{' || json.Unmarshal(p, &m) != nil || m.Method != nil || len(m.ID) == 0 || isNull(m.ID) {
		return "", false
	}
	key, err := idKey(m.ID)
	return key, err == nil
}

// isInteger reports whether a JSON number is written as a plain integer
// (no fraction, no exponent, no "-0").
func isInteger(n json.RawMessage) bool {
	s := string(n)
	s, neg := cutPrefix(s, "-")
	if s == "" || (s[0] == '0' && (len(s) > 1 || neg)) {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return s, false
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// unquote decodes a JSON value that should be a string, as json.Unmarshal
// into a string does: in place when it has no escape and is valid UTF-8
// (as a method's name and an id nearly always are), by decoding
// otherwise. ok is false when v is not a string.
func unquote(v []byte) (string, bool) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), true
	}
	var s string // declared here: escaping to json.Unmarshal, it is allocated where it is declared
	return s, json.Unmarshal(v, &s) == nil
}

// isString reports whether v is the JSON string want.
func isString(v []byte, want string) bool {
	if len(v) == len(want)+2 && v[0] == '"' && string(v[1:len(v)-1]) == want {
		return true
	}
	s, ok := unquote(v)
	return ok && s == want
}

// notificationName reports whether a method's name says it is a
// notification ("notifications/initialized", "$/cancelRequest").
func notificationName(method json.RawMessage) bool {
	var name string
	if json.Unmarshal(method, &name) != nil {
		return false
	}
	return strings.HasPrefix(name, "notifications/") || strings.HasPrefix(name, "$/")
}

func kind(v json.RawMessage) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "that"
}

// maxBatchReplies bounds the answers to one batch: a line of 16 MiB holds
// millions of members, whose answers would not fit in memory.
const maxBatchReplies = 64

// batchReply answers a batch on a line (BatchReply).
func batchReply(msg []byte) []byte {
	return BatchReply(msg, "send each JSON-RPC message on a line of its own")
}

// ParseErrorReply is the answer to a message that is not JSON: a parse
// error (-32700) with a null id, saying what to send (how), and a
// newline.
func ParseErrorReply(how string) []byte { return reply(nil, -32700, "Parse error: "+how) }

// BatchReply answers a batch, msg (valid JSON), none of whose members
// runs: one error per member that needs an answer (a request with a
// usable id, or a member that is not a message), in an array; a single
// error with a null id when none does, or when there are more than
// maxBatchReplies to give. Each says what to send instead (how: "send
// each JSON-RPC message on a line of its own"). The answer ends in a
// newline. An HTTP transport answers its POSTs' batches with it, as
// stdio's guard answers a line's.
func BatchReply(msg []byte, how string) []byte {
	why := "Invalid Request: batches are not supported; " + how
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.Token() // [
	var replies []json.RawMessage
	members := 0
	for ; dec.More(); members++ {
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			break
		}
		m, err := parse(raw)
		switch {
		case raw[0] != '{':
			replies = append(replies, reply(nil, -32600, why))
		case err == nil && m.isRequest():
			replies = append(replies, reply(m.ID, -32600, why))
		case err != nil && !m.isResponse:
			replies = append(replies, reply(m.replyID, -32600, why))
		}
		if len(replies) > maxBatchReplies {
			return reply(nil, -32600, fmt.Sprintf("%s (this batch has more than %d messages to answer; none was run)", why, maxBatchReplies))
		}
	}
	if len(replies) == 0 {
		msg := why
		if members == 0 {
			msg = "Invalid Request: an empty batch; " + how
		}
		return reply(nil, -32600, msg)
	}
	for i := range replies {
		replies[i] = bytes.TrimSuffix(replies[i], []byte("\n"))
	}
	b, _ := json.Marshal(replies)
	return append(b, '\n')
}

// depth returns how deep objects and arrays nest in msg, skipping strings.
func depth(msg []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range msg {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// reply is a JSON-RPC error response to id (null if nil), with its
// newline.
func reply(id json.RawMessage, code int, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{Code: int64(code), Message: message}})
	return append(b, '\n')
}
