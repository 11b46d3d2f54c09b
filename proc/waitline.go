package proc

import (
	"bytes"
	"context"
	"regexp"
)

// waitLineChunk bounds each read WaitLine makes of the output.
const waitLineChunk = 256 << 10

// LineMatch is what WaitLine found.
type LineMatch struct {
	// Found says a line matched; Line is it, cleaned (see Clean), without
	// its newline.
	Found bool
	Line  string
	// Next is the cursor just after the matched line, or, when nothing
	// matched, after the last complete line read: wait again from it and
	// no line is looked at twice.
	Next int64
	// Skipped counts bytes the ring no longer held, which were not looked
	// at.
	Skipped int64
}

// WaitLine waits for a line of the combined output, from cursor since on,
// that matches re (matched against the cleaned line). It is woken by
// output as it arrives, never by polling. It returns when a line matches,
// when the process has finished and every line has been looked at (its
// last line counts without a newline; Found is then false), or when ctx
// ends (then it returns context.Cause(ctx) and a LineMatch whose Next says
// how far it got). A line longer than 256 KiB is looked at in pieces.
// Output that outruns the wait by more than the ring holds
// (Config.TailBytes) is not looked at and is counted in Skipped: a
// command printing gigabytes a second can pass a line by. Safe for
// concurrent use; it consumes nothing.
func (p *Process) WaitLine(ctx context.Context, since int64, re *regexp.Regexp) (LineMatch, error) {
	m := LineMatch{Next: since}
	for {
		// Finished is looked at before the read: output is all captured
		// before done is closed, so a read after it misses nothing.
		finished := false
		select {
		case <-p.done:
			finished = true
		default:
		}
		p.mu.Lock()
		ch := p.out.read(m.Next, waitLineChunk)
		if p.grew == nil {
			p.grew = make(chan struct{})
		}
		grew := p.grew
		p.mu.Unlock()
		m.Skipped += ch.Skipped
		data, at := ch.Data, ch.Start
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if line := Clean(data[:i]); re.MatchString(line) {
				m.Found, m.Line, m.Next = true, line, at+int64(i)+1
				return m, nil
			}
			data, at = data[i+1:], at+int64(i)+1
		}
		m.Next = at // the start of an unfinished line, read again with its end
		switch {
		case ch.Next < ch.Total:
			if len(data) == len(ch.Data) && len(data) == waitLineChunk {
				m.Next = ch.Next // one line longer than a chunk: look at it in pieces
			}
			continue // more is held already
		case finished:
			if len(data) > 0 {
				if line := Clean(data); re.MatchString(line) {
					m.Found, m.Line = true, line
				}
				m.Next = ch.Next
			}
			return m, nil
		}
		select {
		case <-grew:
		case <-p.done:
		case <-ctx.Done():
			return m, context.Cause(ctx)
		}
	}
}
