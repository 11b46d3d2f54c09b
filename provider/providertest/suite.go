package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
)

// Endpoint starts a fake server of one wire format.
type Endpoint func(model provider.Model, opts Options) *Server

// Connect makes the provider under test talk to baseURL with key, retrying
// at most retries times.
type Connect func(t *testing.T, baseURL, key string, retries int) provider.Model

const suiteScript = `{"turns": [
  {"thinking": "The user wants a listing.", "text": "Let me look.",
   "tool_calls": [{"id": "call_1", "name": "bash", "input": {"command": "ls -la", "nested": {"list": [1, 2, "three"]}}}]},
  {"expect": "README", "text": "There is a README."}
]}`

// Suite checks a provider against a fake endpoint of its wire format.
func Suite(t *testing.T, endpoint Endpoint, connect Connect) {
	script, err := scripted.Parse([]byte(suiteScript))
	if err != nil {
		t.Fatal(err)
	}
	tools := []provider.Tool{{Name: "bash", Description: "run a command", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}
	first := provider.Request{System: "be brief", Tools: tools, Messages: []provider.Message{
		{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "what is here?"}}},
	}}

	t.Run("stream and tool round trip", func(t *testing.T) {
		srv := endpoint(script, Options{Key: "k"})
		defer srv.Close()
		m := connect(t, srv.URL, "k", 0)
		var text, thinking string
		var calls int
		res, err := m.Generate(t.Context(), first, func(e provider.Event) {
			switch e.Type {
			case provider.TextDelta:
				text += e.Text
			case provider.ThinkingDelta:
				thinking += e.Text
			case provider.ToolCall:
				calls++
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if text != "Let me look." || calls != 1 {
			t.Errorf("streamed text %q, %d tool calls", text, calls)
		}
		if thinking != "" && thinking != "The user wants a listing." {
			t.Errorf("streamed thinking %q", thinking)
		}
		if res.StopReason != provider.ToolCalls || res.Message.TextOf() != "Let me look." {
			t.Errorf("response = %+v", res)
		}
		call := res.Message.ToolCalls()
		if len(call) != 1 || call[0].ToolName != "bash" || call[0].ToolCallID != "call_1" {
			t.Fatalf("tool calls = %+v", call)
		}
		var input map[string]any
		if err := json.Unmarshal(call[0].Input, &input); err != nil || input["command"] != "ls -la" {
			t.Errorf("tool input %s (split across chunks) = %v, %v", call[0].Input, input, err)
		}
		// The fakes report 11 input tokens, 3 of them read from the cache,
		// and 7 output tokens, each in its provider's own terms.
		if want := (provider.Usage{InputTokens: 11, OutputTokens: 7, CachedInputTokens: 3}); res.Usage != want {
			t.Errorf("usage = %+v, want %+v", res.Usage, want)
		}
		second := first
		second.Messages = append(second.Messages, res.Message, provider.Message{Role: provider.User, Content: []provider.Block{
			{Type: provider.ToolResult, ToolCallID: "call_1", ToolName: "bash", Text: "README\nMakefile"},
			{Type: provider.Text, Text: "[offstage] A background task finished."},
		}})
		res, err = m.Generate(t.Context(), second, nil)
		if err != nil || res.Message.TextOf() != "There is a README." || res.StopReason != provider.EndTurn {
			t.Errorf("second turn = %+v, %v", res, err)
		}
	})

	t.Run("retries on 429 then succeeds", func(t *testing.T) {
		srv := endpoint(script, Options{FailFirst: 2, FailStatus: 429})
		defer srv.Close()
		if _, err := connect(t, srv.URL, "k", 3).Generate(t.Context(), first, nil); err != nil {
			t.Fatal(err)
		}
		if n := srv.Requests.Load(); n != 3 {
			t.Errorf("%d requests, want 3 (two refused, one answered)", n)
		}
	})

	for _, tc := range []struct {
		name   string
		opts   Options
		key    string
		want   error
		maxReq int64
	}{
		{"5xx after bounded retries", Options{FailFirst: 100, FailStatus: 503}, "k", provider.ErrUnavailable, 3},
		{"bad key, not retried", Options{Key: "right"}, "wrong", provider.ErrAuth, 1},
		{"context too long", Options{FailFirst: 1, FailStatus: 400, FailBody: `{"error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": "prompt is too long: 300000 tokens > 200000 maximum"}}`}, "k", provider.ErrContextTooLong, 1},
		{"malformed stream", Options{Malformed: true}, "k", provider.ErrBadStream, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := endpoint(script, tc.opts)
			defer srv.Close()
			_, err := connect(t, srv.URL, tc.key, 2).Generate(t.Context(), first, nil)
			if !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want %v", err, tc.want)
			}
			if n := srv.Requests.Load(); n > tc.maxReq {
				t.Errorf("%d requests, want at most %d", n, tc.maxReq)
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		srv := endpoint(script, Options{})
		url := srv.URL
		srv.Close()
		if _, err := connect(t, url, "k", -1).Generate(t.Context(), first, nil); !errors.Is(err, provider.ErrUnavailable) {
			t.Errorf("error = %v, want ErrUnavailable", err)
		}
	})

	t.Run("hang mid-stream, cancel returns promptly", func(t *testing.T) {
		srv := endpoint(script, Options{Hang: true})
		defer srv.Close()
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err := connect(t, srv.URL, "k", 0).Generate(ctx, first, nil)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("returned %v after the cancel", d)
		}
	})
}
