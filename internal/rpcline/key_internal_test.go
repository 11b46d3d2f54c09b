package rpcline

import (
	"encoding/json"
	"testing"
)

// sdkMessage is a JSON-RPC message as the Go SDKs encode one (the ACP
// SDK's anyMessage: its fields, in its order).
type sdkMessage struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id,omitempty"`
	Method  string           `json:"method,omitempty"`
	Params  json.RawMessage  `json:"params,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// FuzzResponseKey: the shortcuts responseKey takes for the messages the
// Go SDKs write (a notification's prefix, a response's id read in place)
// give the answer decoding the message gives. Lines of any other shape
// (the Writer sees only what the SDK and acpserver write) get no
// shortcut; they are decoded, and must not panic.
func FuzzResponseKey(f *testing.F) {
	f.Add(`7`, "", true, false, `{"stopReason":"end_turn"}`)
	f.Add(`"a-1"`, "", false, true, `{}`)
	f.Add(`"a,b"`, "", true, false, `{}`)
	f.Add(`"a\"b"`, "", true, false, `{}`)
	f.Add(`"\u00e9"`, "", true, false, `{}`)
	f.Add(`1`, "session/request_permission", false, false, `{}`)
	f.Add(``, "session/update", false, false, `{}`)
	f.Add(`1.5`, "", true, false, `{}`)
	f.Add(`9007199254740993`, "", true, false, `{}`)
	f.Add(`-0`, "", true, false, `{}`)
	f.Add(`null`, "", true, false, `{}`)
	f.Add(`[1]`, "", true, false, `{}`)
	f.Fuzz(func(t *testing.T, id, method string, result, failed bool, payload string) {
		m := sdkMessage{JSONRPC: "2.0", Method: method}
		if id != "" {
			raw := json.RawMessage(id)
			m.ID = &raw
		}
		if method != "" {
			m.Params = json.RawMessage(payload)
		}
		if result {
			m.Result = json.RawMessage(payload)
		}
		if failed {
			m.Error = &struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}{-32602, payload}
		}
		p, err := json.Marshal(m)
		if err != nil {
			return // not JSON: no SDK writes it
		}
		key, ok := responseKey(p)
		want, wantOK := decodedResponseKey(p)
		if key != want || ok != wantOK {
			t.Errorf("responseKey(%s) = %q, %v; decoding says %q, %v", p, key, ok, want, wantOK)
		}
		responseKey([]byte(payload)) // any line: no panic
	})
}
