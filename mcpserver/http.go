package mcpserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/guesses"
	"github.com/offstage/offstage/internal/origin"
	"github.com/offstage/offstage/internal/rpcline"
	"github.com/offstage/offstage/internal/text"
)

// DefaultIdleTimeout is Config.IdleTimeout's default: how long an HTTP
// session may have no request in flight and no stream open before it is
// closed and its tasks stopped.
const DefaultIdleTimeout = 10 * time.Minute

// DefaultMaxSessions is Config.MaxSessions' default: how many HTTP
// sessions may be open at once. At the default of 8 running tasks a
// session, 64 sessions may run 512 commands.
const DefaultMaxSessions = 64

// HTTPHandler serves MCP's streamable HTTP transport. Running commands
// over HTTP is remote command execution by design, so it is locked down:
//
//   - every request must carry "Authorization: Bearer TOKEN" (compared in
//     constant time); others get 401 and start nothing;
//   - a request with an Origin header must come from a loopback origin
//     (http://localhost, 127.0.0.1, [::1], any port) or one of
//     allowedOrigins ("https://example.com"); others get 403. This is the
//     DNS-rebinding defence the MCP specification asks for.
//
// Binding to loopback is the caller's job (the CLI does it unless told
// otherwise).
//
// A session ends when its client deletes it (HTTP DELETE), when the
// Service closes, or when it has been idle for Config.IdleTimeout: no
// request of its in flight and no stream of its open. A client that is
// connected holds its GET stream open, or polls, and is never idle; one
// that vanished without DELETE has neither, and its tasks are stopped
// after the timeout instead of running on. The SDK's own session timeout
// is not used: it counts only POSTs, and so would end a connected client
// that listens on its stream while its user is away.
//
// At most Config.MaxSessions sessions are open at once (those being
// created count): a request that would start one more gets 503 with a
// message naming the bound (and Config.FullAdvice), and the server's log
// says so (at most once a minute). A session frees its place when it is
// deleted, closed for idleness, or found ended.
//
// Once the Service is closing, requests that would start a session get
// 503. Close the Service before shutting its http.Server down: Close ends
// the sessions' open streams, which http.Server.Shutdown would otherwise
// wait for until its own ctx ends.
//
// An application that authenticates requests itself uses Handler instead.
func (s *Service) HTTPHandler(token string, allowedOrigins []string) http.Handler {
	return BoundBodies(tokenChecked(token, s.Handler(allowedOrigins)))
}

// BoundBodies bounds how long the body of a request next serves may take
// to arrive: 30 s, past which reading it fails and its connection is
// closed once answered (HTTP 408, where the body is offstage's to read).
// A body that stalled held its connection for ever, whoever sent it: an
// outsider held 300 connections with unauthenticated logins alone, a
// descriptor each. A request without a body (a GET stream) is not
// bounded. HTTPHandler bounds its requests; an application that serves
// other handlers beside it, or Handler behind its own authentication,
// wraps its whole mux.
func BoundBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyWait))
		}
		next.ServeHTTP(w, r)
	})
}

// Handler is HTTPHandler without the bearer token, for an application
// that authenticates requests its own way: wrap Handler in that
// authentication, and mount it where the application's clients connect.
// Everything else of HTTPHandler holds: the Origin check against
// loopback and allowedOrigins, the session cap (Config.MaxSessions) and
// the idle timeout (Config.IdleTimeout). Serving Server() through the
// SDK's own handler keeps none of those. Handler alone authenticates no
// one: anyone who reaches it runs commands.
func (s *Service) Handler(allowedOrigins []string) http.Handler {
	idle := &idleSessions{svc: s, timeout: s.cfg.IdleTimeout, max: s.cfg.MaxSessions, byID: make(map[string]*idleSession)}
	s.mu.Lock()
	s.idle = append(s.idle, idle)
	s.mu.Unlock()
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" {
			return s.probe // an existing session: the SDK finds its server itself
		}
		c := s.newConn()
		c.answers = newHTTPAnswers()
		if slot, ok := r.Context().Value(newServerKey{}).(*newServer); ok {
			slot.server, slot.answers = c.server, c.answers
		}
		return c.server
	}, &mcp.StreamableHTTPOptions{Logger: sdkLogger(s.cfg.Logger)})
	return originChecked(allowedOrigins, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idle.serve(w, r, mcpHandler)
	}))
}

// Authorized passes to next only the requests HTTPHandler's rules let
// through: "Authorization: Bearer TOKEN" (constant time; an empty token
// refuses everything) and, with an Origin header, a loopback origin or
// one of allowedOrigins. offstage mcp --http guards /metrics with it, so
// every endpoint of the server has one rule.
func Authorized(token string, allowedOrigins []string, next http.Handler) http.Handler {
	return tokenChecked(token, originChecked(allowedOrigins, next))
}

// tokenChecked passes to next only the requests with "Authorization:
// Bearer TOKEN" (constant time; an empty token refuses everything). A host
// that sent guesses.Max wrong tokens within a minute is refused (429)
// until the minute has passed, so a short token is not guessed at network
// speed; over loopback, a user of the host (guesses.Key).
func tokenChecked(token string, next http.Handler) http.Handler {
	want := []byte(token)
	var wrong guesses.Counter
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := guesses.Key(r)
		if !wrong.Take(host, time.Now()) {
			w.Header().Set("Retry-After", "60")
			http.Error(w, fmt.Sprintf("429 Too Many Requests: %d wrong tokens from %s in the last minute; wait a minute before the next try", guesses.Max, host), http.StatusTooManyRequests)
			return
		}
		if token == "" || subtle.ConstantTimeCompare(bearer(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="offstage"`)
			http.Error(w, "401 Unauthorized: send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		wrong.Forgive(host)
		next.ServeHTTP(w, r)
	})
}

// originChecked passes to next only the requests without an Origin
// header, or with a loopback origin or one of allowed.
func originChecked(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !origin.Allowed(o, allowed) {
			http.Error(w, "403 Forbidden: origin "+o+" is not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer returns the credentials of an "Authorization: Bearer …" value,
// whose scheme is case-insensitive (RFC 9110, section 11.1), or nil.
func bearer(header string) []byte {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil
	}
	return []byte(strings.TrimLeft(cred, " "))
}

// newServerKey carries a *newServer in a request that may start a
// session, so the handler learns which server the SDK was given for it.
type newServerKey struct{}

type newServer struct {
	server  *mcp.Server
	answers *answers
}

// idleSessions tracks the HTTP sessions' requests, to close those idle
// for timeout. A session's entry is made by the request that created it
// (or by an earlier request of the session that raced it) and removed
// when the session is deleted, closed for idleness, or found ended.
type idleSessions struct {
	svc     *Service
	timeout time.Duration // <= 0: never
	max     int           // sessions open at once; <= 0: no bound

	mu       sync.Mutex
	byID     map[string]*idleSession // guarded by mu
	open     int                     // guarded by mu: entries with a server, and sessions being made
	lastWarn time.Time               // guarded by mu: when a refusal was last logged
}

// idleSession is one session's activity. Its fields are guarded by
// idleSessions.mu.
type idleSession struct {
	server   *mcp.Server // nil until the request that made the session returns
	answers  *answers    // the session's, with server
	inFlight int         // requests being served, GET streams included
	gen      int         // bumped whenever the timer is armed or disarmed: a timer of an older gen does nothing
	timer    *time.Timer
}

func (t *idleSessions) serve(w http.ResponseWriter, r *http.Request, h http.Handler) {
	// A POST's body is read whole before anything else: a body that
	// stalls holds nothing (a place for a session, a session's activity)
	// longer than bodyWait, and a message no session takes is answered
	// before a session is made for it.
	var fields map[string]json.RawMessage
	if r.Method == http.MethodPost {
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		if fields, ok = checkMessage(w, body); !ok {
			return
		}
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		if t.svc.closing() {
			http.Error(w, "503 Service Unavailable: offstage is shutting down", http.StatusServiceUnavailable)
			return
		}
		if !t.reserve() {
			msg := fmt.Sprintf("503 Service Unavailable: this offstage serves at most %s at once, and that many are open; end one (HTTP DELETE) or wait for an idle one to be closed", text.Plural(t.max, "MCP session"))
			if a := t.svc.cfg.FullAdvice; a != "" {
				msg += ", or " + a
			}
			w.Header().Set("Retry-After", "10")
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		// The place is kept or given back as the response starts, before
		// the client can read it: a client that probes first (the Go SDK
		// sends server/discover before initialize) sends its next request
		// as soon as it has the answer, which may be before this handler
		// returns.
		slot := &newServer{}
		sw := &settleWriter{ResponseWriter: w, settle: func() {
			if id := w.Header().Get("Mcp-Session-Id"); id != "" && slot.server != nil {
				t.made(id, slot.server, slot.answers)
			} else {
				t.mu.Lock()
				t.open--
				t.mu.Unlock()
			}
		}}
		h.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), newServerKey{}, slot)))
		sw.settleOnce()
		return
	}
	t.begin(id)
	defer t.end(id, r.Method == http.MethodDelete)
	if r.Method == http.MethodPost {
		if a, ok := t.known(id); ok {
			key, refused := checkPost(w, r, fields, a)
			if refused {
				return
			}
			if key != "" {
				tw := &toldWriter{ResponseWriter: w, ctx: r.Context()}
				h.ServeHTTP(tw, r)
				a.sent(key, tw.wentOut())
				return
			}
		}
	}
	if r.Method == http.MethodDelete {
		t.mu.Lock()
		var server *mcp.Server
		if e := t.byID[id]; e != nil {
			server = e.server
		}
		t.mu.Unlock()
		if server != nil {
			t.svc.closeFor(server, "the client ended the session (HTTP DELETE)")
			// The calls in flight, which the close ended, are answered
			// before the SDK ends the session, which drops answers not
			// yet written.
			if a, ok := t.known(id); ok {
				if calm := a.calm(); calm != nil {
					wait := time.NewTimer(deleteWait)
					select {
					case <-calm:
					case <-wait.C:
					}
					wait.Stop()
				}
			}
		}
	}
	h.ServeHTTP(w, r)
}

// deleteWait bounds how long a DELETE waits for the answers to the
// session's calls in flight, once the session is closed.
const deleteWait = 5 * time.Second

// known says whether id names a session this handler made, and returns
// its answers.
func (t *idleSessions) known(id string) (*answers, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.server == nil {
		return nil, false
	}
	return e.answers, true
}

// bodyWait bounds how long a POST's body may take to arrive once its
// headers have. A client or proxy that stalled mid-body held its
// connection, and the place of the session it would have made, for ever:
// an outsider's 70 stalled POSTs took all 64 places, and every new
// client got 503.
var bodyWait = 30 * time.Second // a variable for the tests

// readBody reads r's body, up to what the SDK takes and one byte more,
// within bodyWait, and leaves it in r.Body for the SDK as it came (a
// body past the bound stays unread past it, for the SDK to refuse). A
// body that does not arrive in time is answered 408, and ok is false.
// Where the connection takes no read deadline (a test's recorder), the
// body is read without one.
func readBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	rc := http.NewResponseController(w)
	timed := rc.SetReadDeadline(time.Now().Add(bodyWait)) == nil
	body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
	if timed {
		rc.SetReadDeadline(time.Time{})
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("408 Request Timeout: the request's body did not arrive within %s of its headers; send the whole body at once", bodyWait), http.StatusRequestTimeout)
		return nil, false
	}
	rest := r.Body
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	return body, true
}

// checkMessage answers, as stdio's guard does, a POST's body the SDK
// would take wrongly, and reports whether it left the body to go on
// (ok), with its members (nil for anything but an object): a body that
// is not one JSON value (a parse error: the SDK ran the first value and
// dropped the rest), a batch (rpcline.BatchReply: MCP's current version
// has none, and the SDK ran a batch's calls outside what makes a result
// count once it was delivered, and outside checkPost), and a request
// whose id is neither a string nor an integer within ±2^53
// (rpcline.CheckID: the SDK answered 1.5 with 1). Anything else that is
// not a message it leaves for the SDK to refuse.
func checkMessage(w http.ResponseWriter, body []byte) (fields map[string]json.RawMessage, ok bool) {
	if len(body) > mcp.DefaultMaxRequestBodyBytes {
		return nil, true
	}
	msg := bytes.TrimLeft(body, " \t\r\n")
	if len(msg) > 0 && !json.Valid(msg) {
		// The SDK read the first JSON value of a body and ignored the
		// rest: a batch with a byte after it ran, past the refusal below
		// (an outsider's finding), and a second message went unanswered.
		// Over stdio such a line is a parse error; so it is here.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(rpcline.ParseErrorReply("the body is not one JSON value; send one JSON-RPC message per POST"))
		return nil, false
	}
	if len(msg) > 0 && msg[0] == '[' {
		answer := rpcline.BatchReply(msg, "send each JSON-RPC message in a POST of its own")
		w.Header().Set("Content-Type", "application/json")
		if answer[0] != '[' {
			w.WriteHeader(http.StatusBadRequest) // nothing in it was a request: no response is owed
		}
		w.Write(answer)
		return nil, false
	}
	// Its members by their exact names, as the SDK reads them (a struct
	// would take "Method" for "method").
	if json.Unmarshal(body, &fields) != nil {
		return nil, true
	}
	var method string
	if id := fields["id"]; len(id) > 0 && !isNull(id) && json.Unmarshal(fields["method"], &method) == nil && method != "" {
		if replyID, err := rpcline.CheckID(id); err != nil {
			writeRPCError(w, replyID, -32600, "Invalid Request: "+err.Error())
			return nil, false
		}
	}
	return fields, true
}

// isNull reports whether a JSON value is null.
func isNull(v json.RawMessage) bool { return string(v) == "null" }

// writeRPCError writes a JSON-RPC error response to the request whose id
// is id (nil: null).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	type wireError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, message}})
}

// checkPost answers a POST of one request whose params have a field of
// the wrong JSON type as stdio does (checkParams), and reports whether it
// did (refused). fields are the members of its body (checkMessage). A
// tools/call it stamps with a key of a's (stampPost), which it returns
// for the caller to tell a whether the answer went out. Any other body
// it leaves for the SDK, as it came.
func checkPost(w http.ResponseWriter, r *http.Request, fields map[string]json.RawMessage, a *answers) (key string, refused bool) {
	var method string
	if fields == nil || json.Unmarshal(fields["method"], &method) != nil {
		return "", false // a response, a notification, or not JSON: the SDK's
	}
	id, params := fields["id"], fields["params"]
	if method == "" || len(id) == 0 || isNull(id) {
		return "", false // a notification, or no message: the SDK's
	}
	var e *rpcline.Error
	if !errors.As(checkParams(method, params), &e) {
		if method == "tools/call" && a != nil {
			key = stampPost(r, fields, params, a)
		}
		return key, false
	}
	writeRPCError(w, id, int(e.Code), e.Message)
	return "", true
}

// stampPost gives r, a tools/call whose body's members are fields and
// params its params, the body stamped with a new key of a's under
// requestMeta, as stdio's guard stamps a request (rpcline.StampParams,
// which overwrites a key the client wrote there itself), and returns the
// key; "" (r left as it was) where a tracks as many as it may, or the
// stamp would take the body past what the SDK takes.
func stampPost(r *http.Request, fields map[string]json.RawMessage, params json.RawMessage, a *answers) string {
	key := a.register()
	if key == "" {
		return ""
	}
	fields["params"] = rpcline.StampParams(params, requestMeta, key)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(fields) != nil || b.Len() > mcp.DefaultMaxRequestBodyBytes {
		a.sent(key, true) // forgotten: counted when the call returns
		return ""
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{&b, r.Body}
	r.ContentLength = int64(b.Len())
	return key
}

// toldWriter is a tools/call POST's response writer: it tells the
// answer (the one response on the POST's stream) from what comes before
// it (progress notifications), and remembers whether it went out: the
// client was still connected as it was written (so had not gone before
// it; a client that goes once it has read it must not have it again),
// and its write and flush took.
type toldWriter struct {
	http.ResponseWriter
	ctx       context.Context
	answered  bool // the answer was written
	lost      bool // it found the client gone, or its write or flush failed
	flushNext bool // the next flush is the answer's
}

func (w *toldWriter) Write(p []byte) (int, error) {
	answer := !w.answered && isResponse(p)
	if answer {
		w.answered, w.lost, w.flushNext = true, w.ctx.Err() != nil, true
	}
	n, err := w.ResponseWriter.Write(p)
	if answer && err != nil {
		w.lost = true
	}
	return n, err
}

// Flush and Unwrap keep what the wrapped writer can do (streaming
// responses flush; http.ResponseController unwraps).
func (w *toldWriter) Flush() {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if w.flushNext {
		w.flushNext = false
		w.lost = w.lost || err != nil && !errors.Is(err, http.ErrNotSupported)
	}
}

func (w *toldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wentOut says, once the SDK has served the POST, whether its answer
// went out: as over stdio an answer the pipe took counts, one the
// connection took counts. (The SDK returns early, its answer unwritten,
// when the client goes first.)
func (w *toldWriter) wentOut() bool {
	if w.flushNext { // written as one body (application/json), not flushed yet
		w.Flush()
	}
	return w.answered && !w.lost
}

// isResponse says whether p, an event of the POST's stream (or its whole
// body, as application/json), is a JSON-RPC response: the SDK writes
// {"jsonrpc":"2.0","id":ID, then "result" or "error" for a response,
// "method" for a request of its own; a notification has no id.
func isResponse(p []byte) bool {
	if i := bytes.Index(p, []byte("data: ")); i >= 0 {
		p = p[i+len("data: "):]
	}
	const head = `{"jsonrpc":"2.0","id":`
	if !bytes.HasPrefix(p, []byte(head)) {
		return false
	}
	p = p[len(head):]
	if len(p) > 0 && p[0] == '"' { // a string id
		i := 1
		for i < len(p) && p[i] != '"' {
			if p[i] == '\\' {
				i++
			}
			i++
		}
		p = p[min(i+1, len(p)):]
	} else {
		p = p[max(bytes.IndexAny(p, ",}"), 0):]
	}
	return bytes.HasPrefix(p, []byte(`,"result":`)) || bytes.HasPrefix(p, []byte(`,"error":`))
}

// settleWriter calls settle once, when the response starts (its header is
// written) or, if the handler wrote nothing, when serve calls settleOnce.
type settleWriter struct {
	http.ResponseWriter
	settle  func()
	settled bool // only the handler's goroutine writes
}

func (w *settleWriter) settleOnce() {
	if !w.settled {
		w.settled = true
		w.settle()
	}
}

func (w *settleWriter) WriteHeader(code int) {
	w.settleOnce()
	w.ResponseWriter.WriteHeader(code)
}

func (w *settleWriter) Write(p []byte) (int, error) {
	w.settleOnce()
	return w.ResponseWriter.Write(p)
}

// Flush and Unwrap keep what the wrapped writer can do (streaming
// responses flush; http.ResponseController unwraps).
func (w *settleWriter) Flush() {
	w.settleOnce()
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *settleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// reserve takes a place for a session about to be made, if the bound
// leaves one; made keeps it, or serve gives it back.
func (t *idleSessions) reserve() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.max > 0 && t.open >= t.max {
		if now := time.Now(); now.Sub(t.lastWarn) >= time.Minute {
			t.lastWarn = now
			msg := "refusing a new HTTP session: as many are open as allowed (this is said at most once a minute)"
			if a := t.svc.cfg.FullAdvice; a != "" {
				msg += "; to serve more, " + a
			}
			t.svc.cfg.Logger.Warn(msg, "max_sessions", t.max)
		}
		return false
	}
	t.open++
	return true
}

// made records the server of a session its first request created, and
// starts counting its idleness unless another of its requests is in
// flight already. The session keeps the place its request reserved.
func (t *idleSessions) made(id string, server *mcp.Server, a *answers) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		e = &idleSession{}
		t.byID[id] = e
	}
	if e.server != nil {
		t.open-- // cannot happen: a session is made once
	}
	e.server, e.answers = server, a
	if e.inFlight == 0 {
		t.armLocked(id, e)
	}
}

// begin counts a request of session id in flight: the session is not
// idle until it ends.
func (t *idleSessions) begin(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		// Unknown: it raced the request that made it (made fills the
		// server in), or it is not a session (the SDK answers 404, and end
		// drops the entry).
		e = &idleSession{}
		t.byID[id] = e
	}
	e.inFlight++
	e.gen++
	if e.timer != nil {
		e.timer.Stop()
	}
}

// end counts a request of session id finished; the last one starts the
// idle timer. A DELETE, or a session that has ended, drops the entry.
func (t *idleSessions) end(id string, deleted bool) {
	t.mu.Lock()
	e := t.byID[id]
	if e == nil {
		t.mu.Unlock()
		return
	}
	e.inFlight--
	server := e.server
	if e.inFlight > 0 {
		t.mu.Unlock()
		return
	}
	if deleted || server == nil {
		t.dropLocked(id, e)
		t.mu.Unlock()
		return
	}
	t.armLocked(id, e)
	t.mu.Unlock()
	if !hasSessions(server) { // closed meanwhile, by the SDK or by us
		t.mu.Lock()
		if t.byID[id] == e && e.inFlight == 0 {
			t.dropLocked(id, e)
		}
		t.mu.Unlock()
	}
}

func (t *idleSessions) armLocked(id string, e *idleSession) {
	e.gen++
	if e.timer != nil {
		e.timer.Stop()
	}
	if t.timeout <= 0 {
		return
	}
	gen := e.gen
	e.timer = time.AfterFunc(t.timeout, func() { t.expire(id, e, gen) })
}

func (t *idleSessions) dropLocked(id string, e *idleSession) {
	if e.server != nil && t.byID[id] == e {
		t.open-- // its place is free
	}
	e.gen++
	if e.timer != nil {
		e.timer.Stop()
	}
	delete(t.byID, id)
}

// expire closes session id if it is still idle since the timer of gen
// was armed. Closing it ends its state as a client's DELETE would: its
// tasks are stopped (unless Config.KeepOnDisconnect).
func (t *idleSessions) expire(id string, e *idleSession, gen int) {
	t.mu.Lock()
	if t.byID[id] != e || e.gen != gen || e.inFlight > 0 {
		t.mu.Unlock()
		return // a request came, or the session went, meanwhile
	}
	t.dropLocked(id, e)
	server := e.server
	t.mu.Unlock()
	if !hasSessions(server) {
		return
	}
	// A warning: it stops tasks its user may still want, and offstage mcp
	// logs warnings by default.
	t.svc.cfg.Logger.Warn("closing an HTTP session idle for longer than the idle timeout (no request, no open stream): its client is taken for gone", "session_id", id, "idle_timeout", t.timeout)
	t.svc.closingFor(server, fmt.Sprintf("idle policy: no request and no open stream for %s (--idle-timeout); its client was taken for gone", t.timeout))
	closeSessions(server)
}

// closeAll closes every session the handler made: the Service is closing.
func (t *idleSessions) closeAll() {
	t.mu.Lock()
	var servers []*mcp.Server
	for id, e := range t.byID {
		if e.server != nil {
			servers = append(servers, e.server)
		}
		t.dropLocked(id, e)
	}
	t.mu.Unlock()
	for _, server := range servers {
		t.svc.closingFor(server, "the server was shut down")
		closeSessions(server)
	}
}

func hasSessions(server *mcp.Server) bool {
	for range server.Sessions() {
		return true
	}
	return false
}

// closeSessions closes the sessions of server (one: each session has a
// server of its own). Close waits for the session's requests in flight.
func closeSessions(server *mcp.Server) {
	var all []*mcp.ServerSession
	for ss := range server.Sessions() {
		all = append(all, ss)
	}
	for _, ss := range all {
		ss.Close()
	}
}
