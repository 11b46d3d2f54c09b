package acpserver

import (
	acp "github.com/coder/acp-go-sdk"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
)

// UsageMeta is the key of the _meta of a prompt's response that says
// what the session spent: {"turn", "session", "autonomous"}, each
// {input_tokens, output_tokens, cached_input_tokens, model_calls}. turn
// is the turn's top-level model calls (its sub-agents count in their
// tasks and in session); session is every call of the session, with what
// it spent before a restart; autonomous the calls of the turns that
// background results started. The response's usage (ACP's, unstable)
// carries the turn's tokens.
const UsageMeta = "offstage/usage"

// withUsage adds the turn's and the session's usage to a prompt's
// response.
func withUsage(r acp.PromptResponse, turn *task.Usage, session agent.Usage) acp.PromptResponse {
	u, meta := promptUsage(turn, session)
	r.Usage = &u
	if r.Meta == nil {
		r.Meta = map[string]any{}
	}
	r.Meta[UsageMeta] = meta
	return r
}

// promptUsage is what a prompt's response says was spent: its usage, and
// its _meta's UsageMeta.
func promptUsage(turn *task.Usage, session agent.Usage) (acp.Usage, usageMeta) {
	var t task.Usage
	if turn != nil {
		t = *turn
	}
	cached := int(t.CachedInputTokens)
	u := acp.Usage{InputTokens: int(t.InputTokens), OutputTokens: int(t.OutputTokens), TotalTokens: int(t.Tokens()), CachedReadTokens: &cached}
	return u, usageMeta{Turn: t, Session: session.Total, Autonomous: session.Autonomous}
}

// usageMeta is UsageMeta's value: a struct rather than a map, encoded in
// one pass, its keys in the order a map's are (sorted).
type usageMeta struct {
	Autonomous task.Usage `json:"autonomous"`
	Session    task.Usage `json:"session"`
	Turn       task.Usage `json:"turn"`
}
