package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// filter runs input through the tolerant reader and returns what reached
// the SDK and what was answered.
func filter(input []byte) (passed, replies []byte) {
	var out bytes.Buffer
	r := &tolerantReader{r: bufio.NewReaderSize(bytes.NewReader(input), 64<<10), reply: &lineWriter{w: &out}}
	passed, _ = io.ReadAll(r)
	return passed, out.Bytes()
}

func TestTolerantReader(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	huge := `{"jsonrpc":"2.0","id":2,"method":"x","params":"` + strings.Repeat("a", 17<<20) + `"}`
	in := strings.Join([]string{"garbage", ok, `{"no":"rpc"}`, "", huge, `[` + ok + `]`, ok}, "\n") + "\n"
	passed, replies := filter([]byte(in))
	if want := ok + "\n\n[" + ok + "]\n" + ok + "\n"; string(passed) != want {
		t.Errorf("passed %q, want %q", passed, want)
	}
	codes := []string{`"code":-32700`, `"code":-32600`, `"code":-32600`}
	lines := strings.Split(strings.TrimSpace(string(replies)), "\n")
	if len(lines) != len(codes) {
		t.Fatalf("replies = %q", replies)
	}
	for i, code := range codes {
		if !strings.Contains(lines[i], code) {
			t.Errorf("reply %d = %s, want %s", i, lines[i], code)
		}
	}
}

func FuzzTolerantReader(f *testing.F) {
	f.Add([]byte("garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"))
	f.Add([]byte("[1,2\n{}\n\n\"x\"\n"))
	f.Fuzz(func(t *testing.T, input []byte) {
		passed, replies := filter(input)
		for _, line := range bytes.Split(passed, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 && !json.Valid(line) {
				t.Fatalf("passed a line that is not JSON: %q", line)
			}
		}
		for _, line := range bytes.Split(bytes.TrimSpace(replies), []byte("\n")) {
			if len(line) > 0 && !json.Valid(line) {
				t.Fatalf("replied with a line that is not JSON: %q", line)
			}
		}
	})
}
