package acpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/rpcline"
	"github.com/offstage/offstage/task"
)

// sdkPromptCheck is how session/prompt's params were taken before
// prompt.go: checkParams' look (decodeAs, then needSessionID, or
// checkPrompt naming the block), then the SDK's own decoding.
func sdkPromptCheck(params json.RawMessage) (acp.PromptRequest, error) {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	err := decodeAs[acp.PromptRequest](params)
	if err == nil {
		err = needSessionID(params)
	} else if e := checkPrompt(params); e != nil {
		err = e
	}
	var p acp.PromptRequest
	if err == nil {
		if uerr := json.Unmarshal(params, &p); uerr != nil {
			panic(fmt.Sprintf("checked params the SDK cannot decode: %v", uerr))
		}
	}
	return p, err
}

// samePrompt checks that session/prompt's params are taken as they were:
// refused with the same words, or decoded to the same request.
func samePrompt(t *testing.T, params []byte) {
	t.Helper()
	want, wantErr := sdkPromptCheck(params)
	got, err := promptParams(params)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("params %s:\nerror %v\nwant  %v", params, err, wantErr)
	}
	if err != nil {
		return
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("params %s decode differently (-SDK +ours):\n%s", params, d)
	}
}

var promptSeeds = []string{
	`{"sessionId":"s-1","prompt":[{"type":"text","text":"what runs?"}]}`,
	`{"prompt":[{"type":"text","text":"x"}],"sessionId":"s-1","messageId":"m","_meta":{"a":[1]}}`,
	`{"sessionId":"s-1","prompt":[{"type":"text","text":"x","annotations":{"priority":1}},{"type":"resource_link","name":"a","uri":"file:///a"},{"type":"resource","resource":{"uri":"file:///b","text":"b"}}]}`,
	`{"sessionId":"s-1","prompt":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
	`{"sessionId":"s-1","prompt":[{"text":"no type"}]}`,
	`{"sessionId":"s-1","prompt":[{"TYPE":"text","type":"image","text":"x"}]}`,
	`{"sessionId":"s-1","prompt":[{"type":"text","text":7}]}`,
	`{"sessionId":"s-1","prompt":[5]}`,
	`{"sessionId":"s-1","prompt":"hello"}`,
	`{"sessionId":"s-1"}`,
	`{"sessionId":"s-1","prompt":null}`,
	`{"sessionId":"s-1","prompt":[]}`,
	`{"prompt":[{"type":"text","text":"x"}]}`,
	`{"sessionId":"","prompt":[]}`,
	`{"sessionId":null,"prompt":[]}`,
	`{"sessionId":"s-1","sessionId":null,"prompt":[]}`,
	`{"SESSIONID":"s-1","Prompt":[{"type":"text","text":"x"}]}`,
	`{"sessionId":7,"prompt":[]}`,
	`{"sessionId":"s-1","prompt":[],"_meta":"x"}`,
	`{"sessionId":"s-1","prompt":[],"messageId":3}`,
	`[]`,
	`{}`,
	``,
}

func TestPromptParamsAsBefore(t *testing.T) {
	for _, p := range promptSeeds {
		samePrompt(t, []byte(p))
	}
}

// FuzzPromptParams: session/prompt's params, decoded once in prompt.go,
// are refused and decoded as checkParams and the SDK did.
func FuzzPromptParams(f *testing.F) {
	for _, p := range promptSeeds {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, params string) {
		if !json.Valid([]byte(params)) && params != "" {
			return // the line guard answered it
		}
		samePrompt(t, []byte(params))
	})
}

// TestCancelKey: $/cancel_request's requestId names a request by its
// value, as the SDK matches ids.
func TestCancelKey(t *testing.T) {
	for _, tc := range []struct {
		id, requestID string
		match         bool
	}{
		{`7`, `7`, true},
		{`7`, `7.0`, true},
		{`7`, `70e-1`, true},
		{`7`, `0.7E1`, true},
		{`-3`, `-3`, true},
		{`0`, `-0`, true},
		{`0`, `0`, true},
		{`-0`, `0`, true},
		{`10`, `1e1`, true},
		{`-120`, `-1.2e2`, true},
		{`12345678901234567890123`, `12345678901234567890123.0`, true},
		{`"a\"b"`, `"a\u0022b"`, true},
		{`"\ud800"`, `"\ufffd"`, true},
		{`7`, `"7"`, false},
		{`"7"`, `"7"`, true},
		{`"a"`, `"\u0061"`, true},
		{`7`, `8`, false},
		{`7`, `7.5`, false},
		{`7`, `7e100000`, false},
		{`7`, `[7]`, false},
		{`9007199254740992`, `9007199254740993`, false},
	} {
		if got := cancelKey(json.RawMessage(tc.id)) == cancelKey(json.RawMessage(tc.requestID)) && cancelKey(json.RawMessage(tc.requestID)) != ""; got != tc.match {
			t.Errorf("request %s, $/cancel_request %s: match %v, want %v", tc.id, tc.requestID, got, tc.match)
		}
	}
}

// TestRespondWritesAsTheSDK: a prompt's response, written in one pass, is
// the line the SDK's handleInbound wrote, byte for byte.
func TestRespondWritesAsTheSDK(t *testing.T) {
	usage := agent.Usage{Total: task.Usage{InputTokens: 5, OutputTokens: 7, ModelCalls: 2}}
	turn := task.Usage{InputTokens: 3, CachedInputTokens: 1}
	asStruct, _ := json.Marshal(usageMeta{Turn: turn, Session: usage.Total, Autonomous: usage.Autonomous})
	asMap, _ := json.Marshal(map[string]task.Usage{"turn": turn, "session": usage.Total, "autonomous": usage.Autonomous})
	if string(asStruct) != string(asMap) {
		t.Errorf("usage _meta %s, was %s", asStruct, asMap)
	}
	for _, tc := range []struct {
		result acp.PromptResponse
		err    error
	}{
		{result: withUsage(acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, &turn, usage)},
		{result: acp.PromptResponse{StopReason: acp.StopReasonCancelled, Meta: map[string]any{"<&>": "\u2028"}}},
		{err: internal("%s", "the session was closed")},
		{err: errors.New("plain")},
	} {
		for _, id := range []string{`7`, `"a<b"`} {
			var out bytes.Buffer
			_, w := rpcline.New(strings.NewReader(""), &out, rpcline.Options{MaxLine: 1 << 10})
			srv := &server{out: w}
			srv.respond(json.RawMessage(id), tc.result, tc.err)
			// The SDK: the result marshalled, then the message around it.
			type anyMessage struct {
				JSONRPC string            `json:"jsonrpc"`
				ID      *json.RawMessage  `json:"id,omitempty"`
				Method  string            `json:"method,omitempty"`
				Params  json.RawMessage   `json:"params,omitempty"`
				Result  json.RawMessage   `json:"result,omitempty"`
				Error   *acp.RequestError `json:"error,omitempty"`
			}
			raw := json.RawMessage(id)
			msg := anyMessage{JSONRPC: "2.0", ID: &raw}
			if tc.err != nil {
				msg.Error = requestError(tc.err)
			} else {
				msg.Result, _ = json.Marshal(tc.result)
			}
			want, _ := json.Marshal(msg)
			// The same bytes, but for the id, which goes out as it came
			// (the SDK writes "a<b" as "a\u003cb").
			want = bytes.ReplaceAll(want, []byte(`"a\u003cb"`), []byte(`"a<b"`))
			if got := out.String(); got != string(want)+"\n" {
				t.Errorf("respond wrote\n%s\nthe SDK\n%s", got, want)
			}
		}
	}
}

// TestPlainPromptIsRead: the params every prompt of a conversation has
// are read in place, not decoded by the SDK's types (the fuzz test holds
// the result to theirs).
func TestPlainPromptIsRead(t *testing.T) {
	for _, params := range []string{
		`{"sessionId":"s-1","prompt":[{"type":"text","text":"what runs?"}]}`,
		` {"prompt" : [ {"text":"a\"b\u00e9","type":"text"} , {"type":"text","text":""} ], "sessionId":"s\\1"} `,
	} {
		if _, ok := plainPrompt(json.RawMessage(params)); !ok {
			t.Errorf("%s was not read in place", params)
		}
		samePrompt(t, []byte(params))
	}
}

// TestAPromptBlockOfAnUnknownTypeIsNamed: the SDK decodes a block of a
// type it does not know as text, with that type; the prompt was refused
// as empty (an outsider's finding). It is refused naming the block.
func TestAPromptBlockOfAnUnknownTypeIsNamed(t *testing.T) {
	p, err := promptParams([]byte(`{"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}, {"type": "bogus"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := promptText(p.Prompt); err == nil || !strings.Contains(err.Error(), `prompt block 1 is of type \"bogus\"`) && !strings.Contains(err.Error(), `prompt block 1 is of type "bogus"`) {
		t.Errorf("a prompt with a block of type bogus: %v", err)
	}
}
