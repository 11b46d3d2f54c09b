package acpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/task"
)

// sdkLine is the notification line the SDK writes for u.
func sdkLine(t testing.TB, id acp.SessionId, u acp.SessionUpdate) []byte {
	params, err := json.Marshal(acp.SessionNotification{SessionId: id, Update: u})
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": acp.ClientMethodSessionUpdate, "params": json.RawMessage(params)})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// sameUpdate checks that a client reads the same update from our line as
// from the SDK's: the same JSON value, and the same SessionUpdate when
// decoded with the SDK's own types.
func sameUpdate(t *testing.T, id acp.SessionId, u acp.SessionUpdate) {
	t.Helper()
	ours, ok := appendUpdate(nil, id, &u)
	if !ok {
		t.Fatalf("appendUpdate refused %+v", u)
	}
	if len(ours) == 0 || ours[len(ours)-1] != '\n' {
		t.Fatalf("line %q does not end with a newline", ours)
	}
	var a, b any
	if err := json.Unmarshal(ours, &a); err != nil {
		t.Fatalf("our line is not JSON: %v: %s", err, ours)
	}
	if err := json.Unmarshal(sdkLine(t, id, u), &b); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(b, a); d != "" {
		t.Errorf("our line differs from the SDK's (-sdk +ours):\n%s", d)
	}
	var got, want struct {
		Params acp.SessionNotification `json:"params"`
	}
	if err := json.Unmarshal(ours, &got); err != nil {
		t.Fatalf("the SDK cannot decode our line: %v: %s", err, ours)
	}
	if err := json.Unmarshal(sdkLine(t, id, u), &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(mustJSON(t, want.Params), mustJSON(t, got.Params)); d != "" {
		t.Errorf("decoded with the SDK's types, the update differs:\n%s", d)
	}
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUpdateWireMatchesSDK: the session updates acpserver encodes itself
// (wire.go) are the ones the SDK would write, for every kind it encodes.
func TestUpdateWireMatchesSDK(t *testing.T) {
	id := acp.SessionId("20261127-094137-735556")
	updates := []acp.SessionUpdate{
		acp.UpdateAgentMessageText("Nothing is running.\n"),
		acp.UpdateAgentThoughtText("<b>&\"odd\"</b> \u2028 \x00 é"),
		acp.UpdateUserMessageText("what runs?"),
		acp.StartToolCall("call_1", "List tasks", acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(map[string]any{"status": "running"})),
		acp.UpdateToolCall("call_1", acp.WithUpdateStatus(acp.ToolCallStatusInProgress)),
		acp.UpdateToolCall("call_1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(`{"tasks":[],"count":0}`))}),
			acp.WithUpdateRawOutput(map[string]any{"count": 0, "tasks": []any{}})),
		acp.StartToolCall("call_1", "List tasks", acp.WithStartRawInput(jsonText(`{"a":[1,2.5e3,"<&>"],"b":null}`))),
		acp.UpdateToolCall("call_1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted), acp.WithUpdateRawOutput(jsonText(`{"count":0,"tasks":[]}`)),
			acp.WithUpdateRawInput(jsonText(`"x"`))),
		acp.UpdateToolCall("call_1", acp.WithUpdateRawOutput("not JSON: {")),
		acp.StartToolCall("call_1", "", acp.WithStartRawOutput(map[string]any(nil)), acp.WithStartLocations([]acp.ToolCallLocation{{Path: "/a", Line: acp.Ptr(3)}})),
		acp.UpdateToolCall("call_2", acp.WithUpdateTitle("bash: make"), acp.WithUpdateKind(acp.ToolKindExecute),
			acp.WithUpdateLocations([]acp.ToolCallLocation{{Path: "/tmp/x"}})),
	}
	msgID := "m-1"
	text := acp.TextBlock("with annotations")
	text.Text.Annotations = &acp.Annotations{Audience: []acp.Role{acp.RoleUser}}
	text.Text.Meta = map[string]any{"k": []any{1.0, "v"}}
	updates = append(updates,
		acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{Content: text, MessageId: &msgID, Meta: map[string]any{"offstage/x": true}}},
		acp.UpdateToolCall("call_3", acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(text), acp.ToolContent(acp.TextBlock("")),
			{Content: &acp.ToolCallContentContent{Meta: map[string]any{"m": "n"}, Content: acp.TextBlock("x")}}})),
	)
	hint := &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: "<task id> \"x\""}}
	updates = append(updates,
		acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: []acp.AvailableCommand{
			{Name: "tasks", Description: "List the tasks"}, {Name: "wait", Description: "Wait for a task", Input: hint},
			{Name: "m", Meta: map[string]any{"a": 1}, Input: &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Meta: map[string]any{"b": "c"}}}},
		}}},
		acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{Meta: map[string]any{"k": true}}},
		acp.SessionUpdate{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{AvailableCommands: []acp.AvailableCommand{}}},
	)
	for _, u := range updates {
		sameUpdate(t, id, u)
	}
	// An update it does not encode is left to the SDK.
	for name, u := range map[string]acp.SessionUpdate{
		"a plan":                      {Plan: &acp.SessionUpdatePlan{}},
		"an image chunk":              acp.UpdateAgentMessage(acp.ImageBlock("aGk=", "image/png")),
		"a diff":                      acp.UpdateToolCall("call_4", acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolDiffContent("/x", "new")})),
		"a tool call with a terminal": acp.StartToolCall("call_5", "t", acp.WithStartContent([]acp.ToolCallContent{acp.ToolTerminalRef("term-1")})),
	} {
		if _, ok := appendUpdate(nil, id, &u); ok {
			t.Errorf("appendUpdate encoded %s; the SDK sends those", name)
		}
	}
}

// FuzzUpdateWire: any text a model or a tool puts in an update goes out
// as the SDK would write it.
func FuzzUpdateWire(f *testing.F) {
	f.Add("Nothing is running.", "call_1", "s-1")
	f.Add("\x00\xff\u2028<script>", "\"", "\\")
	f.Fuzz(func(t *testing.T, text, call, sid string) {
		id := acp.SessionId(sid)
		sameUpdate(t, id, acp.UpdateAgentMessageText(text))
		for _, u := range []acp.SessionUpdate{acp.UpdateAgentMessageText(text), acp.UpdateAgentThoughtText(text)} {
			want, _ := appendUpdate(nil, id, &u)
			if got := appendChunkLine(nil, id, u.AgentThoughtChunk != nil, text); string(got) != string(want) {
				t.Errorf("appendChunkLine wrote\n%s\nappendUpdate\n%s", got, want)
			}
		}
		sameUpdate(t, id, acp.UpdateToolCall(acp.ToolCallId(call), acp.WithUpdateStatus(acp.ToolCallStatusFailed),
			acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}), acp.WithUpdateRawOutput(map[string]any{"error": text})))
	})
}

// FuzzAppendString: appendString writes any string, invalid UTF-8 and
// all, byte for byte as encoding/json does.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00\x1f\b\f\n\r\t\"\\", "<&>", "\u2028\u2029", "é\xff\xc3", "\xed\xa0\x80", "\U0001F600"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got[1:], want)
		}
		if got := appendString(nil, []byte(s)); string(got) != string(want) {
			t.Errorf("appendString([]byte(%q)) = %s, want %s", s, got, want)
		}
	})
}

// TestAsJSON: a tool's text goes out as it is when it is JSON without a
// line break, compacted when it has one, and not as JSON otherwise.
func TestAsJSON(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{`{"a":1}`, `{"a":1}`, true},
		{"{\n  \"a\": \"b c\",\r\n  \"d\": [1, 2]\n}", `{"a":"b c","d":[1,2]}`, true},
		{` "s" `, ` "s" `, true},
		{`{"a":`, "", false},
		{"", "", false},
		{"\"raw\nline\"", "", false},
	} {
		got, ok := asJSON([]byte(c.in))
		if ok != c.ok || string(got) != c.want {
			t.Errorf("asJSON(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestPromptResultIsEncodingJSONs: a prompt's result, written by hand, is
// what encoding/json writes for it, byte for byte, for every field set or
// not; and the encoder knows every field the types have (a field the SDK
// or task.Usage adds fails here, not silently on the wire).
func TestPromptResultIsEncodingJSONs(t *testing.T) {
	fields := map[reflect.Type]string{
		reflect.TypeFor[acp.PromptResponse](): "Meta StopReason Usage UserMessageId",
		reflect.TypeFor[acp.Usage]():          "CachedReadTokens CachedWriteTokens InputTokens OutputTokens ThoughtTokens TotalTokens",
		reflect.TypeFor[usageMeta]():          "Autonomous Session Turn",
		reflect.TypeFor[task.Usage]():         "InputTokens OutputTokens CachedInputTokens ModelCalls",
	}
	for typ, want := range fields {
		var names []string
		for f := range typ.Fields() {
			names = append(names, f.Name)
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s has fields %s; appendPromptResult writes %s", typ, got, want)
		}
	}
	turn := task.Usage{InputTokens: 1 << 40, OutputTokens: -2, CachedInputTokens: 3, ModelCalls: 4}
	for _, r := range []acp.PromptResponse{
		{StopReason: acp.StopReasonEndTurn},
		withUsage(acp.PromptResponse{StopReason: acp.StopReasonMaxTokens}, &turn, agent.Usage{Total: turn, Autonomous: task.Usage{ModelCalls: 9}}),
		{StopReason: "odd \"<reason>\"", Usage: &acp.Usage{CachedWriteTokens: acp.Ptr(5), ThoughtTokens: acp.Ptr(-6), TotalTokens: 7}, UserMessageId: acp.Ptr("m\u2028")},
		{StopReason: acp.StopReasonRefusal, Usage: &acp.Usage{CachedReadTokens: acp.Ptr(0)}, Meta: map[string]any{}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendResponse(nil, json.RawMessage(`1`), r, nil); string(got) != `{"jsonrpc":"2.0","id":1,"result":`+string(want)+"}\n" {
			t.Errorf("appendResponse wrote\n%s\nencoding/json writes the result\n%s", got, want)
		}
	}
	// Another _meta goes through encoding/json.
	r := acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Meta: map[string]any{UsageMeta: usageMeta{}, "x": 1}}
	if _, ok := appendPromptResult(nil, &r); ok {
		t.Errorf("appendPromptResult wrote a _meta with another key")
	}
}

// TestPromptResponseIsWithUsages: the response the sender writes for a
// turn that ended is appendResponse's for withUsage's response.
func TestPromptResponseIsWithUsages(t *testing.T) {
	turn := task.Usage{InputTokens: 10, OutputTokens: 2, CachedInputTokens: 4, ModelCalls: 1}
	session := agent.Usage{Total: task.Usage{InputTokens: 30, ModelCalls: 3}, Autonomous: task.Usage{OutputTokens: 1}}
	for _, turn := range []*task.Usage{&turn, nil} {
		want := appendResponse(nil, json.RawMessage(`"p-1"`), withUsage(acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, turn, session), nil)
		if got := appendPromptResponse(nil, json.RawMessage(`"p-1"`), acp.StopReasonMaxTurnRequests, turn, session); string(got) != string(want) {
			t.Errorf("appendPromptResponse wrote\n%s\nwant\n%s", got, want)
		}
	}
}

// FuzzCardLines: a card's start, its status and its end, written straight from what the
// session holds, are the lines appendUpdate writes for the SDK's updates
// built as before (and FuzzUpdateWire holds those to the SDK's bytes).
func FuzzCardLines(f *testing.F) {
	f.Add("s-1", "call_1", "List tasks", "read", `{}`, "Nothing is running.", `{"tasks":[],"count":0}`)
	f.Add("\\", "\"", "Run: \u2028", "", `not json`, "\x00\xff", `"a string"`)
	f.Add("s", "c", "t", "execute", "{\n\"command\": \"ls\"\n}", "", `{"error":"x"}`)
	f.Fuzz(func(t *testing.T, sid, call, title, kind, input, text, result string) {
		id := acp.SessionId(sid)
		start := acp.StartToolCall(acp.ToolCallId(call), title, acp.WithStartKind(acp.ToolKind(kind)),
			acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(rawJSON([]byte(input))))
		want, ok := appendUpdate(nil, id, &start)
		if !ok {
			t.Fatalf("appendUpdate does not write the start %+v", start)
		}
		raw, isJSON := asJSON([]byte(input))
		if !isJSON {
			raw = nil
		}
		if got := appendCardStart(nil, id, call, title, acp.ToolKind(kind), acp.ToolCallStatusPending, raw, input); string(got) != string(want) {
			t.Errorf("appendCardStart wrote\n%s\nappendUpdate\n%s", got, want)
		}
		running := acp.UpdateToolCall(acp.ToolCallId(call), acp.WithUpdateStatus(acp.ToolCallStatusInProgress))
		if want, ok := appendUpdate(nil, id, &running); !ok {
			t.Fatalf("appendUpdate does not write the status %+v", running)
		} else if got := appendCardStatus(nil, id, call, acp.ToolCallStatusInProgress); string(got) != string(want) {
			t.Errorf("appendCardStatus wrote\n%s\nappendUpdate\n%s", got, want)
		}
		out := readOutput(result)
		for _, status := range []acp.ToolCallStatus{acp.ToolCallStatusCompleted, acp.ToolCallStatusFailed} {
			end := acp.UpdateToolCall(acp.ToolCallId(call), acp.WithUpdateStatus(status),
				acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))}), acp.WithUpdateRawOutput(rawOr(&out, result)))
			want, ok := appendUpdate(nil, id, &end)
			if !ok {
				t.Fatalf("appendUpdate does not write the end %+v", end)
			}
			if got := appendCardEnd(nil, id, call, status, text, out.raw, result); string(got) != string(want) {
				t.Errorf("appendCardEnd wrote\n%s\nappendUpdate\n%s", got, want)
			}
		}
	})
}
