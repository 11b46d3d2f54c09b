package main

import (
	"errors"
	"flag"
	"strconv"
	"time"

	"github.com/offstage/offstage/agent"
)

// budgetFlags are --budget-tokens, --budget-calls and --budget-time (the
// session's budget) and their --autonomous-budget-* twins (each chain of
// autonomous turns'), on run, mcp and acp.
type budgetFlags struct {
	session, autonomous agent.Budget
}

func (f *budgetFlags) register(fs *flag.FlagSet) {
	for _, b := range []struct {
		prefix, whose string
		budget        *agent.Budget
	}{
		{"budget", "the session (every model call, sub-agents' included); once reached no further call is made", &f.session},
		{"autonomous-budget", "each chain of autonomous turns (those background results start between two of your turns); once reached they stop until your next turn", &f.autonomous},
	} {
		fs.Func(b.prefix+"-tokens", "cap the tokens (in and out) of "+b.whose+", at `N` (200k, 1.5M) (default: none)", func(s string) error {
			n, err := agent.ParseTokens(s)
			b.budget.Tokens = n
			return err
		})
		fs.Func(b.prefix+"-calls", "cap the model calls of "+b.whose+", at `N` (default: none)", func(s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 0 {
				return errors.New("not a number of calls: give a whole number, such as 100")
			}
			b.budget.Calls = n
			return nil
		})
		fs.Func(b.prefix+"-time", "cap the wall time of "+b.whose+", at `DURATION` (30m, 2h) (default: none)", func(s string) error {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return errors.New("not a duration: give one such as 30m or 2h")
			}
			b.budget.Time = d
			return nil
		})
	}
}
