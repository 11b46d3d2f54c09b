package mcpserver

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
