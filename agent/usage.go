package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// Where the counts are kept: each model call's usage is added once, right
// after the call returns, by loop.account, to
//
//   - the sub-agent's task, and through task.Handle.AddUsage to every task
//     above it (so a sub-agent's figure includes its own sub-agents');
//   - the session's Usage (Total, and Autonomous for the top level's
//     calls in autonomous turns), which Config.OnUsage records;
//   - the running turn's (TurnEnd's Usage) and the autonomous chain's,
//     for the top level's calls.
//
// Nothing else adds, so nothing is counted twice: a parent's figure is
// the sum of its own calls and its children's, and the session's is the
// sum of every call.

// chain is the autonomous turns since the last user turn.
type chain struct {
	used    task.Usage
	start   time.Time // when its first turn began; zero before
	stopped bool      // a budget stopped it and the sink was told
}

// Usage returns what the session has spent so far (with what a resumed
// session had spent before). Safe for concurrent use.
func (s *Session) Usage() Usage {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	return s.usage
}

// account adds one model call's usage where it counts (see above).
func (l *loop) account(pu provider.Usage) {
	u := task.Usage{InputTokens: int64(pu.InputTokens), OutputTokens: int64(pu.OutputTokens), CachedInputTokens: int64(pu.CachedInputTokens), ModelCalls: 1}
	if l.handle != nil {
		l.handle.AddUsage(u)
	}
	s := l.s
	s.usageMu.Lock()
	s.usage.Total = s.usage.Total.Add(u)
	if l.handle == nil {
		s.turn = s.turn.Add(u)
		if s.inAuto.Load() {
			s.usage.Autonomous = s.usage.Autonomous.Add(u)
			s.chain.used = s.chain.used.Add(u)
		}
	}
	now := s.usage
	s.usageMu.Unlock()
	if s.cfg.OnUsage != nil {
		s.cfg.OnUsage(now)
	}
	if s.cfg.OnModelCall != nil {
		call := ModelCall{Profile: l.agent, Usage: u}
		if l.handle != nil {
			call.Agent = l.handle.ID()
		}
		s.cfg.OnModelCall(call)
	}
}

// overBudget returns the budget error that forbids l's next model call,
// or nil: the session's, a sub-agent's own (its task's usage, with its
// sub-agents') or that of a sub-agent that spawned it (or its spawner,
// and so on up), an autonomous chain's.
func (l *loop) overBudget() error {
	s := l.s
	s.usageMu.Lock()
	total, chainUsed, chainStart := s.usage.Total, s.chain.used, s.chain.start
	s.usageMu.Unlock()
	if e := s.cfg.Budget.reached(ScopeSession, total, time.Since(s.started)); e != nil {
		return e
	}
	if l.handle != nil {
		if e := l.budget.reached(ScopeAgent, l.handle.Usage(), time.Since(l.start)); e != nil {
			return e
		}
		// The budget of each sub-agent above it: each counts what its
		// sub-agents spend (task.Handle.AddUsage adds it up the tree).
		for p := l.parent; p != nil; p = p.parent {
			if e := p.budget.reached(ScopeAgent, p.handle.Usage(), time.Since(p.start)); e != nil {
				e.Agent = p.handle.ID()
				return e
			}
		}
	} else if s.inAuto.Load() {
		if e := s.cfg.AutonomousBudget.reached(ScopeAutonomous, chainUsed, time.Since(chainStart)); e != nil {
			return e
		}
	}
	return nil
}

// AutonomousBlocked says why the session would take no autonomous turn
// now: a budget reached (a *BudgetError), its cap of autonomous turns, no
// model, or its closing; nil if it would. A face that waits for the turn
// that delivers the results waiting asks it first: a turn that never
// comes would leave it waiting for good.
func (s *Session) AutonomousBlocked() error {
	switch {
	case s.cfg.Model == nil:
		return errors.New("the session has no model")
	case s.closing.Load():
		return errors.New("the session is closing")
	case s.autonomous.Load() >= int64(s.cfg.MaxAutonomousTurns):
		return fmt.Errorf("the session took its %d autonomous turns", s.cfg.MaxAutonomousTurns)
	}
	s.usageMu.Lock()
	total, c := s.usage.Total, s.chain
	s.usageMu.Unlock()
	if e := s.cfg.Budget.reached(ScopeSession, total, time.Since(s.started)); e != nil {
		return e
	}
	if c.start.IsZero() {
		return nil // no chain yet: its budget is whole
	}
	if e := s.cfg.AutonomousBudget.reached(ScopeAutonomous, c.used, time.Since(c.start)); e != nil {
		return e
	}
	return nil
}

// autonomousStopped reports whether a budget forbids the next autonomous
// turn, telling the sink the first time in a chain; otherwise it starts
// the chain's clock if this is its first turn. Called with turnMu held.
func (s *Session) autonomousStopped(sink Sink) bool {
	s.usageMu.Lock()
	if s.chain.start.IsZero() {
		s.chain.start = time.Now()
	}
	total, c := s.usage.Total, s.chain
	s.usageMu.Unlock()
	e := s.cfg.Budget.reached(ScopeSession, total, time.Since(s.started))
	if e == nil {
		e = s.cfg.AutonomousBudget.reached(ScopeAutonomous, c.used, time.Since(c.start))
	}
	if e == nil {
		return false
	}
	if !c.stopped {
		s.usageMu.Lock()
		s.chain.stopped = true
		s.usageMu.Unlock()
		emit(sink, Event{Type: BudgetStop, Autonomous: true, Text: "Autonomous turns stopped: " + e.Error() + ". Background results wait for the next user turn.", Err: e})
	}
	return true
}
