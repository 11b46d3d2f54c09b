package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const script = `{
  "turns": [
    {"thinking": "plan it", "text": "Starting now.", "tool_calls": [{"name": "bash", "input": {"command": "ls"}}]},
    {"expect": "README", "text": "Done."}
  ],
  "agents": {"helper": [{"text": "I help."}]}
}`

func TestReplaysTurnsByPosition(t *testing.T) {
	m, err := scripted.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	var events []provider.Event
	req := provider.Request{Messages: []provider.Message{{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "go"}}}}}
	res, err := m.Generate(t.Context(), req, func(e provider.Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != provider.ToolCalls || res.Message.TextOf() != "Starting now." || len(res.Message.ToolCalls()) != 1 {
		t.Fatalf("turn 1 = %+v", res)
	}
	var text, thinking string
	calls := 0
	for _, e := range events {
		switch e.Type {
		case provider.TextDelta:
			text += e.Text
		case provider.ThinkingDelta:
			thinking += e.Text
		case provider.ToolCall:
			calls++
		}
	}
	if text != "Starting now." || thinking != "plan it" || calls != 1 {
		t.Errorf("streamed %q %q %d", text, thinking, calls)
	}
	call := res.Message.ToolCalls()[0]
	req.Messages = append(req.Messages, res.Message, provider.Message{Role: provider.User, Content: []provider.Block{
		{Type: provider.ToolResult, ToolCallID: call.ToolCallID, Text: "README\nMakefile"},
	}})
	res, err = m.Generate(t.Context(), req, nil)
	if err != nil || res.Message.TextOf() != "Done." || res.StopReason != provider.EndTurn {
		t.Fatalf("turn 2 = %+v, %v", res, err)
	}
	// Past the end.
	req.Messages = append(req.Messages, res.Message)
	if _, err := m.Generate(t.Context(), req, nil); !errors.Is(err, provider.ErrScript) || !strings.Contains(err.Error(), "has 2 turns") {
		t.Errorf("turn 3 error = %v", err)
	}
	// Sub-agents replay their own turns, each from the start.
	for range 2 {
		res, err := m.Generate(t.Context(), provider.Request{Agent: "helper"}, nil)
		if err != nil || res.Message.TextOf() != "I help." {
			t.Errorf("helper = %+v, %v", res, err)
		}
	}
	if _, err := m.Generate(t.Context(), provider.Request{Agent: "nobody"}, nil); !errors.Is(err, provider.ErrScript) {
		t.Errorf("unknown agent error = %v", err)
	}
}

func TestExpectMismatchFails(t *testing.T) {
	m, _ := scripted.Parse([]byte(script))
	req := provider.Request{Messages: []provider.Message{
		{Role: provider.User, Content: []provider.Block{{Type: provider.Text, Text: "go"}}},
		{Role: provider.Assistant},
		{Role: provider.User, Content: []provider.Block{{Type: provider.ToolResult, Text: "nothing here"}}},
	}}
	if _, err := m.Generate(t.Context(), req, nil); !errors.Is(err, provider.ErrScript) || !strings.Contains(err.Error(), `expects "README"`) {
		t.Errorf("error = %v", err)
	}
}

func TestDelaysHonourTheContext(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [{"text": "slow", "delay_ms": 100000}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := m.Generate(ctx, provider.Request{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
}

func TestParseRejectsBadScripts(t *testing.T) {
	for _, bad := range []string{
		`not json`,
		`{"turns": [{"txt": "typo"}]}`,
		`{"turns": [{"tool_calls": [{"input": {}}]}]}`,
		`{"turns": [{"tool_calls": [{"name": "bash", "input": [1]}]}]}`,
		`{"turns": [{"expect": "("}]}`,
		`{"turns": [{"delay_ms": -1}]}`,
	} {
		if _, err := scripted.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) = nil error", bad)
		}
	}
}

func TestStop(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [{"text": "I will not.", "stop": "refusal"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Generate(t.Context(), provider.Request{}, func(provider.Event) {})
	if err != nil || res.StopReason != provider.Refusal {
		t.Errorf("Generate() = %v, %v; want stop reason refusal", res.StopReason, err)
	}
	for _, bad := range []string{
		`{"turns": [{"text": "x", "stop": "tool_use"}]}`,
		`{"turns": [{"stop": "refusal", "tool_calls": [{"name": "bash"}]}]}`,
	} {
		if _, err := scripted.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) = nil error, want the stop refused", bad)
		}
	}
}

// TestParseSaysWhereTheJSONGoesWrong (issue 23 item 12): a script with a
// JSON mistake was refused without a line or a column.
func TestParseSaysWhereTheJSONGoesWrong(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{"not json", "scripted: line 1, column 2: invalid character 'o' in literal null"},
		{"{\n  \"turns\": [\n    {\"text\": \"a\",}\n  ]\n}", "scripted: line 3, column 18: invalid character '}' looking for beginning of object key string"},
		{"{\n  \"turns\": [\n    {\"txt\": \"typo\"}\n  ]\n}", `scripted: line 3, column 6: unknown field "txt"`},
		{"{\"turns\": [\n  {\"delay_ms\": \"soon\"}]}", `scripted: line 2, column 21: "turns.delay_ms" is a JSON string, where a number is wanted`},
		{"{\"turns\": [\n  {\"text\": \"a\"}", "scripted: line 2, column 15: the script ends before its JSON does"},
		{"{\"turns\": []}\n{\"turns\": []}", "scripted: line 2, column 1: more after the script's closing }"},
		{"", "scripted: the script is empty"},
		{`{"turns": [{"text": "a"}], "agents": {"helper": [{"expect": "("}]}}`, `scripted: turn 1 of agent "helper": bad expect`},
	} {
		_, err := scripted.Parse([]byte(tc.script))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want %q", tc.script, err, tc.want)
		}
	}
}

func TestReportsScriptedUsage(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [{"text": "Hi.", "usage": {"input_tokens": 120, "output_tokens": 9, "cached_input_tokens": 100}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Generate(t.Context(), provider.Request{}, nil)
	if want := (provider.Usage{InputTokens: 120, OutputTokens: 9, CachedInputTokens: 100}); err != nil || res.Usage != want {
		t.Errorf("Generate() usage = %+v, %v; want %+v", res.Usage, err, want)
	}
}
