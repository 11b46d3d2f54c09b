// Package rpcline guards a stream of newline-delimited JSON-RPC messages,
// as MCP's and ACP's stdio transports carry them, for the SDKs behind
// offstage's surfaces: a line that is not JSON gets a parse error
// (-32700), one that is not a JSON-RPC 2.0 message (or a batch, where
// batches are not allowed) an invalid-request error (-32600), one longer
// than the cap an invalid-request error too; each is answered on the
// output and skipped, and the stream goes on, where the SDKs alone would
// drop the line silently or end the connection.
//
// # Concurrency properties
//
// A Reader is read by one goroutine (the SDK's). Writer serialises whole
// messages: the SDKs write each message with its newline in one call, and
// so does the Reader's replies, so the two never interleave within a line.
// Memory is bounded by the line cap, whatever a peer sends.
package rpcline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Writer serialises writes to w. Close does nothing: the stream's owner
// closes w.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *Writer) Close() error { return nil }

// Options shape a Reader.
type Options struct {
	// MaxLine caps one message, in bytes (the SDK's own cap, if it has
	// one, minus one). Required.
	MaxLine int
	// Batches lets JSON arrays through for the SDK to judge (MCP);
	// without it they are refused (ACP has no batches).
	Batches bool
}

// Reader passes valid messages on, one per line with its newline, and
// answers the rest on reply. Blank lines are dropped.
type Reader struct {
	r       *bufio.Reader
	reply   io.Writer
	opts    Options
	pending []byte
}

// NewReader returns a Reader of in whose error replies go to reply (a
// Writer shared with the SDK's output).
func NewReader(in io.Reader, reply io.Writer, opts Options) *Reader {
	return &Reader{r: bufio.NewReaderSize(in, 64<<10), reply: reply, opts: opts}
}

func (t *Reader) Read(p []byte) (int, error) {
	for len(t.pending) == 0 {
		line, err := t.line()
		if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if rejection := t.check(msg); rejection != nil {
				t.reply.Write(rejection)
			} else {
				t.pending = append(msg, '\n')
			}
		}
		if err != nil {
			if len(t.pending) == 0 {
				return 0, err
			}
			break
		}
	}
	n := copy(p, t.pending)
	t.pending = t.pending[n:]
	return n, nil
}

func (t *Reader) Close() error { return nil }

// line reads one line, with its newline. A line over the cap is answered
// with a rejection, read to its end and dropped (nil is returned).
func (t *Reader) line() ([]byte, error) {
	var buf []byte
	dropping := false
	for {
		chunk, err := t.r.ReadSlice('\n')
		if !dropping {
			if len(buf)+len(chunk) > t.opts.MaxLine {
				dropping, buf = true, nil
				t.reply.Write(Rejection(-32600, fmt.Sprintf("Invalid Request: a message longer than %d bytes was dropped", t.opts.MaxLine)))
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

// check returns the error reply for a message, or nil if it goes on.
func (t *Reader) check(msg []byte) []byte {
	if !json.Valid(msg) {
		return Rejection(-32700, "Parse error: the line is not JSON; send one JSON-RPC message per line")
	}
	if msg[0] == '[' {
		if t.opts.Batches {
			return nil // the SDK judges its members
		}
		return Rejection(-32600, "Invalid Request: batches are not supported; send one JSON-RPC object per line")
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(msg, &m) != nil || m.JSONRPC != "2.0" || (m.Method == "" && m.Result == nil && m.Error == nil) {
		return Rejection(-32600, "Invalid Request: not a JSON-RPC 2.0 message")
	}
	return nil
}

// Rejection is a JSON-RPC error reply with a null id, and its newline.
func Rejection(code int, message string) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": message}})
	return append(b, '\n')
}
