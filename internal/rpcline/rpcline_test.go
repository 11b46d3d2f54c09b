package rpcline_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/internal/rpcline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// filter runs input through a Reader and returns what reached the SDK
// and what was answered.
func filter(input []byte, opts rpcline.Options) (passed, replies []byte) {
	var out bytes.Buffer
	r := rpcline.NewReader(bytes.NewReader(input), rpcline.NewWriter(&out), opts)
	passed, _ = io.ReadAll(r)
	return passed, out.Bytes()
}

func TestReader(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	huge := `{"jsonrpc":"2.0","id":2,"method":"x","params":"` + strings.Repeat("a", 2<<20) + `"}`
	in := strings.Join([]string{"garbage", ok, `{"no":"rpc"}`, "", huge, `[` + ok + `]`, "  " + ok + "\r"}, "\n") + "\n"
	for _, tc := range []struct {
		name   string
		opts   rpcline.Options
		passed string
		codes  []string
	}{
		{"batches", rpcline.Options{MaxLine: 1 << 20, Batches: true}, ok + "\n[" + ok + "]\n" + ok + "\n", []string{"-32700", "-32600", "-32600"}},
		{"no batches", rpcline.Options{MaxLine: 1 << 20}, ok + "\n" + ok + "\n", []string{"-32700", "-32600", "-32600", "-32600"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			passed, replies := filter([]byte(in), tc.opts)
			if string(passed) != tc.passed {
				t.Errorf("passed %q, want %q", passed, tc.passed)
			}
			lines := strings.Split(strings.TrimSpace(string(replies)), "\n")
			if len(lines) != len(tc.codes) {
				t.Fatalf("replies = %q, want %d", replies, len(tc.codes))
			}
			for i, code := range tc.codes {
				if !strings.Contains(lines[i], `"code":`+code) {
					t.Errorf("reply %d = %s, want code %s", i, lines[i], code)
				}
			}
		})
	}
}

// FuzzReader: whatever a peer sends, nothing panics; every JSON-RPC
// object line reaches the SDK unchanged (trimmed), in order; every other
// non-blank line gets exactly one JSON error reply.
func FuzzReader(f *testing.F) {
	f.Add([]byte("garbage\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"))
	f.Add([]byte("[1,2\n{}\n\n\"x\"\n"))
	f.Add([]byte("\x00\xff\n{\"jsonrpc\":\"2.0\",\"result\":{}}\r\n[1]"))
	f.Fuzz(func(t *testing.T, input []byte) {
		passed, replies := filter(input, rpcline.Options{MaxLine: 4 << 10})
		var want []string
		errs := 0
		for _, line := range bytes.Split(input, []byte("\n")) {
			line = bytes.TrimSpace(line)
			switch {
			case len(line) == 0:
			case len(line) < 4<<10 && isMessage(line):
				want = append(want, string(line)+"\n")
			default:
				errs++
			}
		}
		if string(passed) != strings.Join(want, "") {
			t.Errorf("passed %q, want %q", passed, strings.Join(want, ""))
		}
		got := bytes.Split(bytes.TrimSpace(replies), []byte("\n"))
		if len(bytes.TrimSpace(replies)) == 0 {
			got = nil
		}
		if len(got) != errs {
			t.Errorf("%d replies %q, want %d", len(got), replies, errs)
		}
		for _, line := range got {
			if !json.Valid(line) {
				t.Errorf("replied with a line that is not JSON: %q", line)
			}
		}
	})
}

func isMessage(line []byte) bool {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	return json.Valid(line) && line[0] == '{' && json.Unmarshal(line, &m) == nil && m.JSONRPC == "2.0" && (m.Method != "" || m.Result != nil || m.Error != nil)
}
