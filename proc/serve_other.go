//go:build !linux

package proc

// serveInline is false here: the inline reaper needs a pidfd (Linux).
func serveInline(Config) bool { return false }

func (p *Process) serve(*streams) {}
