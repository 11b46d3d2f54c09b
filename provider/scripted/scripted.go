// Package scripted is a provider.Model that replays a script of model
// turns. It drives offstage's demo and tests: no key, no network, and the
// same answers every time.
//
// # File format
//
// A script is a JSON object. "turns" are the top level's turns, in order;
// "agents" maps a sub-agent profile name to that profile's turns.
//
//	{
//	  "turns": [
//	    {"text": "Starting the tests in the background.",
//	     "tool_calls": [{"name": "bash", "input": {"command": "make test", "run_in_background": true}}]},
//	    {"expect": "shell:1", "text": "They are running; meanwhile…"}
//	  ],
//	  "agents": {
//	    "general": [
//	      {"thinking": "Look at the tree first.", "tool_calls": [{"name": "bash", "input": {"command": "ls"}}]},
//	      {"text": "The repository has a README and a Makefile."}
//	    ]
//	  }
//	}
//
// A turn has:
//   - "text": what the model says (streamed word by word);
//   - "thinking": its reasoning, streamed before the text;
//   - "tool_calls": tools it calls, each {"name", "input"} (input is a JSON
//     object; an "id" is made up if absent);
//   - "expect": a regular expression (Go syntax) the last message it
//     receives must match (user text, tool results and background results
//     all count); a mismatch fails the call with provider.ErrScript, which
//     keeps a script and the runtime honest with each other;
//   - "delay_ms": how long to "think" before answering (the context can
//     cancel it), and "stream_delay_ms": a pause between streamed words;
//   - "stop": why a turn without tool calls ended, as a provider reports
//     it: "end_turn" (the default), "refusal" or "max_tokens";
//   - "usage": the tokens the call reports, {"input_tokens",
//     "output_tokens", "cached_input_tokens"}; none if absent.
//
// Which turn plays is the number of assistant messages already in the
// request: the first call plays turn 0, the call after one answer turn 1,
// and so on. So replay needs no state, and several sub-agents with the
// same profile each replay the profile's turns from the start. A call past
// the last turn fails with provider.ErrScript.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/offstage/offstage/provider"
)

// Turn is one scripted model turn.
type Turn struct {
	Expect        string     `json:"expect,omitempty"`
	Thinking      string     `json:"thinking,omitempty"`
	Text          string     `json:"text,omitempty"`
	ToolCalls     []ToolCall `json:"tool_calls,omitempty"`
	DelayMS       int        `json:"delay_ms,omitempty"`
	StreamDelayMS int        `json:"stream_delay_ms,omitempty"`
	Stop          string     `json:"stop,omitempty"`
	Usage         *Usage     `json:"usage,omitempty"`

	expect *regexp.Regexp
}

// Usage is the tokens a scripted turn reports (provider.Usage).
type Usage struct {
	InputTokens       int `json:"input_tokens,omitempty"`
	OutputTokens      int `json:"output_tokens,omitempty"`
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
}

// ToolCall is one scripted tool call.
type ToolCall struct {
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Script is a parsed script.
type Script struct {
	Turns  []Turn            `json:"turns"`
	Agents map[string][]Turn `json:"agents,omitempty"`
}

// Model replays a Script. It is safe for concurrent use.
type Model struct {
	script Script
}

// Load reads and parses a script file.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Parse parses a script, rejecting unknown fields, tool calls without a
// name or with an input that is not an object, and bad expressions. A
// script that is not valid JSON, or whose JSON does not fit the format,
// is refused with the line and column where it goes wrong.
func Parse(data []byte) (*Model, error) {
	var s Script
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, decodeError(data, err)
	}
	if after := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(after) > 0 {
		line, col := position(data, int64(len(data)-len(after)+1))
		return nil, fmt.Errorf("scripted: line %d, column %d: more after the script's closing }", line, col)
	}
	check := func(agent string, turns []Turn) error {
		who := "the top level"
		if agent != "" {
			who = fmt.Sprintf("agent %q", agent)
		}
		for i := range turns {
			t := &turns[i]
			where := fmt.Sprintf("scripted: turn %d of %s", i+1, who)
			if t.Expect != "" {
				re, err := regexp.Compile(t.Expect)
				if err != nil {
					return fmt.Errorf("%s: bad expect: %w", where, err)
				}
				t.expect = re
			}
			for j, c := range t.ToolCalls {
				if c.Name == "" {
					return fmt.Errorf("%s: tool call %d has no name", where, j)
				}
				in := bytes.TrimSpace(c.Input)
				if len(in) == 0 {
					t.ToolCalls[j].Input = json.RawMessage("{}")
				} else if in[0] != '{' {
					return fmt.Errorf("%s: tool call %d (%s): input must be a JSON object", where, j, c.Name)
				}
			}
			if t.DelayMS < 0 || t.StreamDelayMS < 0 {
				return fmt.Errorf("%s: delays must not be negative", where)
			}
			switch provider.StopReason(t.Stop) {
			case "", provider.EndTurn, provider.Refusal, provider.MaxTokens:
			default:
				return fmt.Errorf("%s: stop %q is not end_turn, refusal or max_tokens", where, t.Stop)
			}
			if t.Stop != "" && len(t.ToolCalls) > 0 {
				return fmt.Errorf("%s: a turn with tool calls stops for them; drop stop", where)
			}
		}
		return nil
	}
	if err := check("", s.Turns); err != nil {
		return nil, err
	}
	for name, turns := range s.Agents {
		if err := check(name, turns); err != nil {
			return nil, err
		}
	}
	return &Model{script: s}, nil
}

// decodeError says where in data, and why, decoding a script failed.
func decodeError(data []byte, err error) error {
	var (
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		off int64 = -1 // bytes read up to the mistake
		msg       = strings.TrimPrefix(err.Error(), "json: ")
	)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		msg = fmt.Sprintf("%q is a JSON %s, where %s is wanted", te.Field, te.Value, jsonKind(te.Type))
	case errors.Is(err, io.EOF):
		return errors.New("scripted: the script is empty: it is a JSON object, {\"turns\": […]}")
	case errors.Is(err, io.ErrUnexpectedEOF):
		off, msg = int64(len(data)), "the script ends before its JSON does (a missing ] or })"
	default:
		// An unknown field: the decoder does not say where, so look
		// for the key.
		if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
			re := regexp.MustCompile(regexp.QuoteMeta(name) + `\s*:`)
			if loc := re.FindIndex(data); loc != nil {
				off = int64(loc[0]) + 1
			}
			msg = "unknown field " + name + " (offstage run --help lists a turn's fields)"
		}
	}
	if off < 0 {
		return fmt.Errorf("scripted: not a valid script: %s", msg)
	}
	line, col := position(data, off)
	return fmt.Errorf("scripted: line %d, column %d: %s", line, col, msg)
}

// position is the line and column (1-based, the column in bytes) of the
// last of the first off bytes of data.
func position(data []byte, off int64) (line, col int) {
	read := data[:min(max(off, 1), int64(len(data)))]
	line = bytes.Count(read, []byte("\n")) + 1
	col = len(read) - bytes.LastIndexByte(read, '\n') - 1
	return line, max(col, 1)
}

// jsonKind names what JSON a Go type takes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array"
	}
	return "an object"
}

// Generate plays the turn for req (see the package documentation).
func (m *Model) Generate(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (provider.Response, error) {
	turns := m.script.Turns
	if req.Agent != "" {
		var ok bool
		if turns, ok = m.script.Agents[req.Agent]; !ok {
			return provider.Response{}, fmt.Errorf("%w: the script has no turns for agent %q", provider.ErrScript, req.Agent)
		}
	}
	n := 0
	for _, msg := range req.Messages {
		if msg.Role == provider.Assistant {
			n++
		}
	}
	who := "the top level"
	if req.Agent != "" {
		who = fmt.Sprintf("agent %q", req.Agent)
	}
	if n >= len(turns) {
		return provider.Response{}, fmt.Errorf("%w: the script for %s has %d turns and turn %d was asked for", provider.ErrScript, who, len(turns), n+1)
	}
	t := turns[n]
	if t.expect != nil {
		last := lastText(req.Messages)
		if !t.expect.MatchString(last) {
			return provider.Response{}, fmt.Errorf("%w: %s turn %d expects %q, but the last message was %q", provider.ErrScript, who, n+1, t.Expect, shorten(last, 300))
		}
	}
	if err := sleep(ctx, time.Duration(t.DelayMS)*time.Millisecond); err != nil {
		return provider.Response{}, err
	}
	emit := func(e provider.Event) {
		if onEvent != nil {
			onEvent(e)
		}
	}
	var msg provider.Message
	msg.Role = provider.Assistant
	stream := func(typ provider.EventType, text string) error {
		for i, word := range strings.SplitAfter(text, " ") {
			if i > 0 {
				if err := sleep(ctx, time.Duration(t.StreamDelayMS)*time.Millisecond); err != nil {
					return err
				}
			}
			emit(provider.Event{Type: typ, Text: word})
		}
		return nil
	}
	if t.Thinking != "" {
		if err := stream(provider.ThinkingDelta, t.Thinking); err != nil {
			return provider.Response{}, err
		}
		msg.Content = append(msg.Content, provider.Block{Type: provider.Thinking, Text: t.Thinking})
	}
	if t.Text != "" {
		if err := stream(provider.TextDelta, t.Text); err != nil {
			return provider.Response{}, err
		}
		msg.Content = append(msg.Content, provider.Block{Type: provider.Text, Text: t.Text})
	}
	for i, c := range t.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d_%d", strings.ReplaceAll(req.Agent, " ", "_"), n, i)
		}
		b := provider.Block{Type: provider.ToolUse, ToolCallID: id, ToolName: c.Name, Input: c.Input}
		msg.Content = append(msg.Content, b)
		emit(provider.Event{Type: provider.ToolCall, Call: b})
	}
	stop := provider.EndTurn
	switch {
	case len(t.ToolCalls) > 0:
		stop = provider.ToolCalls
	case t.Stop != "":
		stop = provider.StopReason(t.Stop)
	}
	res := provider.Response{Message: msg, StopReason: stop}
	if u := t.Usage; u != nil {
		res.Usage = provider.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CachedInputTokens: u.CachedInputTokens}
	}
	return res, nil
}

// lastText is the text of the last message: its text and tool result
// blocks joined.
func lastText(msgs []provider.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	var parts []string
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == provider.Text || b.Type == provider.ToolResult {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
