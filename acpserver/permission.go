package acpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// Permission options offered for a call. A sub-agent's call is offered
// both "always" scopes; the top level's only the session's.
const (
	optAllowOnce        = "allow_once"
	optAllowAlways      = "allow_always"       // the tool, for every agent of the session
	optAllowAlwaysAgent = "allow_always_agent" // the tool, for this sub-agent and those it starts
	optReject           = "reject"
)

// consequential reports whether a call of t is asked about: whatever is
// not read-only (review row G; MCP's annotations use the same classes).
// Of offstage's own tools that is those that run or end something; of an
// MCP server's, every tool its annotations do not call read-only, even
// one they say is not destructive: the user decides what a remote tool
// may change, not its server.
func consequential(t *tools.Tool) bool {
	return t.Safety != tools.ReadOnly
}

// grant is what an "always allow" covers: a tool, for one sub-agent and
// the sub-agents it starts, or with agent "" for the whole session.
type grant struct{ agent, tool string }

// maxAncestry bounds the walk from a sub-agent up to the top level (the
// runtime nests two levels; this only guards against a cycle).
const maxAncestry = 8

// ancestry returns the sub-agent id and the ids of the sub-agents above
// it, nearest first; nil for the top level.
func (s *session) ancestry(id string) []string {
	var ids []string
	for id != "" && len(ids) < maxAncestry {
		ids = append(ids, id)
		info, err := s.sess.Table().Info(id)
		if err != nil {
			break
		}
		id = info.Owner
	}
	return ids
}

// allowed reports whether the user allowed c's tool for good: for the
// session, or for c's sub-agent or one above it.
func (s *session) allowed(c agent.ToolCall) bool {
	up := s.ancestry(c.Agent)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.always[grant{"", c.Tool.Name}] {
		return true
	}
	return slices.ContainsFunc(up, func(id string) bool { return s.always[grant{id, c.Tool.Name}] })
}

// dialogs lets one permission request of a session be open at a time;
// the others wait their turn in the order they asked.
type dialogs struct {
	mu      sync.Mutex
	busy    bool            // guarded by mu: a request is open
	waiting []chan struct{} // guarded by mu: closed to hand the turn over, first come first
}

// acquire waits for the session's turn to ask, calling queued first if
// another request is open. It fails only when ctx ends first.
func (d *dialogs) acquire(ctx context.Context, queued func()) error {
	d.mu.Lock()
	if !d.busy {
		d.busy = true
		d.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	d.waiting = append(d.waiting, turn)
	d.mu.Unlock()
	queued()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		d.mu.Lock()
		i := slices.Index(d.waiting, turn)
		if i >= 0 {
			d.waiting = slices.Delete(d.waiting, i, i+1)
		}
		d.mu.Unlock()
		if i < 0 { // the turn was handed over meanwhile: pass it on
			d.release()
		}
		return ctx.Err()
	}
}

// release ends the open request and hands the turn to the next waiting.
func (d *dialogs) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiting) == 0 {
		d.busy = false
		return
	}
	next := d.waiting[0]
	d.waiting = d.waiting[1:]
	close(next)
}

// subCall is a sub-agent's call the user allowed, whose card stays
// in_progress until the sub-agent moves past the step that made it.
type subCall struct {
	card acp.ToolCallId
	iter int
}

// permit asks the client before an execute or destructive call runs, the
// top level's or a sub-agent's, unless Config.AllowAll or the user allowed
// that tool for good. One request is open at a time per session; the rest
// wait in order.
func (s *session) permit(ctx context.Context, c agent.ToolCall) error {
	if s.outsideSandbox(c) {
		if s.srv.cfg.NoEscalation {
			return errors.New("running a command outside the sandbox is not allowed here (the user turned escalation off); work within the sandbox, or tell the user what the command needs")
		}
		// Never granted for good, nor by AllowAll: each such command is
		// the user's to allow (see tools.Config.Escalate).
		if err := s.dialogs.acquire(ctx, func() {}); err != nil {
			return fmt.Errorf("%s while waiting to ask the user", cancelledWhat(c))
		}
		defer s.dialogs.release()
		if err := s.ask(ctx, c, true); err != nil {
			return err
		}
		s.running(c)
		return nil
	}
	if s.srv.cfg.AllowAll || !consequential(c.Tool) || s.allowed(c) {
		s.running(c)
		return nil
	}
	err := s.dialogs.acquire(ctx, func() {
		s.srv.cfg.Logger.Debug("permission request queued behind another", "session", s.id, "agent", c.Agent, "tool", c.Tool.Name)
	})
	if err != nil {
		return fmt.Errorf("%s while waiting to ask the user", cancelledWhat(c))
	}
	defer s.dialogs.release()
	if s.allowed(c) { // the request before this one allowed it for good
		s.running(c)
		return nil
	}
	if err := s.ask(ctx, c, false); err != nil {
		return err
	}
	s.running(c)
	return nil
}

// outsideSandbox says whether c is a bash call asking to run outside the
// session's sandbox (sandbox: false while one is on).
func (s *session) outsideSandbox(c agent.ToolCall) bool {
	if c.Tool == nil || c.Tool.Name != "bash" || !s.srv.cfg.Agent.Tools.Process.Sandbox.On() {
		return false
	}
	var in struct {
		Sandbox *bool `json:"sandbox"`
	}
	return json.Unmarshal(c.Input, &in) == nil && in.Sandbox != nil && !*in.Sandbox
}

// running marks a top-level call in_progress; a sub-agent's calls have no
// card unless the user was asked about them.
func (s *session) running(c agent.ToolCall) {
	if c.Agent == "" {
		s.cardStatusChanged(c.ID, acp.ToolCallStatusInProgress)
	}
}

func cancelledWhat(c agent.ToolCall) string {
	if c.Agent == "" {
		return "the turn was cancelled"
	}
	return c.Agent + " was cancelled"
}

// who names a sub-agent as the user sees it: "agent:1 (general)".
func who(c agent.ToolCall) string { return c.Agent + " (" + c.Profile + ")" }

// subTitle attributes a sub-agent's call: "agent:1 (general) wants to
// run: ls".
func subTitle(c agent.ToolCall, title string) string {
	if rest, ok := strings.CutPrefix(title, "Sub-agent "); ok {
		title = "start sub-agent " + rest
	} else if r, n := utf8.DecodeRuneInString(title); n > 0 {
		title = string(unicode.ToLower(r)) + title[n:]
	}
	return who(c) + " wants to " + title
}

// ask puts one call to the user. A sub-agent's call, which the client has
// not seen, first gets a card of its own, attributed to the sub-agent.
func (s *session) ask(ctx context.Context, c agent.ToolCall, once bool) error {
	title, kind := describe(c.Tool, c.Input)
	card := acp.ToolCallId(c.ID)
	options := []acp.PermissionOption{{OptionId: optAllowOnce, Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce}}
	if once {
		options[0].Name = "Allow this command outside the sandbox, once"
		if c.Agent != "" {
			card = acp.ToolCallId(c.Agent + "/" + c.ID)
			title = subTitle(c, title)
			s.update(acp.StartToolCall(card, title, acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(rawJSON(c.Input))))
		}
	} else if c.Agent == "" {
		options = append(options, acp.PermissionOption{OptionId: optAllowAlways, Name: "Always allow " + c.Tool.Name + " in this session (its sub-agents too)", Kind: acp.PermissionOptionKindAllowAlways})
	} else {
		card = acp.ToolCallId(c.Agent + "/" + c.ID) // ids are unique per conversation only
		title = subTitle(c, title)
		options = append(options,
			acp.PermissionOption{OptionId: optAllowAlwaysAgent, Name: "Always allow " + c.Tool.Name + " for " + c.Agent + " (and sub-agents it starts)", Kind: acp.PermissionOptionKindAllowAlways},
			acp.PermissionOption{OptionId: optAllowAlways, Name: "Always allow " + c.Tool.Name + " in this session (every agent)", Kind: acp.PermissionOptionKindAllowAlways})
		s.update(acp.StartToolCall(card, title, acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(rawJSON(c.Input))))
	}
	options = append(options, acp.PermissionOption{OptionId: optReject, Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce})
	s.flush(ctx) // the client has seen the tool call before it is asked about it
	resp, err := s.srv.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: s.id,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: card, Title: &title, Kind: &kind,
			Status: acp.Ptr(acp.ToolCallStatusPending), RawInput: rawJSON(c.Input),
		},
		Options: options,
	})
	err = s.decide(ctx, c, resp, err)
	if c.Agent != "" {
		s.subCallDecided(c, card, err)
	}
	return err
}

// decide turns the client's answer into nil (run the call) or the error
// the calling model gets, remembering an "always".
func (s *session) decide(ctx context.Context, c agent.ToolCall, resp acp.RequestPermissionResponse, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s while asking the user", cancelledWhat(c))
	case err != nil:
		return fmt.Errorf("the user could not be asked for permission (%v); say what you wanted to do instead", err)
	case resp.Outcome.Selected == nil:
		return fmt.Errorf("the user cancelled the permission request")
	}
	switch resp.Outcome.Selected.OptionId {
	case optAllowOnce:
		return nil
	case optAllowAlways:
		s.mu.Lock()
		s.always[grant{"", c.Tool.Name}] = true
		s.mu.Unlock()
		return nil
	case optAllowAlwaysAgent:
		if c.Agent == "" {
			break // not offered
		}
		s.mu.Lock()
		s.always[grant{c.Agent, c.Tool.Name}] = true
		s.mu.Unlock()
		return nil
	}
	if c.Agent != "" {
		return fmt.Errorf("the user rejected this call; do not retry it as it was: take another way, or report back what you needed it for")
	}
	return fmt.Errorf("the user rejected this call; do not retry it as it was: ask the user or take another way")
}

// subCallDecided updates a sub-agent's call's card after the user
// answered: failed with the reason, or in_progress until the sub-agent
// moves past that step (subCallsAdvance).
func (s *session) subCallDecided(c agent.ToolCall, card acp.ToolCallId, err error) {
	if err != nil {
		s.update(acp.UpdateToolCall(card, acp.WithUpdateStatus(acp.ToolCallStatusFailed),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("Not run: " + err.Error()))})))
		return
	}
	info, ierr := s.sess.Table().Info(c.Agent)
	s.update(acp.UpdateToolCall(card, acp.WithUpdateStatus(acp.ToolCallStatusInProgress),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("Allowed: " + c.Agent + " runs it; its result goes to " + c.Agent + "."))})))
	if ierr != nil || info.State.Finished() {
		s.finishSubCall(card, c.Agent, info.State)
		return
	}
	s.mu.Lock()
	s.subCalls[c.Agent] = append(s.subCalls[c.Agent], subCall{card: card, iter: info.Iteration})
	s.mu.Unlock()
}

// subCallsAdvance ends the cards of a sub-agent's allowed calls once it
// is past the step that made them: its next step starts only after every
// call of this one returned, and its end comes after them too.
func (s *session) subCallsAdvance(ev task.Event) {
	if ev.Type != task.EventProgress && ev.Type != task.EventFinished {
		return
	}
	s.mu.Lock()
	pending := s.subCalls[ev.ID]
	var done []subCall
	for i := 0; i < len(pending); {
		if ev.Type == task.EventFinished || pending[i].iter < ev.Iteration {
			done = append(done, pending[i])
			pending = slices.Delete(pending, i, i+1)
			continue
		}
		i++
	}
	if len(pending) == 0 {
		delete(s.subCalls, ev.ID)
	} else {
		s.subCalls[ev.ID] = pending
	}
	s.mu.Unlock()
	for _, sc := range done {
		state := task.Completed
		if ev.Type == task.EventFinished {
			state = ev.State
		}
		s.finishSubCall(sc.card, ev.ID, state)
	}
}

func (s *session) finishSubCall(card acp.ToolCallId, agentID string, state task.State) {
	status, text := acp.ToolCallStatusCompleted, "Ran; its result went to "+agentID+"."
	if state.Finished() && state != task.Completed {
		status, text = acp.ToolCallStatusFailed, fmt.Sprintf("%s ended %s at this step or after it.", agentID, state)
	}
	s.update(acp.UpdateToolCall(card, acp.WithUpdateStatus(status),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))})))
}
