package rpcline

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzValid: Valid says what json.Valid says of any input, and, of valid
// JSON, the nesting depth counts.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi \u00e9\n"}]}}`,
		` [1, -0.5e+3, true, false, null, "x\"\\\/\b\f\n\r\t", {}, [], {"a": [{}]}] `,
		`01`, `1.`, `-`, `1e`, `"\u12g4"`, `"\x"`, "\"\x01\"", `{"a" 1}`, `{"a":1,}`, `[1,]`, `[}`, `{]`, `tru`, `nul`, `"`,
		strings.Repeat("[", 300) + strings.Repeat("]", 300),
		strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70),
		"\xff", `"\xff"`, "", " ", "{}x", `{"a":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, ok := Valid(b)
		if want := json.Valid(b); ok != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, ok, want)
		}
		if ok && d != depth(b) {
			t.Fatalf("Valid(%q) depth = %d, want %d", b, d, depth(b))
		}
	})
}
