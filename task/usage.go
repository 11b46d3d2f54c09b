package task

// Usage is what a task spent calling a language model: tokens and model
// calls. A task's Usage includes the tasks it started (a sub-agent's, its
// own sub-agents'), so it is what running the task cost in all.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"` // cached ones included
	OutputTokens      int64 `json:"output_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	ModelCalls        int64 `json:"model_calls"`
}

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:       u.InputTokens + v.InputTokens,
		OutputTokens:      u.OutputTokens + v.OutputTokens,
		CachedInputTokens: u.CachedInputTokens + v.CachedInputTokens,
		ModelCalls:        u.ModelCalls + v.ModelCalls,
	}
}

// Tokens returns the input and output tokens together.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// IsZero reports whether nothing was spent.
func (u Usage) IsZero() bool { return u == Usage{} }

// AddUsage adds u (one model call's, say) to the task and to every
// unfinished task above it, its owner and its owner's owner, so that each
// shows what it cost with what it started. It returns the task's new
// total, for a budget to look at. It emits no event of its own: the
// change shows in Info and in the next event's Change (Progress, or the
// task's end). After the task finished it adds nothing and returns the
// final total.
func (h *Handle) AddUsage(u Usage) Usage {
	h.tb.mu.Lock()
	defer h.tb.mu.Unlock()
	t := h.t
	if t.state.Finished() {
		return t.usage
	}
	for p := t; p != nil && !p.state.Finished(); p = h.tb.lookupID(p.owner.id) {
		p.usage = p.usage.Add(u)
		if p.owner.id == "" {
			break
		}
	}
	return t.usage
}

// Usage returns the task's usage so far (see AddUsage).
func (h *Handle) Usage() Usage {
	h.tb.mu.Lock()
	defer h.tb.mu.Unlock()
	return h.t.usage
}
