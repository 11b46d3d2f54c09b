package acpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// maxLine bounds one message from the client; the SDK's own limit is
// 10 MiB, past which it would drop the connection.
const maxLine = 10<<20 - 1

// lockedWriter serialises whole messages: the SDK writes each in one
// Write, and so do the error replies of checkLines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// checkLines passes the client's messages on to the SDK, one per line,
// and answers a line that is not a JSON object, or is longer than
// maxLine, with a JSON-RPC error of its own (the SDK would log and drop
// the first, and hang up on the second), so a client that sent garbage
// hears about it and the connection goes on.
func checkLines(r io.Reader, w io.Writer, log *slog.Logger) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		var line []byte
		for {
			chunk, err := br.ReadSlice('\n')
			switch {
			case len(line)+len(chunk) > maxLine:
				line = line[:0]
				if errors.Is(err, bufio.ErrBufferFull) { // skip to the end of the line
					for errors.Is(err, bufio.ErrBufferFull) {
						_, err = br.ReadSlice('\n')
					}
				}
				reply(w, -32600, fmt.Sprintf("Invalid Request: a message longer than %d bytes was dropped", maxLine))
			default:
				line = append(line, chunk...)
				if errors.Is(err, bufio.ErrBufferFull) {
					continue
				}
				if msg := bytes.TrimSpace(line); len(msg) > 0 {
					if code, why := check(msg); code != 0 {
						log.Info("bad message from the client", "why", why)
						reply(w, code, why)
					} else if _, werr := pw.Write(append(msg, '\n')); werr != nil {
						return // the SDK stopped reading
					}
				}
				line = line[:0]
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				pw.CloseWithError(err) // io.EOF: the client hung up
				return
			}
		}
	}()
	return pr
}

// check says what is wrong with a message, as a JSON-RPC error code and
// message, or 0 if it is a JSON object.
func check(msg []byte) (int, string) {
	if !json.Valid(msg) {
		return -32700, "Parse error: the message is not valid JSON; send one JSON-RPC object per line"
	}
	if msg[0] != '{' {
		return -32600, "Invalid Request: a message must be one JSON-RPC object (batches are not supported)"
	}
	return 0, ""
}

func reply(w io.Writer, code int, message string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": message}})
	w.Write(append(b, '\n'))
}
