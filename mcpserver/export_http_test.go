package mcpserver

import "time"

// IdleTracked counts the HTTP sessions the handlers' idle trackers hold.
func (s *Service) IdleTracked() int {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	n := 0
	for _, t := range idle {
		t.mu.Lock()
		n += len(t.byID)
		t.mu.Unlock()
	}
	return n
}

// SDKLogger is the logger the SDK is given.
var SDKLogger = sdkLogger

// TrackedPosts counts, over every HTTP session, the tools/call POSTs whose
// answers are tracked (answers.posts) and the receipts held for them.
func (s *Service) TrackedPosts() (posts, held int) {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	for _, t := range idle {
		t.mu.Lock()
		for _, e := range t.byID {
			if a := e.answers; a != nil {
				a.mu.Lock()
				posts += len(a.posts)
				held += len(a.held)
				a.mu.Unlock()
			}
		}
		t.mu.Unlock()
	}
	return posts, held
}

// Unlist takes every session's live shells out of resources/list, as
// they were before follow had listed them: what a client that lists
// right after bash returns could meet.
func (s *Service) Unlist() {
	s.mu.Lock()
	var conns []*conn
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.listMu.Lock()
		c.mu.Lock()
		var uris []string
		for uri := range c.listed {
			uris = append(uris, uri)
			delete(c.listed, uri)
		}
		c.mu.Unlock()
		c.server.RemoveResources(uris...)
		c.listMu.Unlock()
	}
}

// SetBodyWait sets how long a POST's body may take (bodyWait) for a test,
// which puts it back with the function returned.
func SetBodyWait(d time.Duration) (restore func()) {
	was := bodyWait
	bodyWait = d
	return func() { bodyWait = was }
}
