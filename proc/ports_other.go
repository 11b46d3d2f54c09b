//go:build !linux

package proc

// Ports returns the TCP ports the command's processes listen on: this
// system has no /proc to find them in, so none.
func (p *Process) Ports() []int { return nil }

// ListeningPorts returns the TCP ports anything listens on: this system
// has no /proc to find them in, so none.
func ListeningPorts() []int { return nil }
