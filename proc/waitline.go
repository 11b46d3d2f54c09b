package proc

import (
	"bytes"
	"context"
	"regexp"

	"github.com/offstage/offstage/proc/internal/linefilter"
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
// that matches re (matched against the cleaned line; a nil re matches
// every line). It is woken by
// output as it arrives, never by polling. It returns when a line matches,
// when the process has finished and every line has been looked at (its
// last line counts without a newline; Found is then false), or when ctx
// ends (then it returns context.Cause(ctx) and a LineMatch whose Next says
// how far it got). A line longer than 256 KiB is looked at in pieces.
// Output that outruns the wait by more than the ring holds
// (Config.TailBytes) is read back from the log (Config.LogPath); without
// one, or past its cap, it is not looked at and is counted in Skipped: a
// command printing gigabytes a second can pass a line by. Safe for
// concurrent use; it consumes nothing.
func (p *Process) WaitLine(ctx context.Context, since int64, re *regexp.Regexp) (LineMatch, error) {
	var m LineMatch
	next, skipped, err := p.scanLines(ctx, since, re, func(line string, next int64) bool {
		m.Found, m.Line = true, line
		return false
	}, nil)
	m.Next, m.Skipped = next, skipped
	return m, err
}

// ScanLines calls fn with each line of the combined output, from cursor
// since on, that re matches, as the output arrives: m.Found is true, m.Line
// the cleaned line without its newline, m.Next the cursor after it. A nil
// re matches every line. fn is also called, with Found false, each time
// output passed out of reach before it was looked at (see WaitLine), with
// m.Skipped the bytes of it; its result is then ignored. ScanLines returns
// when fn returns false on a line (then Found, Line and Next are that
// line's), when the process has finished and every line was looked at (its
// last line counts without a newline), or when ctx ends (then it returns
// context.Cause(ctx)); its LineMatch says how far it got (Next) and how
// many bytes it skipped in all. It is woken by output, never by polling,
// consumes nothing, and calls fn from the calling goroutine. WaitLine is
// ScanLines stopped at the first match.
//
// How fast it reads depends on the pattern more than on the lines: a
// pattern such as `ERROR|panic:` runs the regexp package's NFA over every
// byte, about 15 MB/s on a loaded 2-core machine
// (BenchmarkCaptureWatchLog), so a command printing faster than that,
// beyond the 1 MiB ring, starts to pass a scan without a log by. (A shell
// task's notify_on watch, in package tools, is a ScanLines.)
func (p *Process) ScanLines(ctx context.Context, since int64, re *regexp.Regexp, fn func(m LineMatch) bool) (LineMatch, error) {
	var m LineMatch
	next, skipped, err := p.scanLines(ctx, since, re, func(line string, next int64) bool {
		if fn(LineMatch{Found: true, Line: line, Next: next}) {
			return true
		}
		m.Found, m.Line = true, line
		return false
	}, func(n int64) { fn(LineMatch{Skipped: n}) })
	m.Next, m.Skipped = next, skipped
	return m, err
}

// scanLines calls match with each line from cursor since on that re
// matches (cleaned, without its newline) and the cursor after it, until
// match returns false, the process has finished and every line was looked
// at (its last line counts without a newline), or ctx ends (then err is
// context.Cause(ctx)). skip, if set, is told of output that passed the
// ring before it was looked at. It returns the cursor after the last line looked
// at and the bytes the ring no longer held, which were not looked at. It
// is woken by output, never by polling.
func (p *Process) scanLines(ctx context.Context, since int64, re *regexp.Regexp, match func(line string, next int64) bool, skip func(n int64)) (next, skipped int64, err error) {
	p.serveSoon()
	next = since
	filter := linefilter.New(re)
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
		if p.grew == nil {
			p.grew = make(chan struct{})
		}
		grew := p.grew // taken before the read: output after it wakes us
		p.mu.Unlock()
		ch := p.readCombined(next, waitLineChunk)
		skipped += ch.Skipped
		if ch.Skipped > 0 && skip != nil {
			skip(ch.Skipped)
		}
		data, at := ch.Data, ch.Start
		for {
			if n := filter.Skip(data); n > 0 { // lines re cannot match: not cleaned, not matched
				data, at = data[n:], at+int64(n)
			}
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if line := Clean(data[:i]); (re == nil || re.MatchString(line)) && !match(line, at+int64(i)+1) {
				return at + int64(i) + 1, skipped, nil
			}
			data, at = data[i+1:], at+int64(i)+1
		}
		next = at // the start of an unfinished line, read again with its end
		switch {
		case ch.Next < ch.Total: // more is held already
			if len(data) > 0 && len(data) == len(ch.Data) {
				// No line ends in the chunk: a line longer than a chunk,
				// or one cut where what is held stops (the end of the
				// kept head, the log's cap; its rest is gone). Read again
				// from its start, it would come back the same, for ever
				// (an outsider's finding: a wait on a chatty shell spun a
				// core, and a table's Close waited on it): it is looked
				// at as it is, a piece, and passed.
				next = ch.Next
				if line := Clean(data); (re == nil || re.MatchString(line)) && !match(line, next) {
					return next, skipped, nil
				}
			}
			if ctx.Err() != nil { // a wait that catches up on much output still ends with ctx
				return next, skipped, context.Cause(ctx)
			}
			continue
		case finished:
			if len(data) > 0 {
				next = ch.Next
				if line := Clean(data); re == nil || re.MatchString(line) {
					match(line, next)
				}
			}
			return next, skipped, nil
		}
		select {
		case <-grew:
		case <-p.done:
		case <-ctx.Done():
			select {
			case <-p.done:
				continue // finished meanwhile: its last lines are looked at first
			default:
			}
			return next, skipped, context.Cause(ctx)
		}
	}
}
