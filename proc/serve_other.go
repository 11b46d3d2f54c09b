//go:build !linux

package proc

import "context"

// serveInline is false here: the inline reaper needs a pidfd (Linux).
func serveInline(Config) bool { return false }

// server is the inline reaper's state, which this system does not have.
type server struct{}

func (p *Process) startServing(*streams)         {}
func (p *Process) serveSoon()                    {}
func (p *Process) serveHere(ctx context.Context) {}
