package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/offstage/offstage/provider"
)

// Anthropic starts a fake Messages endpoint; use its URL as the base URL.
func Anthropic(model provider.Model, opts Options) *Server {
	return newServer(model, opts, (*Server).anthropic)
}

type anBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type anRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

func blocks(raw json.RawMessage) []anBlock {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []anBlock{{Type: "text", Text: s}}
	}
	var out []anBlock
	json.Unmarshal(raw, &out)
	return out
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type": "error", "error": {"type": "not_found_error", "message": "not found: `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	var rawBody json.RawMessage
	var in anRequest
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&rawBody); err != nil || json.Unmarshal(rawBody, &in) != nil || json.Unmarshal(rawBody, &body) != nil {
		http.Error(w, `{"type": "error", "error": {"type": "invalid_request_error", "message": "bad request body"}}`, http.StatusBadRequest)
		return
	}
	s.record(body)
	if !in.Stream || in.MaxTokens <= 0 {
		http.Error(w, `{"type": "error", "error": {"type": "invalid_request_error", "message": "this fake only streams, and max_tokens is required"}}`, http.StatusBadRequest)
		return
	}
	req := provider.Request{}
	for _, b := range blocks(in.System) {
		req.System += b.Text
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, provider.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	for i, m := range in.Messages {
		role := provider.Role(m.Role)
		if i > 0 && in.Messages[i-1].Role == m.Role {
			http.Error(w, `{"type": "error", "error": {"type": "invalid_request_error", "message": "roles must alternate"}}`, http.StatusBadRequest)
			return
		}
		msg := provider.Message{Role: role}
		for _, b := range blocks(m.Content) {
			switch b.Type {
			case "text":
				msg.Content = append(msg.Content, provider.Block{Type: provider.Text, Text: b.Text})
			case "thinking":
				msg.Content = append(msg.Content, provider.Block{Type: provider.Thinking, Text: b.Thinking, Signature: b.Signature})
			case "tool_use":
				msg.Content = append(msg.Content, provider.Block{Type: provider.ToolUse, ToolCallID: b.ID, ToolName: b.Name, Input: b.Input})
			case "tool_result":
				var t string
				for _, c := range blocks(b.Content) {
					t += c.Text
				}
				msg.Content = append(msg.Content, provider.Block{Type: provider.ToolResult, ToolCallID: b.ToolUseID, Text: t, IsError: b.IsError})
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	req.Agent = agentOf(req.System)
	res, ok := s.answer(w, r, req)
	if !ok {
		return
	}
	out := newSSE(w, r, s.opts)
	if !out.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "content": []any{}, "model": in.Model,
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 8, "cache_read_input_tokens": 3, "output_tokens": 1},
	}}) {
		return
	}
	stop := "end_turn"
	for i, b := range res.Message.Content {
		var start map[string]any
		var deltas []map[string]any
		switch b.Type {
		case provider.Thinking:
			start = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
			for _, w := range words(b.Text) {
				deltas = append(deltas, map[string]any{"type": "thinking_delta", "thinking": w})
			}
			deltas = append(deltas, map[string]any{"type": "signature_delta", "signature": fmt.Sprintf("sig-%d", i)})
		case provider.Text:
			start = map[string]any{"type": "text", "text": ""}
			for _, w := range words(b.Text) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": w})
			}
		case provider.ToolUse:
			stop = "tool_use"
			start = map[string]any{"type": "tool_use", "id": b.ToolCallID, "name": b.ToolName, "input": map[string]any{}}
			for _, part := range split(string(b.Input), 3) {
				deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
			}
		default:
			continue
		}
		if !out.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start}) {
			return
		}
		for _, d := range deltas {
			if !out.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
				return
			}
		}
		out.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	out.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 7}})
	out.send("message_stop", map[string]any{"type": "message_stop"})
}
