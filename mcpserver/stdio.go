package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLine bounds one JSON-RPC message on stdio; a longer line is refused
// and skipped, so memory stays bounded whatever a peer sends.
const maxLine = 16 << 20

// Stdio returns a transport over in and out (newline-delimited JSON-RPC,
// as MCP's stdio transport specifies) that survives bad input: a line
// that is not JSON gets a parse error (-32700), and one that is not a
// JSON-RPC 2.0 message an invalid-request error (-32600); either is then
// skipped and the session goes on, where the SDK's own transport would end
// it. Replies and the SDK's messages never interleave within a line.
func Stdio(in io.Reader, out io.Writer) mcp.Transport {
	w := &lineWriter{w: out}
	return &mcp.IOTransport{
		Reader: &tolerantReader{r: bufio.NewReaderSize(in, 64<<10), reply: w},
		Writer: w,
	}
}

// lineWriter serialises writes: the SDK writes each message with its
// newline in one call, and so do the rejections.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lineWriter) Close() error { return nil }

// tolerantReader passes valid JSON-RPC lines on and answers the rest.
type tolerantReader struct {
	r       *bufio.Reader
	reply   io.Writer
	pending []byte
}

func (t *tolerantReader) Read(p []byte) (int, error) {
	for len(t.pending) == 0 {
		line, err := t.line()
		if line != nil {
			if rejection := check(bytes.TrimSpace(line)); rejection != nil {
				t.reply.Write(rejection)
			} else {
				t.pending = line
			}
		}
		if err != nil && len(t.pending) == 0 {
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

func (t *tolerantReader) Close() error { return nil }

// line reads one line, with its newline. A line over maxLine is answered
// with a rejection, read to its end and dropped (nil is returned).
func (t *tolerantReader) line() ([]byte, error) {
	var buf []byte
	dropping := false
	for {
		chunk, err := t.r.ReadSlice('\n')
		if !dropping {
			if len(buf)+len(chunk) > maxLine {
				dropping, buf = true, nil
				t.reply.Write(rejectionLine(-32600, "Invalid Request: message longer than 16 MiB"))
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

// check returns the error reply for a line, or nil if it should go on to
// the SDK. Blank lines are ignored.
func check(line []byte) []byte {
	if len(line) == 0 {
		return nil
	}
	if !json.Valid(line) {
		return rejectionLine(-32700, "Parse error: the line is not JSON")
	}
	if line[0] == '[' { // a batch: the SDK judges its members
		return nil
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &msg) != nil || msg.JSONRPC != "2.0" || (msg.Method == "" && msg.Result == nil && msg.Error == nil) {
		return rejectionLine(-32600, "Invalid Request: not a JSON-RPC 2.0 message")
	}
	return nil
}

func rejectionLine(code int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": message}})
	return append(b, '\n')
}
