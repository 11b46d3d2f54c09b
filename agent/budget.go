package agent

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/offstage/offstage/task"
)

// Budget bounds what an agent may spend: tokens (input and output
// together), model calls, wall time. A zero field is no bound. A budget
// is checked before each model call, so the call that crosses it
// completes, and the next one is not made.
type Budget struct {
	Tokens int64
	Calls  int64
	Time   time.Duration
}

// IsZero reports whether b bounds nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// Narrow returns the tighter of b and c in each field (a zero field is no
// bound): a profile's budget narrowed by spawn_agent's, which can so
// never widen it.
func (b Budget) Narrow(c Budget) Budget {
	tight := func(x, y int64) int64 {
		if x == 0 || (y != 0 && y < x) {
			return y
		}
		return x
	}
	return Budget{Tokens: tight(b.Tokens, c.Tokens), Calls: tight(b.Calls, c.Calls), Time: time.Duration(tight(int64(b.Time), int64(c.Time)))}
}

// Validate refuses negative bounds.
func (b Budget) Validate() error {
	if b.Tokens < 0 || b.Calls < 0 || b.Time < 0 {
		return errors.New("a budget must not be negative (0 is no budget)")
	}
	return nil
}

// reached returns the error for the first bound of b that used (spent in
// elapsed) has reached, or nil.
func (b Budget) reached(scope string, used task.Usage, elapsed time.Duration) *BudgetError {
	e := &BudgetError{Scope: scope, Used: used, Elapsed: elapsed}
	switch {
	case b.Tokens > 0 && used.Tokens() >= b.Tokens:
		e.Budget, e.Limit = BudgetTokens, b.Tokens
	case b.Calls > 0 && used.ModelCalls >= b.Calls:
		e.Budget, e.Limit = BudgetCalls, b.Calls
	case b.Time > 0 && elapsed >= b.Time:
		e.Budget, e.Limit = BudgetTime, int64(b.Time)
	default:
		return nil
	}
	return e
}

// What a budget bounds (BudgetError.Budget).
const (
	BudgetTokens = "token"
	BudgetCalls  = "call"
	BudgetTime   = "time"
)

// Whose budget it is (BudgetError.Scope).
const (
	ScopeAgent      = "sub-agent"
	ScopeSession    = "session"
	ScopeAutonomous = "autonomous-turn"
)

// ErrBudget is what every *BudgetError is (errors.Is).
var ErrBudget = errors.New("budget reached")

// BudgetError says that a budget was reached: a sub-agent's (which then
// ends failed with it, its partial answer kept), the session's (no
// further model call is made in the session) or that of a chain of
// autonomous turns (no further autonomous turn starts until the user's
// next turn). errors.Is(err, ErrBudget) holds for it.
type BudgetError struct {
	Scope  string // ScopeAgent, ScopeSession or ScopeAutonomous
	Budget string // BudgetTokens, BudgetCalls or BudgetTime
	// Limit is the bound reached: tokens, calls, or for BudgetTime a
	// time.Duration.
	Limit int64
	// Used is what was spent when it was found reached, Elapsed the wall
	// time since the budget's start.
	Used    task.Usage
	Elapsed time.Duration
	// Agent, for a sub-agent's budget reached by a sub-agent below it,
	// is the task id of the sub-agent whose budget it is ("agent:1").
	Agent string
}

// Error says which budget, its figure and the calls made: "token budget
// of 200k reached after 31 calls"; for the session's or an autonomous
// chain's, "session token budget of 1M reached after 80 calls".
func (e *BudgetError) Error() string {
	var limit string
	switch e.Budget {
	case BudgetTime:
		limit = time.Duration(e.Limit).String()
	case BudgetTokens:
		limit = FormatTokens(e.Limit)
	default:
		limit = strconv.FormatInt(e.Limit, 10)
	}
	prefix := ""
	switch {
	case e.Agent != "":
		prefix = e.Agent + "'s "
	case e.Scope != ScopeAgent && e.Scope != "":
		prefix = e.Scope + " "
	}
	return fmt.Sprintf("%s%s budget of %s reached after %s", prefix, e.Budget, limit, plural(e.Used.ModelCalls, "call"))
}

// Is makes errors.Is(err, ErrBudget) hold.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// EndedBy names a budget's end as a limit's (task.Ender): a sub-agent
// that reached its budget ended by limit, the reason naming the budget.
func (e *BudgetError) EndedBy() (by, reason string) { return task.ByLimit, e.Error() }

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatInt(n, 10) + " " + what + "s"
}

// FormatTokens writes a token count short: 950, 12.5k, 200k, 1.2M.
func FormatTokens(n int64) string {
	f := func(v float64, unit string) string {
		s := strconv.FormatFloat(v, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + unit
	}
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return f(float64(n)/1e3, "k")
	}
	return f(float64(n)/1e6, "M")
}

// ParseTokens reads a token count as a user writes it: "200000", "200k",
// "1.5M" (k and M are 1,000 and 1,000,000; either case).
func ParseTokens(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mult, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "m"), strings.HasSuffix(t, "M"):
		mult, t = 1e6, t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange), math.IsNaN(v), math.IsInf(v, 0) && !errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("%q is not a token count: write 200000, 200k or 1.5M", s)
	case v < 0:
		return 0, fmt.Errorf("%q is negative: a token budget is 0 (none) or more", s)
	case v*mult > maxTokens:
		return 0, fmt.Errorf("%q is more tokens than a budget may be (at most %s)", s, FormatTokens(maxTokens))
	case math.Round(v*mult) == 0 && strings.ContainsAny(t, "123456789"):
		// A bound the user wrote must not become no bound.
		return 0, fmt.Errorf("%q is less than one token: a token budget is a whole count (0 is none)", s)
	}
	return int64(math.Round(v * mult)), nil
}

// maxTokens bounds a token budget: far past any spend, far from overflow
// when usage is added to it.
const maxTokens = 1e15

// MaxBudgetSeconds is the largest time budget in seconds that a
// time.Duration holds (about 292 years): budget_seconds past it would
// wrap around to a budget that is negative (none) or tiny.
const MaxBudgetSeconds = int64(math.MaxInt64 / time.Second)

// BudgetSeconds is n seconds as a time budget, or an error naming key
// (budget_seconds) when n is negative or past MaxBudgetSeconds.
func BudgetSeconds(key string, n int64) (time.Duration, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("%s must not be negative (0 or absent is no bound)", key)
	case n > MaxBudgetSeconds:
		return 0, fmt.Errorf("%s is at most %d (about 292 years); %d is past it", key, MaxBudgetSeconds, n)
	}
	return time.Duration(n) * time.Second, nil
}
