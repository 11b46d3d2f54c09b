package task

import (
	"strconv"
	"unicode/utf8"
)

// BlockKind is the kind of one block of an agent's history.
type BlockKind uint8

const (
	BlockUser       BlockKind = iota + 1 // text the agent was given (prompt, fed-back results)
	BlockText                            // text the model wrote
	BlockThinking                        // the model's reasoning
	BlockToolCall                        // a tool call; Tool names the tool
	BlockToolResult                      // a tool's result; Tool names the tool
	BlockOther                           // anything else (images, provider activity)
)

var blockNames = [...]string{"", "user", "text", "thinking", "tool_call", "tool_result", "other"}

func (k BlockKind) String() string {
	if int(k) < len(blockNames) && k != 0 {
		return blockNames[k]
	}
	return "unknown"
}

// Block is one block of the history an agent feeds its model: the
// granularity at which Peek shows what a sub-agent is doing.
type Block struct {
	Kind BlockKind
	Tool string // tool name, for tool calls and results
	Text string // free text; Peek cuts it to Options.PeekTextLimit
}

// History is the conversation an agent task feeds its model. The agent
// runtime implements it and attaches it with Handle.AttachHistory.
//
// Snapshot returns the blocks in order, oldest first. It is called without
// any table lock held, from any goroutine, concurrently with the agent
// appending to its history, so it must be safe for that; the table does not
// modify or retain the returned slice beyond the Peek that asked.
type History interface {
	Snapshot() []Block
}

// Output is a task's output a reader can look at, such as a shell's
// captured stdout and stderr. Handle.AttachOutput attaches it; Peek shows
// its tail. Tail returns at most the last n lines as text fit for a model.
// Like History, it is called without table locks, concurrently with writes.
type Output interface {
	Tail(n int) string
}

// Peek is a look at a task in progress (or finished) that consumes nothing.
type Peek struct {
	Info
	// TotalBlocks is how many blocks the task's history holds; Blocks are
	// its last few, text cut. Both zero for tasks without a history.
	TotalBlocks int
	Blocks      []Block
	// Output is the tail of the task's output, for tasks that attached one.
	Output string
}

// recentBlocks returns the last n blocks of all, with free text cut to
// limit characters. Tool names are kept whole: they are the summary.
func recentBlocks(all []Block, n, limit int) []Block {
	if n > len(all) {
		n = len(all)
	}
	out := make([]Block, n)
	for i, b := range all[len(all)-n:] {
		b.Text = cutChars(b.Text, limit)
		out[i] = b
	}
	return out
}

// cutChars keeps the first limit characters (runes) of s and says how many
// more there were: "abc…(+12 more chars)". It never splits a UTF-8 sequence.
// Invalid bytes count as one character each.
func cutChars(s string, limit int) string {
	if limit < 0 {
		limit = 0
	}
	i, kept := 0, 0
	for i < len(s) && kept < limit {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		kept++
	}
	if i == len(s) {
		return s
	}
	more := utf8.RuneCountInString(s[i:])
	return s[:i] + "…(+" + strconv.Itoa(more) + " more chars)"
}

// cutBytes keeps at most limit bytes of s, backing off to a UTF-8 boundary,
// and says how many bytes were left out: "abc…(+12 more bytes)".
func cutBytes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	i := limit
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…(+" + strconv.Itoa(len(s)-i) + " more bytes)"
}
