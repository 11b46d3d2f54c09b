package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/task"
)

// mcpKeep is how offstage serve keeps the MCP sessions of offstage mcp
// on stdio past their client (mcpserver.Config.Keep): each is a hosted
// session of face "mcp", listed by offstage tasks and offstage sessions,
// closed by the idle policy, offstage sessions close or the supervisor's
// stop, as run's are. MCP has no way back into a session, so no run
// --attach joins one.
type mcpKeep struct {
	sup *supervisor
	// hangup ends the client's connection: offstage sessions close of a
	// session whose client is still attached.
	hangup func()
}

// Opened hosts the session, attached to its client.
func (k mcpKeep) Opened(s *agent.Session) error {
	sup := k.sup
	h := &hosted{s: s, ctx: sup.life, face: "mcp", started: time.Now(), attached: true, hangup: k.hangup}
	sup.mu.Lock()
	defer sup.mu.Unlock()
	if sup.stopping {
		return errStopping
	}
	sup.sessions[s.ID()] = h
	return nil
}

// Detached runs when the session's client went away (end of its input,
// SIGTERM or SIGKILL of offstage mcp). A session with unfinished work
// detaches: the work goes on, and the idle policy closes it once the work
// has ended and --idle has passed. A session with none closes at once:
// no client can come back to it (MCP has no session/load), so keeping it
// would only leave sessions to pile up until the idle policy, each
// holding its table; its finished tasks are in the journal.
func (k mcpKeep) Detached(s *agent.Session) {
	sup := k.sup
	sup.mu.Lock()
	h := sup.sessions[s.ID()]
	sup.mu.Unlock()
	if h == nil {
		return // closed meanwhile: offstage sessions close, or the stop
	}
	if n := running(s.Table()); n > 0 {
		watch, stop := context.WithCancel(sup.life)
		h.mu.Lock()
		h.unwatch = stop
		h.mu.Unlock()
		sup.detach(h)
		sup.logger.Info(fmt.Sprintf("mcp: session %s detached: its client went away; %d unfinished tasks go on", s.ID(), n))
		go k.closeWhenDone(watch, h)
		return
	}
	sup.close(h, task.Closed("mcp: the client went away, with nothing of the session running"))
}

// closeWhenDone closes h, an MCP session its client left with work
// running, once that work has ended: no client can come back to it
// either, and it stayed for --idle (24 h), one for every client that
// left work behind (an outsider's finding). Its results are in the
// journal. ctx ends when something else closes it first (sup.close), or
// when the supervisor stops.
func (k mcpKeep) closeWhenDone(ctx context.Context, h *hosted) {
	events := h.s.Table().Events()
	for seq := events.Last(); running(h.s.Table()) > 0; {
		evs, _ := events.Wait(ctx, seq)
		if ctx.Err() != nil {
			return
		}
		if len(evs) > 0 {
			seq = evs[len(evs)-1].Seq
		} else { // fell behind the log: from now
			seq = events.Last()
		}
	}
	sup := k.sup
	sup.mu.Lock()
	ours := sup.sessions[h.s.ID()] == h && !sup.stopping
	sup.mu.Unlock()
	if !ours || ctx.Err() != nil {
		return
	}
	why := "mcp: the client went away, and the session's last task has ended"
	sup.close(h, task.Closed(why))
	sup.logger.Warn(fmt.Sprintf("closed session %s (%s)", h.s.ID(), why)) // as the idle policy says its closes
}

// closeSession closes the live session id names (an id or its start)
// with cause: a run or MCP session the supervisor hosts, or an ACP
// session its keeper keeps. It returns the session's full id and how
// many of its tasks were unfinished, and so ended.
func (sup *supervisor) closeSession(id string, cause error) (string, int, error) {
	if id == "" {
		return "", 0, usagef("offstage sessions close takes the id of a live session (offstage sessions lists them)")
	}
	sup.mu.Lock()
	var pick []*hosted
	for sid, h := range sup.sessions {
		if strings.HasPrefix(sid, id) {
			pick = append(pick, h)
		}
	}
	stopping := sup.stopping
	sup.mu.Unlock()
	if stopping {
		return "", 0, errStopping
	}
	var acpIDs []string
	for _, k := range sup.acp.Sessions() {
		if strings.HasPrefix(k.ID, id) {
			acpIDs = append(acpIDs, k.ID)
		}
	}
	switch n := len(pick) + len(acpIDs); {
	case n == 0:
		return "", 0, usagef("no live session %s under offstage serve (offstage sessions lists them; one that closed is in the journal: offstage tasks --session ID)", text.Quote(id, 80))
	case n > 1:
		return "", 0, usagef("%s is the start of %d live sessions; give more of the id", text.Quote(id, 80), n)
	case len(acpIDs) == 1:
		n, ok, err := sup.acp.CloseSession(acpIDs[0], cause)
		if !ok {
			return "", 0, usagef("session %s closed meanwhile", acpIDs[0])
		}
		return acpIDs[0], n, err
	}
	h := pick[0]
	h.mu.Lock()
	attached := h.attached
	h.mu.Unlock()
	if h.face == "run" && attached {
		// Refused rather than pulled from under the run: its loop would
		// wait on a session that runs no more turns.
		return "", 0, usagef("session %s has an offstage run attached: /quit in it ends the session; offstage sessions close closes it once that run has gone (it detaches)", h.s.ID())
	}
	n := running(h.s.Table())
	err := sup.close(h, cause)
	if h.hangup != nil {
		h.hangup() // a client still attached is disconnected: its session is no more
	}
	return h.s.ID(), n, err
}

// closeBy is the cause offstage sessions close gives the tasks it ends.
func closeBy(pid int) error {
	return &task.EndError{By: task.ByUser, Reason: fmt.Sprintf("offstage sessions close (from pid %d)", pid), Err: task.ErrClosed}
}
