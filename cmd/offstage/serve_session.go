package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	face    string          // the face that opened it ("run")
	started time.Time

	mu       sync.Mutex
	attached bool      // guarded by mu: a face drives it
	quiet    time.Time // guarded by mu: since when it has had no face and no unfinished task (zero: not quiet)
	left     time.Time // guarded by mu: when the last face left (zero: never)
	seen     int       // guarded by mu: how many messages of the history the last face saw
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
		return nil
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
		if len(run) > 0 {
			what = "running: " + strings.Join(run, ", ")
		}
		fmt.Fprintf(w, "  %s (%s, %s): %s; %s finished\n", s.ID, s.Face, client, what, text.Plural(len(done), "task"))
	}
	fmt.Fprintln(w)
}
