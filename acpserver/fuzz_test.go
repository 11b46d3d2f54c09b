package acpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// FuzzCheckLines: whatever a client sends, the line checker never panics
// or hangs; every line that is a JSON object reaches the SDK unchanged
// (trimmed), in order; every other non-blank line gets exactly one error.
func FuzzCheckLines(f *testing.F) {
	for _, seed := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n",
		"not json\n{}\n",
		"[1,2]\n\n   \n{\"a\":1}",
		"{\"unterminated\": \n",
		"\x00\xff\n{}\r\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var replies bytes.Buffer
		r := checkLines(strings.NewReader(in), &replies, slog.New(slog.NewTextHandler(io.Discard, nil)))
		passed, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("reading the checked lines: %v", err)
		}
		var wantPassed []string
		wantErrors := 0
		for _, line := range strings.Split(in, "\n") {
			line = string(bytes.TrimSpace([]byte(line)))
			switch {
			case line == "":
			case json.Valid([]byte(line)) && line[0] == '{':
				wantPassed = append(wantPassed, line+"\n")
			default:
				wantErrors++
			}
		}
		if got := string(passed); got != strings.Join(wantPassed, "") {
			t.Errorf("passed %q, want %q", got, strings.Join(wantPassed, ""))
		}
		if got := strings.Count(replies.String(), "\n"); got != wantErrors {
			t.Errorf("%d error replies (%q), want %d", got, replies.String(), wantErrors)
		}
		for _, reply := range strings.Split(strings.TrimSpace(replies.String()), "\n") {
			if reply != "" && !json.Valid([]byte(reply)) {
				t.Errorf("reply %q is not JSON", reply)
			}
		}
	})
}
