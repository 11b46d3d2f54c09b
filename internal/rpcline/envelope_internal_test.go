package rpcline

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzEnvelope: the scan of a message's members gives, for the keys the
// guard reads, what decoding it into a map gives (or declines, and the map
// is used).
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"a\"}b"}]}}`,
		` { "id" : "x" , "result" : [1, {"a": "]"}] , "id": 2 } `,
		`{"\u006dethod":"m","method":"n"}`,
		`{"METHOD":"m","error":{"code":1},"params":null}`,
		`{}`, `[]`, `"x"`, `{"a":{"b":{}}, "id": -1.5e3}`, `{"method":"é","é":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		msg := []byte(s)
		if !json.Valid(msg) {
			return
		}
		var fields map[string]json.RawMessage
		isObject := json.Unmarshal(msg, &fields) == nil
		e, ok := scanEnvelope(msg)
		if !ok {
			if e2, ok2 := readEnvelope(msg); ok2 != isObject || (ok2 && !same(e2, fields)) {
				t.Fatalf("%s: readEnvelope %q (%v), the map %q", msg, e2, ok2, fields)
			}
			return
		}
		if !isObject {
			t.Fatalf("%s is no object, yet was scanned as one: %q", msg, e)
		}
		if !same(e, fields) {
			t.Fatalf("%s: scanned %q, the map %q", msg, e, fields)
		}
	})
}

func same(e envelope, fields map[string]json.RawMessage) bool {
	for i, k := range envelopeKeys {
		if v, ok := fields[k]; ok != (e[i] != nil) || !bytes.Equal(v, e[i]) {
			return false
		}
	}
	return true
}
