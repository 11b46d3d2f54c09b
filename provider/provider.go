// Package provider is the interface between the agent runtime and a
// language model: one request (system prompt, messages, tool definitions,
// options) in, one streamed response (text and thinking deltas, tool
// calls, stop reason, usage) out.
//
// Implementations: provider/openai (Chat Completions, any OpenAI-compatible
// endpoint), provider/anthropic (Messages API) and provider/scripted (a
// replayed script, for the demo and tests).
//
// # Concurrency properties
//
// A Model is safe for concurrent use: the runtime runs sub-agents in
// parallel on one Model. Generate calls onEvent on the calling goroutine,
// in stream order, and returns after the last call; it honours ctx at any
// point of the stream, returning context.Cause(ctx) promptly.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Role is who wrote a message.
type Role string

const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// BlockType is the kind of one content block.
type BlockType string

const (
	Text       BlockType = "text"
	Thinking   BlockType = "thinking"
	ToolUse    BlockType = "tool_use"
	ToolResult BlockType = "tool_result"
)

// Block is one piece of a message.
//
// Blocks and messages marshal to JSON as a journal records them.
type Block struct {
	Type BlockType `json:"type"`
	// Text is the text of a text, thinking or tool_result block.
	Text string `json:"text,omitempty"`
	// Signature is the provider's signature of a thinking block, which
	// some providers require to be sent back unchanged.
	Signature string `json:"signature,omitempty"`
	// ToolCallID links a tool_use block and its tool_result.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolName and Input describe a tool_use block.
	ToolName string          `json:"tool_name,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	// IsError marks a tool_result the tool reported as an error.
	IsError bool `json:"is_error,omitempty"`
}

// Message is one turn of the conversation.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// ToolCalls returns the tool_use blocks of m.
func (m Message) ToolCalls() []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == ToolUse {
			out = append(out, b)
		}
	}
	return out
}

// TextOf returns the concatenated text blocks of m.
func (m Message) TextOf() string {
	var s string
	for _, b := range m.Content {
		if b.Type == Text {
			s += b.Text
		}
	}
	return s
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage // a JSON Schema object
}

// Request is one model call.
type Request struct {
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: the provider's default
	// Agent names who is asking (a profile name, "" for the top level).
	// Real providers ignore it; the scripted model picks a script by it.
	Agent string
}

// EventType is the kind of a streamed event.
type EventType string

const (
	TextDelta     EventType = "text_delta"
	ThinkingDelta EventType = "thinking_delta"
	ToolCall      EventType = "tool_call" // a complete tool call
)

// Event is one streamed piece of a response.
type Event struct {
	Type EventType
	Text string // the delta, for text and thinking
	Call Block  // the tool_use block, for ToolCall
}

// StopReason says why the model stopped.
type StopReason string

const (
	EndTurn   StopReason = "end_turn"
	ToolCalls StopReason = "tool_use"
	MaxTokens StopReason = "max_tokens"
	Refusal   StopReason = "refusal"
)

// Usage counts the tokens of one model call, where the provider reports
// them. InputTokens are all the request's tokens, CachedInputTokens
// included (the part the provider read from its prompt cache, billed
// cheaper): OpenAI's prompt_tokens with prompt_tokens_details.cached_tokens,
// Anthropic's input_tokens plus its cache reads and writes, with the reads.
type Usage struct {
	InputTokens       int
	OutputTokens      int
	CachedInputTokens int
}

// Response is a complete model response.
type Response struct {
	Message    Message // role Assistant
	StopReason StopReason
	Usage      Usage
}

// Model is a language model.
type Model interface {
	// Generate sends req and streams the response to onEvent (which may be
	// nil), then returns the whole response. Errors wrap the sentinels
	// below where they apply.
	Generate(ctx context.Context, req Request, onEvent func(Event)) (Response, error)
}

// Errors a Model returns, wrapped with details.
var (
	// ErrAuth: the key is missing or refused (401, 403).
	ErrAuth = errors.New("authentication failed")
	// ErrRateLimited: 429 after the retries.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnavailable: 5xx or a refused connection after the retries.
	ErrUnavailable = errors.New("model endpoint unavailable")
	// ErrContextTooLong: the request does not fit the model's context.
	ErrContextTooLong = errors.New("conversation too long for the model's context")
	// ErrBadStream: the response stream was malformed or cut off.
	ErrBadStream = errors.New("malformed response stream")
	// ErrScript: a scripted model ran out of turns or saw what it did not
	// expect.
	ErrScript = errors.New("script mismatch")
	// ErrUnknownModel: the endpoint has no model of the name asked for (a
	// 404 or 400 saying so); see openai.Model.Models for the ones it has.
	ErrUnknownModel = errors.New("the endpoint has no such model")
)

// Retries normalises a MaxRetries setting: 0 means the default, 3;
// negative means none.
func Retries(n int) int {
	switch {
	case n == 0:
		return 3
	case n < 0:
		return 0
	}
	return n
}

// StatusError is an HTTP error from a provider, after retries: the
// endpoint was reached and answered with an error status, which a 5xx
// makes the server's own failure, not a connection's.
type StatusError struct {
	Status  int
	Message string
	// Body is the start of what the endpoint answered (ClipBody), when it
	// says more than Message.
	Body string
	// Hint, if set, is what the caller most likely got wrong, such as a
	// base URL without its /v1.
	Hint string
	Err  error // one of the sentinels above, or nil
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("model endpoint answered HTTP %d: %s", e.Status, e.Message)
	if e.Body != "" && e.Body != e.Message {
		s += " (" + e.Body + ")"
	}
	if e.Status >= 500 {
		s += "; an error of its server, which was reached: not a connection failure"
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// StreamError is an error the endpoint reported inside a response stream
// it had started with a success status (an "error" event): the endpoint
// was reached and spoke the protocol, so the stream is not malformed.
type StreamError struct {
	Message string
	// Body is the start of the event (ClipBody), when it says more than
	// Message.
	Body string
	Err  error // one of the sentinels above, or nil
}

func (e *StreamError) Error() string {
	s := "model endpoint reported an error in its stream: " + e.Message
	if e.Body != "" && e.Body != e.Message {
		s += " (" + e.Body + ")"
	}
	return s
}

func (e *StreamError) Unwrap() error { return e.Err }

// ErrorMessage finds the message in an error body of any shape: the
// OpenAI-style {"error": {"message": …}}, {"error": "…"} (Express,
// LM Studio, mock servers), {"message": …} or {"detail": …} at the top
// (vLLM, FastAPI), or the text of a body that is not JSON (an HTML page's
// title). It returns "" when the body says nothing readable.
func ErrorMessage(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return plainText(string(body))
	}
	return messageIn(v, 0)
}

// messageIn is ErrorMessage's search of a decoded JSON value, at most a
// few levels deep.
func messageIn(v any, depth int) string {
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v)
	case map[string]any:
		if depth > 3 {
			return ""
		}
		for _, k := range []string{"error", "message", "detail", "msg", "error_description", "title"} {
			if m := messageIn(v[k], depth+1); m != "" {
				return m
			}
		}
	case []any:
		if len(v) > 0 && depth <= 3 {
			return messageIn(v[0], depth+1)
		}
	}
	return ""
}

// plainText is the readable part of a body that is not JSON: an HTML
// page's title, or the body itself when it has no tags.
func plainText(body string) string {
	lower := strings.ToLower(body)
	if i := strings.Index(lower, "<title>"); i >= 0 {
		if j := strings.Index(lower[i:], "</title>"); j > 0 {
			return strings.TrimSpace(body[i+len("<title>") : i+j])
		}
	}
	if strings.Contains(body, "<") {
		return ""
	}
	return ClipBody(body)
}

// maxBody bounds the part of an error's body a StatusError keeps.
const maxBody = 300

// ClipBody returns the start of an error response's body for a
// StatusError: whitespace folded, at most 300 bytes (cut at a rune), with
// "…" when cut.
func ClipBody(body string) string {
	s := strings.Join(strings.Fields(body), " ")
	if len(s) <= maxBody {
		return s
	}
	cut := maxBody
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func (e *StatusError) Unwrap() error { return e.Err }

// Classify maps an HTTP status to a sentinel error, or nil.
func Classify(status int, body string) error {
	switch {
	case status == 401 || status == 403:
		return ErrAuth
	case status == 429:
		return ErrRateLimited
	case status >= 500:
		return ErrUnavailable
	case status == 400 || status == 413:
		if containsAny(body, "context_length", "context length", "too long", "maximum context", "prompt is too long") {
			return ErrContextTooLong
		}
	}
	if (status == 404 || status == 400) && unknownModel(body) {
		return ErrUnknownModel
	}
	return nil
}

// unknownModel reports whether an error body says the model asked for
// does not exist: OpenAI's model_not_found, Ollama's `model "x" not
// found`, vLLM's "The model `x` does not exist".
func unknownModel(body string) bool {
	b := strings.ToLower(body)
	return strings.Contains(b, "model_not_found") ||
		strings.Contains(b, "model") && containsAny(b, "not found", "does not exist", "not exist", "no such model", "unknown model")
}

// ClassifyStream maps an error event inside a stream to a sentinel error,
// or nil, from the codes and words servers put there: a numeric status
// ("code": 401), a type or code ("invalid_api_key", "rate_limit_exceeded")
// or the message.
func ClassifyStream(event string) error {
	var v struct {
		Error struct {
			Code   any    `json:"code"`
			Status any    `json:"status"`
			Type   string `json:"type"`
		} `json:"error"`
		Code any `json:"code"`
	}
	json.Unmarshal([]byte(event), &v)
	for _, c := range []any{v.Error.Code, v.Error.Status, v.Code} {
		if n, ok := c.(float64); ok && n >= 400 && n < 600 {
			if err := Classify(int(n), event); err != nil {
				return err
			}
		}
	}
	b := strings.ToLower(event)
	switch {
	case containsAny(b, "invalid_api_key", "invalid api key", "incorrect api key", "authentication", "unauthorized", "no auth credentials"):
		return ErrAuth
	case containsAny(b, "rate_limit", "rate limit", "too many requests"):
		return ErrRateLimited
	case containsAny(b, "context_length", "context length", "maximum context", "prompt is too long"):
		return ErrContextTooLong
	case containsAny(b, "overloaded", "server_error", "internal error", "unavailable"):
		return ErrUnavailable
	}
	return nil
}
func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
