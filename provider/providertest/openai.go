package providertest

import (
	"encoding/json"
	"net/http"

	"github.com/offstage/offstage/provider"
)

// OpenAI starts a fake Chat Completions endpoint; use its URL (plus
// nothing: the SDK appends /chat/completions) as the base URL.
func OpenAI(model provider.Model, opts Options) *Server {
	return newServer(model, opts, (*Server).openAI)
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type oaRequest struct {
	Model    string      `json:"model"`
	Messages []oaMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// text reads a content that is a string or an array of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	out := ""
	for _, p := range parts {
		out += p.Text
	}
	return out
}

func (s *Server) openAI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/chat/completions" {
		http.Error(w, `{"error": {"message": "not found: `+r.URL.Path+`"}}`, http.StatusNotFound)
		return
	}
	var body map[string]any
	var in oaRequest
	raw := json.NewDecoder(r.Body)
	var rawBody json.RawMessage
	if err := raw.Decode(&rawBody); err != nil || json.Unmarshal(rawBody, &in) != nil || json.Unmarshal(rawBody, &body) != nil {
		http.Error(w, `{"error": {"message": "bad request body"}}`, http.StatusBadRequest)
		return
	}
	s.record(body)
	if !in.Stream {
		http.Error(w, `{"error": {"message": "this fake only streams"}}`, http.StatusBadRequest)
		return
	}
	req := provider.Request{}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, provider.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	add := func(role provider.Role, b provider.Block) {
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, b)
			return
		}
		req.Messages = append(req.Messages, provider.Message{Role: role, Content: []provider.Block{b}})
	}
	for _, m := range in.Messages {
		switch m.Role {
		case "system", "developer":
			req.System = text(m.Content)
		case "user":
			add(provider.User, provider.Block{Type: provider.Text, Text: text(m.Content)})
		case "tool":
			add(provider.User, provider.Block{Type: provider.ToolResult, ToolCallID: m.ToolCallID, Text: text(m.Content)})
		case "assistant":
			req.Messages = append(req.Messages, provider.Message{Role: provider.Assistant})
			if t := text(m.Content); t != "" {
				add(provider.Assistant, provider.Block{Type: provider.Text, Text: t})
			}
			for _, c := range m.ToolCalls {
				add(provider.Assistant, provider.Block{Type: provider.ToolUse, ToolCallID: c.ID, ToolName: c.Function.Name, Input: json.RawMessage(c.Function.Arguments)})
			}
		}
	}
	req.Agent = agentOf(req.System)
	res, ok := s.answer(w, r, req)
	if !ok {
		return
	}
	out := newSSE(w, r, s.opts)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": in.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	if !out.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	finish := "stop"
	calls := 0
	for _, b := range res.Message.Content {
		switch b.Type {
		case provider.Thinking:
			for _, w := range words(b.Text) {
				if !out.send("", chunk(map[string]any{"reasoning_content": w}, nil)) {
					return
				}
			}
		case provider.Text:
			for _, w := range words(b.Text) {
				if !out.send("", chunk(map[string]any{"content": w}, nil)) {
					return
				}
			}
		case provider.ToolUse:
			finish = "tool_calls"
			head := map[string]any{"index": calls, "id": b.ToolCallID, "type": "function", "function": map[string]any{"name": b.ToolName, "arguments": ""}}
			if !out.send("", chunk(map[string]any{"tool_calls": []any{head}}, nil)) {
				return
			}
			for _, part := range split(string(b.Input), 3) {
				delta := map[string]any{"index": calls, "function": map[string]any{"arguments": part}}
				if !out.send("", chunk(map[string]any{"tool_calls": []any{delta}}, nil)) {
					return
				}
			}
			calls++
		}
	}
	out.send("", chunk(map[string]any{}, finish))
	out.send("", map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": in.Model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "prompt_tokens_details": map[string]any{"cached_tokens": 3}}})
	out.send("", "[DONE]")
}
