//go:build !linux

package proc

// blockedReading reports whether one of the command's processes is blocked
// reading its input: this system has no /proc to tell, so the prompt-line
// rule alone applies.
func (p *Process) blockedReading() (reader, bool) { return reader{}, false }

// reader is a process found reading its input (never, here).
type reader struct {
	name string
	pid  int
	ran  uint64
}
