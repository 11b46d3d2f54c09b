package agent

// ResetHistory empties the top level's conversation (benchmarks reuse a
// session without measuring an ever-growing history).
func ResetHistory(s *Session) {
	s.top.hist.mu.Lock()
	defer s.top.hist.mu.Unlock()
	s.top.hist.msgs, s.top.hist.bytes = nil, 0
}

// NarrowSandbox is the sandbox of p's shells under the session's s.
var NarrowSandbox = Profile.narrowSandbox
