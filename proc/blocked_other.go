//go:build !linux

package proc

// blockedReading reports whether one of the command's processes is blocked
// reading its input: this system has no /proc to tell, so the prompt-line
// rule alone applies.
func (p *Process) blockedReading() (string, bool) { return "", false }
