package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// taskKey names a task across the sessions of a process.
type taskKey struct{ session, id string }

// BindTable is called by agent.Open with the session's task table
// (agent.TableBinder): the table cancel requests of the session are
// carried out in.
func (o *openSession) BindTable(tb *task.Table) {
	o.r.mu.Lock()
	o.r.tables[o.ID()] = tb
	o.r.mu.Unlock()
	o.r.ring() // a request may have come before the table
}

// Shell returns the live process of shell task id of session, if this
// process runs it: what the owner serves to peers following its output.
func (r *Recorder) Shell(session, id string) (*proc.Process, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.shells[taskKey{session, id}]
	return p, ok
}

// LogDir is where this process keeps its shells' output logs
// (RecorderOptions.LogDir).
func (r *Recorder) LogDir() string { return r.opts.LogDir }

// PeerSecret is the secret this process's peers show it to read its
// tasks' output (see package fleet): random, made at start, recorded
// with the host, so whoever can read the journal can read the output.
func (r *Recorder) PeerSecret() string { return r.secret }

// SetPeerAddr records the address this process serves its tasks' output
// to peers on (http://HOST:PORT), with its secret and doorbell.
func (r *Recorder) SetPeerAddr(addr string) {
	r.mu.Lock()
	r.addr = addr
	r.mu.Unlock()
	r.j.Add(r.peerRecord())
}

func (r *Recorder) peerRecord() HostPeer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return HostPeer{ID: r.host.ID, Addr: r.addr, Secret: r.secret, Bell: r.bell}
}

func newSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// catchUp is how often the owner reads the cancel requests of its
// sessions whatever it heard: a missed notification, a doorbell rung
// while it was not listening, a request made by an older offstage.
const catchUp = 5 * time.Second

// ring wakes the cancel watcher, without waiting.
func (r *Recorder) ring() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// startCancels starts the watcher of cancel requests: it acts on them as
// it hears of them (PostgreSQL's LISTEN, or this host's doorbell socket
// in a SQLite journal) and every catchUp anyway. stop ends it and waits.
func (r *Recorder) startCancels() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var done []chan struct{}
	run := func(f func()) {
		ch := make(chan struct{})
		done = append(done, ch)
		go func() { defer close(ch); f() }()
	}
	if r.store.listen != nil {
		run(func() { r.listen(ctx) })
	} else if r.opts.BellDir != "" {
		if ln, err := r.openBell(); err != nil {
			r.opts.Report(fmt.Sprintf("no doorbell for cancel requests (%v): they are acted on within %s instead of at once", err, catchUp))
		} else {
			context.AfterFunc(ctx, func() { ln.Close() })
			run(func() { r.serveBell(ln) })
		}
	}
	run(func() { r.watchCancels(ctx) })
	return func() {
		cancel()
		for _, ch := range done {
			<-ch
		}
		r.mu.Lock()
		bell := r.bell
		r.mu.Unlock()
		if bell != "" {
			os.Remove(bell)
		}
	}
}

// openBell listens on this host's doorbell, a Unix socket in BellDir
// (0700) made 0600: connecting to it only tells this process to read the
// journal's cancel requests now, so it carries no authority of its own.
func (r *Recorder) openBell() (net.Listener, error) {
	if err := os.MkdirAll(r.opts.BellDir, 0o700); err != nil {
		return nil, err
	}
	if err := CheckDir(r.opts.BellDir); err != nil {
		return nil, err
	}
	path := filepath.Join(r.opts.BellDir, strconv.Itoa(r.host.PID)+".sock")
	os.Remove(path) // a dead process's of the same pid
	sweepBells(r.opts.BellDir)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	r.mu.Lock()
	r.bell = path
	r.mu.Unlock()
	r.j.Add(r.peerRecord())
	return ln, nil
}

// sweepBells removes the doorbells in dir that nobody listens on: those of
// processes that died without closing theirs (SIGKILL), which would
// otherwise stay for good. Connecting to a live one only rings it.
func sweepBells(dir string) {
	names, err := filepath.Glob(filepath.Join(dir, "*.sock"))
	if err != nil {
		return
	}
	for _, p := range names {
		c, err := net.DialTimeout("unix", p, 100*time.Millisecond)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			os.Remove(p)
		}
	}
}

// serveBell rings the watcher for each connection to the doorbell.
func (r *Recorder) serveBell(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
		r.ring()
	}
}

// Ring rings the doorbell at path (a SQLite host's, see HostPeer): its
// process reads its cancel requests at once. It fails if nobody listens.
func Ring(ctx context.Context, path string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return err
	}
	return c.Close()
}

// listen LISTENs for cancel requests on a connection of its own, and
// rings the watcher for each addressed to this host; a connection lost is
// made again with backoff, and the watcher reads the record after each
// (re)connection, so a notification missed meanwhile is caught up. The
// trouble is reported once per episode, and its end.
func (r *Recorder) listen(ctx context.Context) {
	backoff := retryFirst
	failing := false
	connected := func() {
		backoff = retryFirst
		if failing {
			failing = false
			r.opts.Report("journal: listening for cancel requests again")
		}
		r.ring() // what came while not listening
	}
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, connected)
		if ctx.Err() != nil {
			return
		}
		if !failing {
			failing = true
			r.opts.Report(fmt.Sprintf("journal: cannot listen for cancel requests (%v); retrying, and reading them every %s meanwhile", err, catchUp))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, retryMax)
	}
}

func (r *Recorder) listenOnce(ctx context.Context, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, r.store.listen)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == r.host.ID {
			r.ring()
		}
	}
}

// watchCancels acts on the pending cancel requests of this host's
// sessions when rung and every catchUp, until ctx ends.
func (r *Recorder) watchCancels(ctx context.Context) {
	tick := time.NewTicker(catchUp)
	defer tick.Stop()
	for {
		r.actOnCancels(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C:
		}
	}
}

// actOnCancels stops the tasks of this host's pending cancel requests,
// with the operator's name and reason as the cause their owner is told,
// and records what it did with each.
func (r *Recorder) actOnCancels(ctx context.Context) {
	reqs, err := r.store.PendingCancels(ctx, r.host.ID)
	if err != nil {
		return // the catch-up tries again; the writer reports the store's trouble
	}
	for _, q := range reqs {
		r.mu.Lock()
		tb, bound := r.tables[q.Session]
		opening := !bound && r.open[q.Session]
		r.mu.Unlock()
		if opening {
			continue // its table comes with agent.Open, which rings again
		}
		outcome := OutcomeNotHere
		if bound {
			finished, err := tb.CancelCause(q.ID, &OperatorCancel{By: q.By, Reason: q.Reason})
			switch {
			case errors.Is(err, task.ErrNotFound):
				outcome = "no such task in its session"
			case err != nil:
				outcome = err.Error()
			case finished:
				outcome = OutcomeFinished
			default:
				outcome = OutcomeCanceled
				r.opts.Report(fmt.Sprintf("%s of session %s stopped at the request of %s", q.ID, q.Session, q.By))
			}
		}
		if err := r.store.HandleCancel(ctx, q.Session, q.ID, outcome, time.Now()); err != nil && ctx.Err() == nil {
			r.opts.Report(fmt.Sprintf("journal: cannot record what was done with the cancel request of %s/%s (%v)", q.Session, q.ID, err))
		}
	}
}
