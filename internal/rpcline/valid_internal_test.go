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

// wholeUnicode tells a JSON string that decodes as it reads from one that
// decodes with U+FFFD in place of a byte or an escape.
func TestWholeUnicode(t *testing.T) {
	for q, want := range map[string]bool{
		`""`:               true,
		`"abc"`:            true,
		`"é\u00e9"`:        true,
		`"\ud83d\ude00"`:   true,
		`"\ufffd"`:         true,
		`"\\ud800"`:        true, // an escaped backslash, then text
		`"\ud800"`:         false,
		`"\udc00"`:         false,
		`"\ud83dx"`:        false,
		`"\ud83d\n"`:       false,
		`"\ud83d\ud83d"`:   false,
		`"\ude00\ud83d"`:   false,
		"\"\xff\"":         false,
		"\"\xed\xa0\x80\"": false, // a surrogate written as UTF-8 bytes
	} {
		if got := wholeUnicode([]byte(q)); got != want {
			t.Errorf("wholeUnicode(%s) = %v, want %v", q, got, want)
		}
		var s string
		if json.Unmarshal([]byte(q), &s) != nil {
			t.Fatalf("%s is no JSON string", q)
		}
		if back, _ := json.Marshal(s); want && strings.Contains(string(back), "\ufffd") != strings.Contains(q, "\\ufffd") {
			t.Errorf("%s decodes to %s", q, back)
		}
	}
}
