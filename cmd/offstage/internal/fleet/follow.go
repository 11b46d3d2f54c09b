package fleet

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
)

// FollowOptions say where Follow starts and how it reaches the owner.
type FollowOptions struct {
	// Since is the byte of the task's output to start from (0: its
	// start); negative: the last Lines lines instead.
	Since int64
	// Lines is how many of the last lines to start with when Since is
	// negative; default 10.
	Lines int
	// Client reaches the owner; default one with no overall timeout
	// (following lasts as long as the task).
	Client *http.Client
	// Note hears what a person should know besides the output (where it
	// is read from, that the owner is gone); default dropped.
	Note func(string)
}

// OutputPath is where an owner serves its tasks' output to peers
// (Handler).
const OutputPath = "/fleet/v1/output"

// tailBytes bounds the look back for the last lines.
const tailBytes = 64 << 10

// Follow writes task id of session's output to w: what it printed from
// opts.Since (or its last opts.Lines lines), then what it prints, as it
// comes, until it ends or ctx ends. It asks the owner when the owner is
// alive and serves peers (offstage mcp --http), reads the log where it
// was written when that is this machine, and otherwise returns an error
// that says where the log is. Only shells have output to follow. It
// blocks; the caller ends it with ctx.
// LogError is why Follow cannot read a task's output log: the task's or
// the log's own trouble (none kept, on another machine, unreadable), not
// the journal's, and said as it is.
type LogError struct{ error }

func (e LogError) Unwrap() error { return e.error }

func Follow(ctx context.Context, store journal.Store, session, id string, opts FollowOptions, w io.Writer) error {
	db, ok := store.(Store)
	if !ok {
		return fmt.Errorf("fleet: %T cannot tell where a task runs", store)
	}
	if opts.Lines <= 0 {
		opts.Lines = 10
	}
	if opts.Note == nil {
		opts.Note = func(string) {}
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	t, err := db.Task(ctx, session, id)
	if err != nil {
		return err
	}
	if t.State == journal.Queued {
		return fmt.Errorf("%s is queued: it has no output yet; follow it once it runs", id)
	}
	if t.Kind != "shell" && t.LogPath == "" {
		return fmt.Errorf("%s is a %s task: only shells have output to follow (offstage tasks show gives its result)", id, t.Kind)
	}
	peer, err := db.PeerOf(ctx, session)
	if err != nil {
		return err
	}
	gone := hostGone(peer.Host)
	here, _ := os.Hostname()
	if peer.Addr != "" && peer.Hostname != here && loopback(peer.Addr) {
		// Its loopback is not ours: asking ours would hand its secret to
		// whatever listens here.
		opts.Note(fmt.Sprintf("its offstage serves only its own machine (%s on %s): start it with --http on an address the fleet reaches and --allow-remote", peer.Addr, peer.Hostname))
		peer.Addr = ""
	}
	if !gone && peer.Addr != "" {
		next, err := fromPeer(ctx, peer, session, id, opts, w)
		if err == nil || ctx.Err() != nil {
			return err
		}
		opts.Note(fmt.Sprintf("its offstage (pid %d on %s) cannot be reached at %s (%v)", peer.PID, peer.Hostname, peer.Addr, err))
		if next >= 0 {
			opts.Since = next // go on where the owner stopped, nothing twice
		}
	}
	where := fmt.Sprintf("%s on %s", t.LogPath, peer.Hostname)
	if t.LogPath == "" {
		return LogError{fmt.Errorf("%s has no output log (its offstage kept output in memory only)", id)}
	}
	if peer.Hostname != here {
		return LogError{fmt.Errorf("%s's output log is %s, not on this machine, and its offstage cannot serve it: read it there", id, where)}
	}
	f, err := journal.OpenLog(t)
	if err != nil {
		return LogError{fmt.Errorf("%s's output log %s cannot be read here: %w", id, where, err)}
	}
	defer f.Close()
	if gone {
		opts.Note(fmt.Sprintf("its offstage (pid %d on %s) is gone; this is what it logged, read from %s", peer.PID, peer.Hostname, t.LogPath))
		return fromFile(ctx, f, opts, w, func() bool { return true })
	}
	if peer.Addr != "" {
		opts.Note("reading what it logged from " + t.LogPath + " on this machine instead")
	}
	// Alive on this machine, serving no peers (offstage run, or mcp on
	// stdio) or no longer reached: follow the log, and the journal for
	// the task's end or its owner's.
	finished := func() bool {
		x, err := db.Task(ctx, session, id)
		if err != nil || x.State.Finished() {
			return true
		}
		if p, err := db.PeerOf(ctx, session); err == nil && hostGone(p.Host) {
			opts.Note(fmt.Sprintf("its offstage (pid %d on %s) is gone; the rest is what it logged, read from %s", p.PID, p.Hostname, t.LogPath))
			return true
		}
		return false
	}
	return fromFile(ctx, f, opts, w, finished)
}

// loopback says whether a peer address names a loopback host.
func loopback(addr string) bool {
	u, err := url.Parse(addr)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// hostGone says whether a host is known to have died: its lease ran out,
// or its process is gone from this machine.
func hostGone(h journal.Host) bool {
	if h.PID == 0 { // known by name only (an older journal): cannot tell
		return false
	}
	if !h.Lease.IsZero() {
		return h.Lease.Before(time.Now())
	}
	return !journal.Alive(h)
}

// startHeader says at which byte of the output the owner's answer
// starts: a follower cut off can go on from the log where it stopped.
const startHeader = "Offstage-Output-Start"

// fromPeer asks the owner for the output, and copies it to w as it
// comes. On failure, next is the byte of the output to go on from, or
// -1 if nothing was received.
func fromPeer(ctx context.Context, p journal.Peer, session, id string, opts FollowOptions, w io.Writer) (next int64, err error) {
	q := url.Values{"session": {session}, "id": {id}, "lines": {strconv.Itoa(opts.Lines)}}
	if opts.Since >= 0 {
		q.Set("since", strconv.FormatInt(opts.Since, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Addr+OutputPath+"?"+q.Encode(), nil)
	if err != nil {
		return -1, err
	}
	req.Header.Set("Authorization", "Bearer "+p.Secret)
	resp, err := opts.Client.Do(req)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return -1, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	start, herr := strconv.ParseInt(resp.Header.Get(startHeader), 10, 64)
	// io.Copy writes what each Read returns: what the owner flushed, as
	// it comes.
	n, err := io.Copy(w, resp.Body)
	if herr != nil {
		return -1, err
	}
	return start + n, err
}

// followPoll is how often a log file is looked at for more, and the
// journal for the task's end, when there is no owner to ask: a local
// log of a process that serves no peers.
const followPoll = 100 * time.Millisecond

// fromFile writes the log f from the start the options choose, then what
// is appended to it until finished says the task ended (and what it wrote
// before is read) or ctx ends. The caller opened f (journal.OpenLog) and
// closes it.
func fromFile(ctx context.Context, f *os.File, opts FollowOptions, w io.Writer, finished func() bool) error {
	return fromFileAt(ctx, f, opts, w, finished, func(int64) {})
}

// fromFileAt is fromFile, telling start where it starts before it writes.
func fromFileAt(ctx context.Context, f *os.File, opts FollowOptions, w io.Writer, finished func() bool, start func(int64)) error {
	var err error
	next := opts.Since
	if next < 0 {
		if next, err = lastLinesFrom(f, opts.Lines); err != nil {
			return err
		}
	}
	start(next)
	buf := make([]byte, 32<<10)
	for {
		ended := finished() // before reading: what it wrote before ending is read after
		for {
			n, err := f.ReadAt(buf, next)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				next += int64(n)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if n < len(buf) {
				break
			}
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(followPoll):
		}
	}
}

// lastLinesFrom returns the offset of the last n lines of f.
func lastLinesFrom(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	from := max(0, st.Size()-tailBytes)
	b := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	return from + int64(lastLines(b, n, from > 0)), nil
}

// lastLines returns where the last n lines of b start; cut says b's
// first line is a piece of a line, never counted.
func lastLines(b []byte, n int, cut bool) int {
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end-- // the final newline ends the last line
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return i + 1
		}
	}
	return 0
}

// Owner is what Handler serves from: *journal.Recorder.
type Owner interface {
	PeerSecret() string
	Shell(session, id string) (*proc.Process, bool)
	Store() *journal.DB
	Host() journal.Host
	LogDir() string
}

var _ Owner = (*journal.Recorder)(nil)

// maxFollowers bounds the peers an owner serves at once; more get 503.
const maxFollowers = 64

// Handler serves an owner's tasks' output to its peers at OutputPath
// (GET, query session, id, and since or lines), to a request that shows
// the owner's secret as a bearer token (compared in constant time;
// others get 401): a live shell's output from the cursor, then as it
// comes until the shell ends (woken by the output, never polling); a
// shell of its own sessions that has ended, what its log holds, if the
// log is in the owner's log directory: a path written into the journal
// by hand never makes it serve another file. At most 64 peers are
// served at once.
func Handler(o Owner) http.Handler {
	slots := make(chan struct{}, maxFollowers)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, auth, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || o.PeerSecret() == "" || subtle.ConstantTimeCompare([]byte(auth), []byte(o.PeerSecret())) != 1 {
			http.Error(w, "401 Unauthorized: a peer shows this instance's secret, as the journal records it", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "405 Method Not Allowed: GET", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		session, id := q.Get("session"), q.Get("id")
		opts := FollowOptions{Since: -1, Lines: 10}
		if s := q.Get("since"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				http.Error(w, "400 Bad Request: since is a byte offset, 0 or more", http.StatusBadRequest)
				return
			}
			opts.Since = n
		}
		if l, err := strconv.Atoi(q.Get("lines")); err == nil && l > 0 {
			opts.Lines = min(l, 10000)
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			http.Error(w, fmt.Sprintf("503 Service Unavailable: %d peers follow this instance's tasks already", maxFollowers), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if p, ok := o.Shell(session, id); ok {
			serveLive(r.Context(), p, opts, w)
			return
		}
		f, ok := ownLog(r.Context(), o, session, id)
		if !ok {
			http.Error(w, fmt.Sprintf("404 Not Found: no output of %s/%s here", session, id), http.StatusNotFound)
			return
		}
		defer f.Close()
		fromFileAt(r.Context(), f, opts, flusher(w), func() bool { return true }, func(at int64) {
			w.Header().Set(startHeader, strconv.FormatInt(at, 10))
		})
	})
}

// ownLog opens the log of a task of one of the owner's sessions, if it
// lies where offstage writes logs (journal.OpenLog).
func ownLog(ctx context.Context, o Owner, session, id string) (*os.File, bool) {
	t, err := o.Store().Task(ctx, session, id)
	if err != nil || t.LogPath == "" {
		return nil, false
	}
	if p, err := o.Store().PeerOf(ctx, session); err != nil || p.ID != o.Host().ID {
		return nil, false
	}
	f, err := journal.OpenLog(t)
	return f, err == nil
}

// serveLive writes a live shell's output from the cursor the options
// choose and then as it comes, flushing each piece, until it ends.
func serveLive(ctx context.Context, p *proc.Process, opts FollowOptions, rw http.ResponseWriter) {
	w := flusher(rw)
	next := opts.Since
	if next < 0 {
		next = p.TailLines(proc.Combined, opts.Lines, tailBytes).Start
	}
	rw.Header().Set(startHeader, strconv.FormatInt(next, 10))
	for {
		total, err := p.WaitOutput(ctx, next)
		if err != nil {
			return
		}
		ch := p.Read(proc.Combined, next, tailBytes)
		if ch.Skipped > 0 {
			// Said in the stream, so a follower that loses the owner and
			// goes on from the log resumes a little past where it was.
			fmt.Fprintf(w, "\n[offstage: %d bytes of output are no longer held and were skipped]\n", ch.Skipped)
		}
		if _, err := w.Write(ch.Data); err != nil {
			return
		}
		next = ch.Next
		if _, done := p.Exit(); done && next >= total {
			return
		}
	}
}

// flusher flushes each write to the client.
func flusher(w http.ResponseWriter) io.Writer { return flushWriter{w, http.NewResponseController(w)} }

type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = f.rc.Flush()
	}
	return n, err
}
