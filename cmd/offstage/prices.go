package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
)

// price is what a model's tokens cost, per million, in the user's
// currency, as the config file gives it:
//
//	prices:                  # per million tokens; offstage knows no prices
//	  gpt-4.1: {input: 2, output: 8, cached_input: 0.5}
//	  claude-sonnet-4-5: {input: 3, output: 15, cached_input: 0.3}
//
// cached_input, if absent, is input's.
type price struct {
	Input       float64  `yaml:"input"`
	Output      float64  `yaml:"output"`
	CachedInput *float64 `yaml:"cached_input"`
}

// pricing is the session's model and the user's prices, for the views.
type pricing struct {
	model  string
	prices prices
}

// prices are the user's, by model name.
type prices map[string]price

// validate refuses a price that is negative or not a number.
func (ps prices) validate() error {
	for name, p := range ps {
		for _, v := range []float64{p.Input, p.Output, derefOr(p.CachedInput, 0)} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: a price is a number of your currency per million tokens, 0 or more", name)
			}
		}
	}
	return nil
}

func derefOr(p *float64, or float64) float64 {
	if p == nil {
		return or
	}
	return *p
}

// of returns the price of model, a name or a session's description of it
// ("openai gpt-4.1": its last word is the name).
func (ps prices) of(model string) (price, bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	if i := strings.LastIndexByte(model, ' '); i >= 0 {
		p, ok := ps[model[i+1:]]
		return p, ok
	}
	return price{}, false
}

// cost is what u cost at model's price; false if the user gave none.
func (ps prices) cost(model string, u task.Usage) (float64, bool) {
	p, ok := ps.of(model)
	if !ok {
		return 0, false
	}
	cached := derefOr(p.CachedInput, p.Input)
	c := float64(u.InputTokens-u.CachedInputTokens)*p.Input + float64(u.CachedInputTokens)*cached + float64(u.OutputTokens)*p.Output
	return c / 1e6, true
}

// usageText says what u spent: "12.5k tokens in (10k cached), 800 out,
// 4 model calls", with its cost at model's price if the user gave one;
// "" for nothing spent.
func usageText(u task.Usage, model string, ps prices) string {
	if u.IsZero() {
		return ""
	}
	s := agent.FormatTokens(u.InputTokens) + " tokens in"
	if u.CachedInputTokens > 0 {
		s += " (" + agent.FormatTokens(u.CachedInputTokens) + " cached)"
	}
	s += ", " + agent.FormatTokens(u.OutputTokens) + " out, " + plural(u.ModelCalls, "model call")
	if c, ok := ps.cost(model, u); ok {
		s += ", cost " + money(c)
	}
	return s
}

// money writes a cost with enough digits to tell small ones apart.
func money(c float64) string {
	if c < 0.01 {
		return fmt.Sprintf("%.4f", c)
	}
	return fmt.Sprintf("%.2f", c)
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// sessionUsageLine is the end-of-session line: what the session spent,
// and of it what its autonomous turns did; "" if it made no call.
func sessionUsageLine(u agent.Usage, model string, ps prices) string {
	if u.Total.IsZero() {
		return ""
	}
	line := "offstage: this session spent " + usageText(u.Total, model, ps)
	if !u.Autonomous.IsZero() {
		line += "; its autonomous turns " + usageText(u.Autonomous, model, ps)
	}
	return line + "."
}

// userPrices reads the price table of the user's config file, for the
// commands that read the journal and have no session flags (tasks); none
// if it cannot be read. Run, mcp and acp take theirs from their policy.
func userPrices() prices {
	cfg, err := loadUserConfig(userConfigPath(nil))
	if err != nil {
		return nil
	}
	return cfg.prices
}
