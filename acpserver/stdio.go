package acpserver

import (
	"io"
	"time"
)

// maxLine bounds one message from the client: the SDK's own limit is
// 10 MiB, past which it would drop the connection, so longer lines are
// answered and skipped before it sees them (internal/rpcline).
const maxLine = 10<<20 - 1

// DrainGrace bounds how long, once the client's input ends, the requests
// already read may take to be answered before they are answered
// "abandoned" and the sessions close.
const DrainGrace = 5 * time.Second

// gated holds its reader's first Read until open. The SDK starts reading
// in NewAgentSideConnection, and its SetLogger writes a field that reading
// uses without a lock: holding the first read until the logger is set
// orders the two.
type gated struct {
	r     io.Reader
	ready chan struct{}
}

func gate(r io.Reader) *gated { return &gated{r: r, ready: make(chan struct{})} }

func (g *gated) open() { close(g.ready) }

func (g *gated) Read(p []byte) (int, error) {
	<-g.ready
	return g.r.Read(p)
}
