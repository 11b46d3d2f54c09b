//go:build unix

package main

import (
	"os"
	"sync"
	"testing"
	"time"
)

// closer records a Close.
type closer struct {
	once   sync.Once
	closed chan struct{}
}

func (c *closer) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// A relay whose client dies (the read end of its stdout closes) drops
// its connection to the supervisor at once, before any answer comes:
// the supervisor's write of that answer fails, and the results it
// carries are taken back instead of lost in the relay.
func TestTheRelayDropsTheConnectionWhenItsClientGoes(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	c := &closer{closed: make(chan struct{})}
	stop := closeWhenReaderGone(pw, c)
	defer stop()
	pr.Close()
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not closed after the client's end of stdout closed")
	}
}

// While the client reads, the connection stays; stop ends the watch.
func TestTheRelayKeepsTheConnectionWhileItsClientReads(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	c := &closer{closed: make(chan struct{})}
	stop := closeWhenReaderGone(pw, c)
	if _, err := pw.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	stop()
	select {
	case <-c.closed:
		t.Fatal("the connection was closed while the client was there")
	default:
	}
}
