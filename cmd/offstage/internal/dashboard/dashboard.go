// Package dashboard is offstage's live web page of a journal's tasks: the
// handler offstage mcp --http serves at /ui and offstage dashboard serves
// on its own.
//
// The page is plain HTML, CSS and a little JavaScript, embedded in the
// binary (no build step). It lists the tasks, newest first, filtered by
// state, instance (host name), session and age, and keeps the list live
// over server-sent events: the page never polls. The server watches the
// journal instead (one watcher per handler, however many pages are open):
// every Options.Interval it reads the unfinished tasks and those created
// lately, and sends each page the tasks that changed. A task's detail
// shows its output following live, and a stop button.
//
// Output comes from Options.Follow, or, without it, from the task's output
// log when the log is on this machine (the page says where it is when it
// is not). The stop button calls Options.Cancel; without it, the button is
// disabled and the page says why.
//
// Access: every request needs the server's token, as "Authorization:
// Bearer TOKEN" or in the cookie the login form sets (HttpOnly,
// SameSite=Strict, holding a hash of the token, not the token). A request
// with an Origin header must come from a loopback origin or one of
// Options.AllowedOrigins, and the stop action also needs a header a
// cross-site form cannot send: the defences against a page elsewhere
// acting with a browser's cookie.
package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/internal/guesses"
	"github.com/offstage/offstage/internal/origin"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/task"
)

//go:embed static
var static embed.FS

// CancelFunc stops task id of session on behalf of by (who asked, as
// recorded), with an optional reason, and returns the task as it is now
// (what "offstage tasks cancel" does). A task that has already ended is
// an error saying so.
type CancelFunc func(ctx context.Context, session, id, by, reason string) (journal.Task, error)

// FollowFunc writes task id's output to w: what it printed so far (at
// least its last lines) and then what it prints, until it ends (return
// nil) or ctx ends.
type FollowFunc func(ctx context.Context, session, id string, w io.Writer) error

// Options configure a Handler.
type Options struct {
	// Store is the journal read. Required.
	Store journal.Store
	// Token is what a request must carry (see the package doc). An empty
	// token refuses everything.
	Token string
	// AllowedOrigins are Origin values allowed besides loopback ones
	// ("https://ops.example.com").
	AllowedOrigins []string
	// Cancel stops a task; nil disables the stop button, saying so.
	Cancel CancelFunc
	// CancelNote is what the page says when Cancel is nil. Default: how to
	// stop a task from its own session instead.
	CancelNote string
	// Follow streams a task's output; nil reads its output log, when the
	// log is on this machine (journal.OpenLog).
	Follow FollowFunc
	// Interval is how often the journal is read for changes while a page
	// is open. Default 250ms.
	Interval time.Duration
	// Limit is how many tasks a list shows, the newest that match. Default
	// 200.
	Limit int
	// Cost prices what an agent task spent, in the user's currency, for
	// its page; false where no price is known. Nil shows tokens only.
	Cost func(ctx context.Context, t journal.Task) (float64, bool)
}

// Handler serves the dashboard. Mount it under a prefix with
// http.StripPrefix; its links are relative.
type Handler struct {
	opts   Options
	cookie string // the login cookie's value: a hash of the token
	hub    *hub
	mux    *http.ServeMux
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup  // streams being served
	wrong  guesses.Counter // its login's and its API's tokens, counted together
}

// cookieName names the login cookie.
const cookieName = "offstage_dashboard"

// New returns the dashboard of opts.Store. Its streams end when ctx ends
// or Close is called.
func New(ctx context.Context, opts Options) *Handler {
	if opts.Interval <= 0 {
		opts.Interval = 250 * time.Millisecond
	}
	if opts.Limit <= 0 {
		opts.Limit = 200
	}
	if opts.CancelNote == "" {
		opts.CancelNote = "Stopping tasks from the dashboard is not available in this build; a task's own session can stop it (task_cancel)."
	}
	mac := hmac.New(sha256.New, []byte(opts.Token))
	mac.Write([]byte("offstage dashboard login"))
	h := &Handler{opts: opts, cookie: hex.EncodeToString(mac.Sum(nil)), mux: http.NewServeMux()}
	h.ctx, h.stop = context.WithCancel(ctx)
	h.hub = newHub(opts.Store, opts.Interval)
	h.mux.HandleFunc("GET /{$}", h.page("static/index.html"))
	h.mux.HandleFunc("GET /static/{file}", h.asset)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.logout)
	h.mux.HandleFunc("GET /events", h.events)
	h.mux.HandleFunc("GET /api/task", h.task)
	h.mux.HandleFunc("GET /output", h.output)
	h.mux.HandleFunc("POST /api/cancel", h.cancel)
	return h
}

// Close ends the streams being served and the journal's watcher, and
// waits for them.
func (h *Handler) Close() {
	h.stop()
	h.wg.Wait()
	h.hub.close()
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("Referrer-Policy", "same-origin") // "no-referrer" would send forms with Origin: null
	// The page's own origin is allowed too: every request needs the token
	// or the cookie anyway, and a rebinding page (another origin on this
	// address) has neither.
	if o := r.Header.Get("Origin"); o != "" && !origin.Allowed(o, h.opts.AllowedOrigins) && !sameHost(o, r.Host) {
		http.Error(w, "403 Forbidden: origin "+o+" is not allowed", http.StatusForbidden)
		return
	}
	if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
		h.mux.ServeHTTP(w, r)
		return
	}
	// A token sent is a guess, counted as the login counts its tokens:
	// the API answered 401 to any number of them before (an outsider's
	// finding), so a short token could be guessed there at network
	// speed. A cookie is not counted: it is a hash no one guesses, and a
	// stale one (the token changed) must not lock its browser out of the
	// login.
	if _, sent := r.Header["Authorization"]; sent {
		host := guesses.Key(r)
		if !h.wrong.Take(host, time.Now()) {
			w.Header().Set("Retry-After", "60")
			http.Error(w, fmt.Sprintf("429 Too Many Requests: %d wrong tokens from %s in the last minute; wait a minute before the next try", guesses.Max, host), http.StatusTooManyRequests)
			return
		}
		if h.authorized(r) {
			h.wrong.Forgive(host)
		}
	}
	if h.authorized(r) {
		h.mux.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodGet && r.URL.Path == "/" {
		h.loginPage(w, http.StatusUnauthorized, "")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="offstage"`)
	http.Error(w, "401 Unauthorized: log in at the dashboard's page, or send Authorization: Bearer <token>", http.StatusUnauthorized)
}

// sameHost says whether origin is the page's own: its host is the one
// the request was sent to.
func sameHost(origin, host string) bool {
	_, rest, ok := strings.Cut(origin, "://")
	return ok && host != "" && strings.EqualFold(rest, host)
}

// authorized says whether r carries the token, or the login cookie.
func (h *Handler) authorized(r *http.Request) bool {
	if h.opts.Token == "" {
		return false
	}
	if scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return subtle.ConstantTimeCompare([]byte(strings.TrimLeft(cred, " ")), []byte(h.opts.Token)) == 1
	}
	c, err := r.Cookie(cookieName)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(h.cookie)) == 1
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	host := guesses.Key(r)
	if !h.wrong.Take(host, time.Now()) {
		h.loginPage(w, http.StatusTooManyRequests, fmt.Sprintf("%d wrong tokens from %s in the last minute: wait a minute before the next try.", guesses.Max, host))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	token := r.PostFormValue("token")
	if h.opts.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(h.opts.Token)) != 1 {
		h.loginPage(w, http.StatusUnauthorized, "That token is not this server's. It is the one offstage printed when it started, or its OFFSTAGE_MCP_TOKEN.")
		return
	}
	h.wrong.Forgive(host)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: h.cookie, Path: cookiePath(r), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, cookiePath(r), http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: cookiePath(r), MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, cookiePath(r), http.StatusSeeOther)
}

// cookiePath is the directory the dashboard is mounted at, from the
// request's full path (before StripPrefix): /ui/login → /ui/.
func cookiePath(r *http.Request) string {
	p := r.RequestURI
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i+1]
	}
	return "/"
}

func (h *Handler) loginPage(w http.ResponseWriter, status int, msg string) {
	b, _ := static.ReadFile("static/login.html")
	page := strings.Replace(string(b), "{{message}}", htmlEscape(msg), 1)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	io.WriteString(w, page)
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;").Replace(s)
}

func (h *Handler) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := static.ReadFile(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(b)
	}
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := static.ReadFile("static/" + name)
	if err != nil || strings.HasSuffix(name, ".html") {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Write(b)
}

// taskJSON is a task as the page reads it; times in Unix milliseconds
// (0: none).
type taskJSON struct {
	Session  string `json:"session"`
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Label    string `json:"label"`
	Owner    string `json:"owner,omitempty"`
	State    string `json:"state"`
	Created  int64  `json:"created"`
	Started  int64  `json:"started,omitempty"`
	Finished int64  `json:"finished,omitempty"`
	Exit     *int   `json:"exit,omitempty"`
	Host     string `json:"host,omitempty"`
	Log      string `json:"log,omitempty"`
	Error    string `json:"error,omitempty"`
	Result   string `json:"result,omitempty"` // in a task's detail only
	// Who ended it and why (task.Info.EndedBy); "" while it runs.
	EndedBy   string `json:"ended_by,omitempty"`
	EndReason string `json:"end_reason,omitempty"`
	// Usage is what an agent task spent calling models, with the tasks
	// it started.
	Usage *task.Usage `json:"usage,omitempty"`
	// Cost is what Usage cost at the user's price (Options.Cost), in a
	// task's detail only.
	Cost *float64 `json:"cost,omitempty"`
	// Ports are the TCP ports leased for a shell (bash with port).
	Ports []int `json:"ports,omitempty"`
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func toJSON(t journal.Task, detail bool) taskJSON {
	j := taskJSON{Session: t.Session, ID: t.ID, Kind: t.Kind, Label: t.Label, Owner: t.Owner, State: t.State.String(),
		Created: millis(t.Created), Started: millis(t.Started), Finished: millis(t.Finished), Exit: t.ExitCode,
		Host: t.Hostname, Log: t.LogPath, Error: t.Error, EndedBy: t.EndedBy, EndReason: t.EndReason, Ports: t.Ports}
	if detail {
		j.Result = t.Result
	}
	if !t.Usage.IsZero() {
		u := t.Usage
		j.Usage = &u
	}
	return j
}

// detail is t as its page reads it: toJSON's detail, priced.
func (h *Handler) detail(ctx context.Context, t journal.Task) taskJSON {
	j := toJSON(t, true)
	if j.Usage != nil && h.opts.Cost != nil {
		if c, ok := h.opts.Cost(ctx, t); ok {
			j.Cost = &c
		}
	}
	return j
}

// filter is what a list shows.
type filter struct {
	journal.TaskFilter
	age time.Duration
}

// parseFilter reads a list's filter from the query: state, instance,
// session, age (a duration: 1h, 30m).
func parseFilter(r *http.Request, limit int) (filter, error) {
	q := r.URL.Query()
	f := filter{TaskFilter: journal.TaskFilter{Session: q.Get("session"), Hostname: q.Get("instance"), Limit: limit}}
	if s := q.Get("state"); s != "" {
		st, err := journal.ParseState(s)
		if err != nil {
			return f, err
		}
		f.State = st
	}
	if a := q.Get("age"); a != "" {
		d, err := time.ParseDuration(a)
		if err != nil || d <= 0 {
			return f, fmt.Errorf("age %q is not a duration such as 30m, 2h or 24h", a)
		}
		f.age = d
	}
	return f, nil
}

// matches says whether a changed task belongs in the list.
func (f filter) matches(t journal.Task, now time.Time) bool {
	return (f.Session == "" || t.Session == f.Session) && (f.State == "" || t.State == f.State) &&
		(f.Hostname == "" || t.Hostname == f.Hostname) && (f.age == 0 || !t.Created.Before(now.Add(-f.age)))
}

// stream is a server-sent event stream to one page.
type stream struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newStream(w http.ResponseWriter, r *http.Request) *stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy in front must not hold events back
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w)}
	s.rc.Flush()
	return s
}

// send writes one event whose data is v as JSON.
func (s *stream) send(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// ping keeps the connection from looking idle to proxies.
func (s *stream) ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := io.WriteString(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

const pingEvery = 15 * time.Second

// openStream begins a stream of events for r, subscribed to the hub's
// changes. Its context ends with the request or with the handler (Close
// waits for it); done undoes all of it.
func (h *Handler) openStream(w http.ResponseWriter, r *http.Request) (context.Context, *sub, *stream, func()) {
	h.wg.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(h.ctx, cancel)
	sb := h.hub.subscribe()
	return ctx, sb, newStream(w, r), func() {
		h.hub.unsubscribe(sb)
		stop()
		cancel()
		h.wg.Done()
	}
}

// events streams a list: a snapshot of the newest tasks that match, then
// every change of a task that matches. A page that falls behind (its
// queue of changes filled) gets a fresh snapshot, which says so.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r, h.opts.Limit)
	if err != nil {
		http.Error(w, "400 Bad Request: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, sub, s, done := h.openStream(w, r)
	defer done()
	if f.Session != "" { // a session's start names it, as in offstage tasks
		full, err := h.opts.Store.Session(ctx, f.Session)
		if err != nil {
			s.send("snapshot", map[string]any{"tasks": []taskJSON{}, "limit": f.Limit, "why": fmt.Sprintf("No session %q: %v", f.Session, err)})
			<-ctx.Done()
			return
		}
		f.Session = full.ID
	}
	snapshot := func(why string) error {
		q := f.TaskFilter
		if f.age > 0 {
			q.Since = time.Now().Add(-f.age)
		}
		q.Limit = f.Limit + 1
		ts, err := h.opts.Store.Tasks(ctx, q)
		if err != nil {
			return s.send("trouble", map[string]string{"message": "the journal cannot be read now: " + err.Error() + " (the page goes on when it can)"})
		}
		more := len(ts) > f.Limit
		if more {
			ts = ts[:f.Limit]
		}
		out := make([]taskJSON, len(ts))
		for i, t := range ts {
			out[i] = toJSON(t, false)
		}
		return s.send("snapshot", map[string]any{"tasks": out, "limit": f.Limit, "more": more, "why": why})
	}
	if snapshot("") != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C:
			if s.ping() != nil {
				return
			}
		case <-sub.wake:
			ts, dropped := sub.take()
			if dropped {
				if snapshot("The list fell behind the journal's changes and was read again.") != nil {
					return
				}
				continue
			}
			now := time.Now()
			for _, t := range ts {
				if t.note {
					if s.send("trouble", map[string]string{"message": t.trouble}) != nil {
						return
					}
					continue
				}
				if f.matches(t.Task, now) {
					if s.send("task", toJSON(t.Task, false)) != nil {
						return
					}
				} else if t.prev != nil && f.matches(*t.prev, now) {
					// It left the filter (its state changed): it leaves the list.
					if s.send("gone", map[string]string{"session": t.Session, "id": t.ID}) != nil {
						return
					}
				}
			}
		}
	}
}

// lookup reads the task a request names (session and id).
func (h *Handler) lookup(ctx context.Context, r *http.Request) (journal.Task, int, error) {
	session, id := r.URL.Query().Get("session"), r.URL.Query().Get("id")
	if session == "" || id == "" {
		return journal.Task{}, http.StatusBadRequest, errors.New("name a task with session and id")
	}
	t, err := h.opts.Store.Task(ctx, session, id)
	if errors.Is(err, journal.ErrNotFound) {
		return t, http.StatusNotFound, fmt.Errorf("no task %s in session %s", id, session)
	}
	if err != nil {
		return t, http.StatusServiceUnavailable, fmt.Errorf("the journal cannot be read now: %v", err)
	}
	return t, 0, nil
}

// task answers a task's detail, and whether it can be stopped here.
func (h *Handler) task(w http.ResponseWriter, r *http.Request) {
	t, code, err := h.lookup(r.Context(), r)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	out := struct {
		taskJSON
		CanCancel  bool   `json:"can_cancel"`
		CancelNote string `json:"cancel_note,omitempty"`
	}{taskJSON: h.detail(r.Context(), t), CanCancel: h.opts.Cancel != nil}
	if h.opts.Cancel == nil {
		out.CancelNote = h.opts.CancelNote
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(out)
}

// cancel stops a task (Options.Cancel). It needs the header
// X-Offstage-Action: cancel, which a form on another site cannot send.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Offstage-Action") != "cancel" {
		http.Error(w, "403 Forbidden: send X-Offstage-Action: cancel (the page does)", http.StatusForbidden)
		return
	}
	if h.opts.Cancel == nil {
		http.Error(w, h.opts.CancelNote, http.StatusNotImplemented)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "413 Request Entity Too Large: a cancel request is a task's session and id and a reason of at most 500 bytes, 8 KiB in all", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "400 Bad Request: "+err.Error(), http.StatusBadRequest)
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if len(reason) > 500 {
		http.Error(w, "400 Bad Request: the reason is longer than 500 bytes", http.StatusBadRequest)
		return
	}
	session, id := r.PostFormValue("session"), r.PostFormValue("id")
	if session == "" || id == "" {
		http.Error(w, "400 Bad Request: name a task with session and id", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	t, err := h.opts.Cancel(ctx, session, id, journal.DashboardBy+" ("+remoteHost(r)+")", reason)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(toJSON(t, false))
}

func remoteHost(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return strings.Trim(host, "[]")
}
