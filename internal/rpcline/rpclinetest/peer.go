// Package rpclinetest drives a newline-delimited JSON-RPC server (the MCP
// and ACP stdio servers, through their real entry points) with raw lines,
// as a client process would, for tests and fuzz targets.
//
// # Lifecycle
//
// Start reads the server's output until it ends; Close ends the input and
// waits for the output to end. A Peer is used by one goroutine at a time
// (a test, or a fuzz worker's inputs one after another).
package rpclinetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// Timeout bounds every wait of a Peer: for the server to read a line, and
// for a reply.
const Timeout = 30 * time.Second

// Peer is the client end of a server's input and output.
type Peer struct {
	in  io.WriteCloser
	out chan struct{} // closed when the server's output ends

	mu      sync.Mutex
	waiting map[string]chan json.RawMessage // guarded by mu: reply id → where its reply goes
	bad     []string                        // guarded by mu: output lines that are not JSON
	seen    []string                        // guarded by mu: lines since the last Call, while one waits
	n       int                             // guarded by mu: ids used
}

// Start returns a Peer that writes to in and reads out until it ends.
func Start(in io.WriteCloser, out io.Reader) *Peer {
	p := &Peer{in: in, out: make(chan struct{}), waiting: make(map[string]chan json.RawMessage)}
	go p.read(out)
	return p
}

// Close closes the server's input and waits until its output ends, or
// fails after Timeout.
func (p *Peer) Close(tb testing.TB) {
	tb.Helper()
	p.in.Close()
	select {
	case <-p.out:
	case <-time.After(Timeout):
		tb.Errorf("the server's output did not end within %s of its input", Timeout)
	}
}

// Ended is closed when the server's output ends.
func (p *Peer) Ended() <-chan struct{} { return p.out }

func (p *Peer) read(out io.Reader) {
	defer close(p.out)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method json.RawMessage `json:"method"`
		}
		p.mu.Lock()
		if !json.Valid(line) {
			p.bad = append(p.bad, string(line))
		}
		if p.seen != nil {
			p.seen = append(p.seen, string(line))
		}
		var ch chan json.RawMessage
		if json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method == nil {
			ch = p.waiting[string(m.ID)]
			delete(p.waiting, string(m.ID))
		}
		p.mu.Unlock()
		if ch != nil {
			ch <- append(json.RawMessage(nil), line...)
		}
	}
	io.Copy(io.Discard, out)
}

// Send writes b and ends its last line, or fails if the server stops
// reading.
func (p *Peer) Send(tb testing.TB, b []byte) {
	tb.Helper()
	written := make(chan error, 1)
	go func() { // a Write the server never reads is ended by Close
		_, err := p.in.Write(append(b[:len(b):len(b)], '\n'))
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			tb.Fatalf("the server stopped reading: %v", err)
		}
	case <-p.out:
		tb.Fatalf("the server ended")
	case <-time.After(Timeout):
		tb.Fatalf("the server has not read a line for %s", Timeout)
	}
}

// Call sends a request with an id of the Peer's own and returns its
// reply, and the lines the server wrote meanwhile; it fails if there is
// no reply within Timeout.
func (p *Peer) Call(tb testing.TB, method, params string) (reply json.RawMessage, meanwhile []string) {
	tb.Helper()
	p.mu.Lock()
	p.n++
	id := fmt.Sprintf(`"peer-%d"`, p.n)
	return p.await(tb, id, []byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":`+params+`}`))
}

// Expect sends line, a request with the given id, and returns its reply
// as Call does.
func (p *Peer) Expect(tb testing.TB, id, line string) json.RawMessage {
	tb.Helper()
	p.mu.Lock()
	reply, _ := p.await(tb, id, []byte(line))
	return reply
}

// await is called with mu held.
func (p *Peer) await(tb testing.TB, id string, line []byte) (json.RawMessage, []string) {
	tb.Helper()
	ch := make(chan json.RawMessage, 1)
	p.waiting[id] = ch
	p.seen = []string{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.seen = nil
		delete(p.waiting, id)
		p.mu.Unlock()
	}()
	p.Send(tb, line)
	select {
	case reply := <-ch:
		p.mu.Lock()
		seen := p.seen
		p.mu.Unlock()
		return reply, seen
	case <-p.out:
		tb.Fatalf("the server ended before answering %.100s", line)
	case <-time.After(Timeout):
		tb.Fatalf("no reply within %s to %.100s", Timeout, line)
	}
	return nil, nil
}

// Bad returns the lines the server wrote that are not JSON.
func (p *Peer) Bad() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bad...)
}
