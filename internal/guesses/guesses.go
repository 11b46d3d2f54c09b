// Package guesses bounds how fast a token can be guessed: it counts the
// wrong tokens each host sends, and refuses a host's tries once it has
// sent Max wrong ones within Window, until that window has passed. The
// dashboard's login and offstage mcp --http's bearer token both use it, so
// that a token a user chose short (OFFSTAGE_MCP_TOKEN) is not guessed at
// network speed.
package guesses

import (
	"sync"
	"time"
)

const (
	// Max wrong tokens from one host within Window stop its tries.
	Max    = 10
	Window = time.Minute
	// maxHosts bounds the hosts remembered; past it the expired go first,
	// else any.
	maxHosts = 4096
)

// Counter counts wrong tokens per host. The zero value is ready; it is
// safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	hosts map[string]*host // guarded by mu
}

type host struct {
	n     int
	since time.Time
}

// Take says whether host may try a token now, and if so counts the try as
// wrong until Forgive says it was right: checking the count and counting
// are one step, so that 300 tries at once from one host are still at most
// Max guesses (checked, then counted after the comparison, they were 11
// and more).
func (c *Counter) Take(h string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hosts == nil {
		c.hosts = make(map[string]*host)
	}
	w := c.hosts[h]
	if w == nil || now.Sub(w.since) >= Window {
		if w == nil && len(c.hosts) >= maxHosts {
			for k, x := range c.hosts { // bounded: drop what has expired, else one
				if now.Sub(x.since) >= Window || len(c.hosts) >= maxHosts {
					delete(c.hosts, k)
				}
			}
		}
		w = &host{since: now}
		c.hosts[h] = w
	}
	if w.n >= Max {
		return false
	}
	w.n++
	return true
}

// Forgive uncounts a try of host's that Take counted, whose token was
// right.
func (c *Counter) Forgive(h string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.hosts[h]; w != nil && w.n > 0 {
		w.n--
	}
}

// remembered is how many hosts c holds (tests).
func (c *Counter) remembered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.hosts)
}
