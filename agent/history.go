package agent

import (
	"slices"
	"strconv"
	"sync"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/task"
)

// history is one agent's conversation. It is safe for concurrent use: the
// agent appends while Peek (through task.History) snapshots.
//
// The guard: when the texts in the history add up to more than budget
// bytes, the oldest tool results and background results are cut to a short
// note, then, if that is not enough, the oldest other texts, never the last
// two messages. This keeps a long session from exhausting memory or the
// model's context; it is not summarisation.
type history struct {
	budget   int
	onAppend func(provider.Message) // set once before use: the top level's Config.OnMessage

	mu    sync.Mutex
	msgs  []provider.Message // guarded by mu
	bytes int                // guarded by mu: the text bytes in msgs
	// A view (see view) aliases msgs and the Content of its messages:
	// they are copied before anything in them changes (appending a
	// message changes nothing a view sees). shared says a view aliases
	// msgs itself; views counts the views taken, and made[i] is views
	// when msgs[i].Content was made, so a view may alias it if
	// made[i] < views. Guarded by mu.
	shared bool
	views  uint64
	made   []uint64
}

// ownLocked makes msgs the history's own again before one of its
// messages changes, if a view aliases it: a copy of the message headers,
// not of their blocks.
func (h *history) ownLocked() {
	if h.shared {
		h.msgs = slices.Clone(h.msgs)
		h.shared = false
	}
}

func newHistory(budget int) *history { return &history{budget: budget} }

// append adds a message, merging it into the last one if both have the
// same role: providers want the roles to alternate.
func (h *history) append(m provider.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.onAppend != nil {
		h.onAppend(m) // under the lock: recorded in the order appended
	}
	for _, b := range m.Content {
		h.bytes += blockBytes(b)
	}
	if n := len(h.msgs); n > 0 && h.msgs[n-1].Role == m.Role {
		h.ownLocked()
		last := &h.msgs[n-1]
		last.Content = append(slices.Clip(last.Content), m.Content...) // a new array: a view keeps the old
		h.made[n-1] = h.views
	} else {
		h.msgs = append(h.msgs, provider.Message{Role: m.Role, Content: slices.Clone(m.Content)})
		h.made = append(h.made, h.views)
	}
	h.guardLocked()
}

// view returns the conversation as it is now, for the model: it shares
// the history's arrays (later appends and changes do not show in it, see
// shared), so the caller must not change it. Copying the whole
// conversation for each model call made a prompt's cost grow with the
// conversation's length (issue 35).
func (h *history) view() []provider.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shared = true
	h.views++
	return h.msgs[:len(h.msgs):len(h.msgs)]
}

// messages returns a copy of the conversation, the caller's to change.
func (h *history) messages() []provider.Message {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]provider.Message, len(h.msgs))
	for i, m := range h.msgs {
		out[i] = provider.Message{Role: m.Role, Content: slices.Clone(m.Content)}
	}
	return out
}

// Snapshot implements task.History: the blocks an agent has fed its model.
func (h *history) Snapshot() []task.Block {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []task.Block
	for _, m := range h.msgs {
		for _, b := range m.Content {
			out = append(out, peekBlock(m.Role, b))
		}
	}
	return out
}

func peekBlock(role provider.Role, b provider.Block) task.Block {
	switch b.Type {
	case provider.Thinking:
		return task.Block{Kind: task.BlockThinking, Text: b.Text}
	case provider.ToolUse:
		return task.Block{Kind: task.BlockToolCall, Tool: b.ToolName}
	case provider.ToolResult:
		return task.Block{Kind: task.BlockToolResult, Tool: b.ToolName, Text: b.Text}
	case provider.Text:
		if role == provider.Assistant {
			return task.Block{Kind: task.BlockText, Text: b.Text}
		}
		return task.Block{Kind: task.BlockUser, Text: b.Text}
	}
	return task.Block{Kind: task.BlockOther, Text: b.Text}
}

func blockBytes(b provider.Block) int { return len(b.Text) + len(b.Input) }

// cutNote replaces a text cut by the guard.
func cutNote(n int) string {
	return "[cut to keep the conversation within its budget: " + strconv.Itoa(n) + " bytes]"
}

func (h *history) guardLocked() {
	if h.budget <= 0 || h.bytes <= h.budget {
		return
	}
	h.ownLocked()
	keep := len(h.msgs) - 2 // the last two messages stay whole
	for pass := 0; pass < 2 && h.bytes > h.budget; pass++ {
		for i := 0; i < keep && h.bytes > h.budget; i++ {
			for j := range h.msgs[i].Content {
				b := &h.msgs[i].Content[j]
				cuttable := b.Type == provider.ToolResult || isBackground(b)
				if pass == 1 {
					cuttable = b.Type == provider.Text || b.Type == provider.Thinking || b.Type == provider.ToolResult
				}
				if !cuttable || len(b.Text) <= 200 {
					continue
				}
				if h.made[i] < h.views { // a view may hold this message's blocks
					h.msgs[i].Content = slices.Clone(h.msgs[i].Content)
					h.made[i] = h.views
					b = &h.msgs[i].Content[j]
				}
				note := cutNote(len(b.Text))
				h.bytes += len(note) - len(b.Text)
				b.Text = note
				if h.bytes <= h.budget {
					return
				}
			}
		}
	}
}
