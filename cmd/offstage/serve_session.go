package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// hosted is a session offstage serve holds: it outlives the faces that
// attach to it, one at a time.
type hosted struct {
	s       *agent.Session
	model   *swapModel
	ctx     context.Context // the session's life: its Run loops run under it, so a face that goes does not cancel a turn
	asks    chan escalation // requests to run outside the sandbox, for the attached conversation to answer
	face    string          // the face that opened it ("run", "mcp")
	hangup  func()          // ends its client's connection, if any (mcp); nil for run (sessions close refuses one with a run attached)
	started time.Time

	mu       sync.Mutex
	attached bool      // guarded by mu: a face drives it
	quiet    time.Time // guarded by mu: since when it has had no face and no unfinished task (zero: not quiet)
	gone     bool      // guarded by mu: its face went away (markGone) and has not yet detached
	// driving, if not nil, is closed when the turn a face that went away
	// left running ends: the next face waits for it (guarded by mu).
	driving <-chan struct{}
	left    time.Time // guarded by mu: when the last face left (zero: never)
	seen    int       // guarded by mu: how many messages of the history the last face saw
	// unwatch, if not nil, stops the watch that closes a detached MCP
	// session once its work has ended (mcpKeep.closeWhenDone); guarded
	// by mu.
	unwatch func()
}

// swapModel is a hosted session's model: the one of the face that drives
// it, which a re-attach may replace (new flags, a rotated key).
type swapModel struct {
	mu sync.Mutex
	m  provider.Model // guarded by mu
}

func (m *swapModel) Generate(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (provider.Response, error) {
	m.mu.Lock()
	cur := m.m
	m.mu.Unlock()
	return cur.Generate(ctx, req, onEvent)
}

func (m *swapModel) set(model provider.Model) {
	m.mu.Lock()
	m.m = model
	m.mu.Unlock()
}

// escalate asks the attached conversation whether a command may run
// outside the sandbox. With no conversation listening (no face, or a
// one-shot one) it refuses, saying how to allow it.
func (h *hosted) escalate(ctx context.Context, owner, command string) error {
	e := escalation{ctx: ctx, owner: owner, command: command, reply: make(chan error, 1)}
	select {
	case h.asks <- e:
	case <-time.After(time.Second):
		return errors.New("no one is in the conversation to ask (a one-shot run, or no client attached): run the command in the sandbox, or the user passes --sandbox-escalation allow")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-e.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runSession is the session a run drives: its own, or, under offstage
// serve, one the supervisor hosts (h), which a face leaving detaches from
// instead of closing.
type runSession struct {
	s    *agent.Session
	face *face
	h    *hosted // nil in process
}

func (rs *runSession) served() bool { return rs.h != nil }

// runContext is the context of the session's Run loop: the face's in
// process; under serve the session's own, so that a face going away does
// not cancel the turn in progress (it finishes; the next face sees it).
func (rs *runSession) runContext(ctx context.Context) context.Context {
	if rs.h != nil {
		return rs.h.ctx
	}
	return ctx
}

// close ends the session: every task cancelled, every process reaped.
func (rs *runSession) close(why string) error {
	if rs.h != nil {
		return rs.face.host.close(rs.h, task.Closed(why))
	}
	return rs.s.CloseCause(context.Background(), task.Closed(why))
}

// detach leaves a hosted session running, and says how to come back.
func (rs *runSession) detach(w io.Writer) error {
	n := running(rs.s.Table())
	rs.face.host.detach(rs.h)
	if rs.face.host.isStopping() {
		fmt.Fprintf(w, "offstage: offstage serve stopped: session %s closed, and every process was reaped.\n", rs.s.ID())
		return exitStatus(1) // said: the run did not end as asked
	}
	work := fmt.Sprintf("its work goes on under offstage serve (%s)", text.Plural(n, "running task"))
	if n == 0 {
		work = fmt.Sprintf("nothing of it runs; offstage serve closes it after %s without a client", rs.face.host.idle)
	}
	fmt.Fprintf(w, "offstage: detached from session %s: %s; offstage run --attach %s joins it again.\n", rs.s.ID(), work, rs.s.ID())
	return nil
}

// caughtUp says, to a face that attaches, what happened while no one
// watched: the model's answers the last face did not see, the tasks that
// finished since it left and those still running. Their results are not
// in it: the turn that follows delivers each one once, from the table.
func (rs *runSession) caughtUp(line func(string)) {
	h := rs.h
	h.mu.Lock()
	seen, left := h.seen, h.left
	h.mu.Unlock()
	if left.IsZero() {
		return // a new session: nothing happened yet
	}
	line(fmt.Sprintf("offstage: attached to session %s, without a client for %s.", rs.s.ID(), time.Since(left).Round(time.Second)))
	if hist := rs.s.History(); seen < len(hist) {
		for _, m := range hist[seen:] {
			if t := strings.TrimSpace(m.TextOf()); m.Role == provider.Assistant && t != "" {
				line("offstage: meanwhile the model answered: " + text.OneLine(t, 2000))
			}
		}
	}
	var finished, still []string
	waiting := 0
	for _, i := range rs.s.Table().View("").List() {
		switch {
		case !i.State.Finished():
			still = append(still, i.ID)
		case i.Finished.After(left):
			finished = append(finished, fmt.Sprintf("%s %s (%s)", i.ID, i.State, text.OneLine(i.Label, 60)))
		}
		if i.State.Finished() && !i.Delivered {
			waiting++
		}
	}
	if len(finished) > 0 {
		line("offstage: finished meanwhile: " + strings.Join(finished, "; "))
	}
	if len(still) > 0 {
		line("offstage: still running: " + strings.Join(still, ", "))
	}
	if waiting > 0 {
		line(fmt.Sprintf("offstage: %s the model has not seen: the next turn delivers them.", text.Plural(waiting, "result")))
	}
}

// resultsWaiting reports whether a top-level result waits for a turn.
func resultsWaiting(tb *task.Table) bool {
	return slices.ContainsFunc(tb.View("").List(), func(i task.Info) bool { return i.State.Finished() && !i.Delivered })
}

// askLive asks the state directory's supervisor, if one runs, what it
// hosts now.
func askLive(jf journalFlags) (liveState, bool) {
	c, _, err := dialServe(jf)
	if err != nil {
		return liveState{}, false
	}
	defer c.Close()
	if stoppedPeer(c) != nil {
		return liveState{}, false // it would not answer: not waited for 10 s
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if newWireWriter(c).send(serveHeader{Face: "tasks"}) != nil {
		return liveState{}, false
	}
	var st liveState
	if json.NewDecoder(io.LimitReader(c, 64<<20)).Decode(&st) != nil {
		return liveState{}, false
	}
	return st, true
}

// writeLive prints the supervisor's live sessions above the journal's
// table: whether a client is attached, and their tasks' live states.
func writeLive(w io.Writer, st liveState, now time.Time) {
	fmt.Fprintf(w, "offstage serve (pid %d) hosts %s.\n", st.PID, text.Plural(len(st.Sessions), "live session"))
	for _, s := range st.Sessions {
		client := "a client attached"
		if !s.Attached {
			client = "no client"
			if !s.Left.IsZero() {
				client += " for " + now.Sub(s.Left).Round(time.Second).String()
			}
		}
		var run, done []string
		for _, i := range s.Tasks {
			if i.State.Finished() {
				done = append(done, i.ID)
			} else {
				run = append(run, fmt.Sprintf("%s %s", i.ID, i.State))
			}
		}
		what := "nothing running"
		if len(run) > maxListed {
			run = append(run[:maxListed], fmt.Sprintf("and %d more", len(run)-maxListed))
		}
		if len(run) > 0 {
			what = "running: " + strings.Join(run, ", ")
		}
		fmt.Fprintf(w, "  %s (%s, %s): %s; %s finished\n", s.ID, s.Face, client, what, text.Plural(len(done), "task"))
	}
	fmt.Fprintln(w)
}

// servedOptions is what runFace resolved for a served session.
type servedOptions struct {
	model   provider.Model // nil: an attach keeps the session's
	policy  policy
	dir     string
	prompt  string
	attach  resumeFlag
	resume  resumeFlag
	json    bool
	wait    time.Duration
	pricing pricing
}

// servedRun is offstage run's session in the supervisor: a new one, a
// resumed one, or an attach to a live one.
func servedRun(ctx context.Context, f *face, sf *sessionFlags, o servedOptions, stdin io.Reader, stdout, stderr io.Writer) error {
	sup := f.host
	var (
		h   *hosted
		err error
	)
	if o.attach.set {
		h, err = sup.attach(o.attach.id, o.model)
	} else {
		cfg, surface := sf.template(o.model, sf.agents.profiles(o.dir, sf.model, stderr), o.policy, o.dir, sup.rec.journal())
		cfg.Tools.Process.Env = f.environ
		cfg.Tracer = sup.tracer
		surface.Name, surface.Logger = "run", sup.logger
		if o.resume.set {
			if surface.ID, err = sup.rec.resumeID(ctx, o.resume); err != nil {
				return err
			}
			if live, face := sup.find(surface.ID); face == "run" {
				return usagef("session %s is live under offstage serve: offstage run --attach %s joins it", live, live)
			} else if live != "" {
				return usagef("session %s is live under offstage serve, an %s session no run can join: offstage sessions close %s ends it, then --resume continues its record", live, face, live)
			}
			surface.Resume = true
		}
		h, err = sup.open(cfg, surface, sf.sandbox.escalation)
	}
	if err != nil {
		return err
	}
	rs := &runSession{s: h.s, face: f, h: h}
	if !h.waitDriving(ctx, func(s string) { fmt.Fprintln(stderr, s) }) {
		sup.detach(h)
		return context.Cause(ctx)
	}
	if o.resume.set {
		sayResumed(stderr, h.s)
	}
	context.AfterFunc(f.conn, func() { h.markGone() })
	detach := sup.reports.attach(stderr)
	if o.prompt == "" {
		sup.sayTrouble(stderr)
		err = interactive(ctx, rs, stdin, stdout, o.json, h.s.ID(), nil, o.pricing)
	} else {
		fmt.Fprintf(stderr, "offstage: session %s is hosted by offstage serve (pid %d): its work goes on if this run goes away.\n", h.s.ID(), os.Getpid())
		sup.sayTrouble(stderr)
		rs.caughtUp(func(s string) { fmt.Fprintln(stderr, s) })
		explain := func(ctx context.Context, err error) error { return modelError(ctx, err, o.model, sf.model) }
		err = oneShot(ctx, rs, explain, o.prompt, o.json, o.wait, o.pricing, stdout, stderr)
	}
	detach()
	return sup.faceEnded(h.s.ID(), err, stderr)
}

// errStopping refuses a session while the supervisor stops.
var errStopping = errors.New("offstage serve is stopping: it takes no new session")

// open starts a hosted session, attached to the face that opens it.
func (sup *supervisor) open(cfg agent.Config, sf agent.Surface, escalationMode string) (*hosted, error) {
	h := &hosted{model: &swapModel{m: cfg.Model}, ctx: sup.life, asks: make(chan escalation), face: sf.Name, started: time.Now(), attached: true}
	cfg.Model = h.model
	switch escalationMode {
	case "deny":
		cfg.Tools.Escalate = nil
	case "allow":
		cfg.Tools.Escalate = func(context.Context, string, string) error { return nil }
	default:
		cfg.Tools.Escalate = h.escalate
	}
	sup.mu.Lock()
	stopping := sup.stopping
	sup.mu.Unlock()
	if stopping {
		return nil, errStopping
	}
	s, err := agent.Open(sup.life, cfg, sf)
	if err != nil {
		return nil, openError(err)
	}
	h.s = s
	sup.mu.Lock()
	stopping = sup.stopping
	if !stopping {
		sup.sessions[s.ID()] = h
	}
	sup.mu.Unlock()
	if stopping { // the stop began while it opened: it closes as the others did
		s.CloseCause(context.Background(), &task.EndError{By: task.BySupervisor, Reason: "offstage serve was stopped", Err: task.ErrClosed})
		return nil, errStopping
	}
	return h, nil
}

// find returns the id and face of the live session id names (an id or
// its start), or "".
func (sup *supervisor) find(id string) (string, string) {
	sup.mu.Lock()
	defer sup.mu.Unlock()
	for sid, h := range sup.sessions {
		if strings.HasPrefix(sid, id) {
			return sid, h.face
		}
	}
	return "", ""
}

// attach gives a face the live session id names (an id or its start), or,
// for "", the latest one with no client; model, if not nil, drives its
// turns from now on.
func (sup *supervisor) attach(id string, model provider.Model) (*hosted, error) {
	other := "" // the face of a live session id names that no run drives
	if id != "" {
		for _, k := range sup.acp.Sessions() { // not under sup.mu: the keeper has its own lock
			if strings.HasPrefix(k.ID, id) {
				other = "acp"
			}
		}
	}
	sup.mu.Lock()
	defer sup.mu.Unlock()
	var pick []*hosted
	for sid, h := range sup.sessions {
		if h.face != "run" {
			if id != "" && strings.HasPrefix(sid, id) {
				other = h.face
			}
			continue // an MCP session: no run drives it
		}
		if id != "" && strings.HasPrefix(sid, id) {
			pick = append(pick, h)
		}
		if id == "" {
			h.mu.Lock()
			free := !h.attached
			h.mu.Unlock()
			if free {
				pick = append(pick, h)
			}
		}
	}
	switch {
	case len(pick) == 0 && id == "":
		return nil, usagef("no live session without a client under offstage serve (offstage tasks lists the sessions; offstage run --resume continues a recorded one)")
	case len(pick) == 0 && other != "":
		// It was said not to be there, and sent to --resume, which
		// refuses a live session (an outsider's finding).
		return nil, usagef("live session %s is an %s session, which its client drives (an %s client connects to it again; offstage sessions close %s ends it); offstage run --attach joins the sessions of offstage run", text.Quote(id, 80), other, other, id)
	case len(pick) == 0:
		return nil, usagef("no live session %s under offstage serve (offstage run --resume ID continues a recorded one)", text.Quote(id, 80))
	case len(pick) > 1 && id != "":
		return nil, usagef("%s is the start of %d live sessions; give more of the id", text.Quote(id, 80), len(pick))
	}
	slices.SortFunc(pick, func(a, b *hosted) int { return b.started.Compare(a.started) })
	h := pick[0]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.attached {
		return nil, usagef("session %s has a client already; it takes one at a time (it detaches when that run ends or goes away)", h.s.ID())
	}
	h.attached, h.quiet = true, time.Time{}
	if model != nil {
		h.model.set(model)
	}
	return h, nil
}

// finishing notes that the face leaving now left a turn running, which
// ends when done is closed.
func (h *hosted) finishing(done <-chan struct{}) {
	h.mu.Lock()
	h.driving = done
	h.mu.Unlock()
}

// waitDriving waits until no turn a departed face left runs, saying so on
// line if one does; false if ctx ended first.
func (h *hosted) waitDriving(ctx context.Context, line func(string)) bool {
	h.mu.Lock()
	d := h.driving
	h.mu.Unlock()
	if d == nil {
		return true
	}
	select {
	case <-d:
		return true
	default:
	}
	line("offstage: the turn the last client left running is not over yet; joining when it ends.")
	select {
	case <-d:
		return true
	case <-ctx.Done():
		return false
	}
}

// markGone notes how much of the conversation a face that went away had
// seen: a turn that finishes after it is news for the next face.
func (h *hosted) markGone() {
	n := len(h.s.History())
	h.mu.Lock()
	if h.attached && !h.gone {
		h.seen, h.left, h.gone = n, time.Now(), true
	}
	h.mu.Unlock()
}

// detach frees the session for another face; its work goes on.
func (sup *supervisor) detach(h *hosted) {
	n := len(h.s.History())
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.gone: // markGone noted what the face saw, when it went
		h.seen = min(h.seen, n)
	case h.attached || h.left.IsZero(): // the face saw it all, to now
		h.seen, h.left = n, time.Now()
	}
	h.attached, h.gone, h.quiet = false, false, time.Time{}
}

// close ends a hosted session with cause, and forgets it.
func (sup *supervisor) close(h *hosted, cause error) error {
	sup.mu.Lock()
	delete(sup.sessions, h.s.ID())
	sup.mu.Unlock()
	h.mu.Lock()
	if h.unwatch != nil {
		h.unwatch()
	}
	h.mu.Unlock()
	return h.s.CloseCause(context.Background(), cause)
}
