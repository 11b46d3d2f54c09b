package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// watchOutput posts the lines of p's output that match opts.NotifyOn to h's
// owner as notices, batched and rate-limited as ShellOptions says, until
// the process has finished and every line was looked at (then what is
// pending goes out before the result) or the watch has posted its last
// notice.
//
// Output the watch could not look at (it passed the ring, and the log if
// any, before the watch read it) is said too, with the number of bytes:
// the first time, in a notice of its own even if no line matched, so a
// silent watch never means a blind one; after that on the next notice,
// and, if the output ends with bytes still unsaid, in a last one. The
// amounts across notices add up to every byte the watch skipped.
func watchOutput(h *task.Handle, p *proc.Process, opts ShellOptions) {
	var (
		mu      sync.Mutex
		lines   []string // matched, not yet posted
		more    int      // matched beyond opts.WatchLines, not yet posted
		skipped int64    // bytes the watch could not look at, not yet said
		blind   bool     // a notice has said the watch skipped output
		sent    int      // notices posted
		first   = make(chan struct{}, 1)
	)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// post sends what is pending; it reports false once the watch is over.
	// Skipped bytes alone make a notice the first time, and at the end
	// (final).
	post := func(final bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if len(lines) == 0 && (skipped == 0 || blind && !final) {
			return sent < opts.WatchNotices
		}
		sent++
		var b strings.Builder
		if len(lines) > 0 {
			fmt.Fprintf(&b, "%s printed %s matching %q:\n%s", h.ID(), text.Plural(len(lines)+more, "line"), opts.NotifyOn, strings.Join(lines, "\n"))
			if more > 0 {
				fmt.Fprintf(&b, "\n…and %d more (at most %d lines per notice).", more, opts.WatchLines)
			}
			if skipped > 0 {
				b.WriteString("\n")
			}
		}
		if skipped > 0 {
			further := ""
			if blind {
				further = "a further "
			}
			fmt.Fprintf(&b, "The watch of %s for %q could not look at %s%d bytes of its output: they came faster than it reads and were no longer kept. Lines there that matched went unnoticed; read the output to be sure.", h.ID(), opts.NotifyOn, further, skipped)
			blind = true
		}
		if sent == opts.WatchNotices {
			fmt.Fprintf(&b, "\nThis was the watch's last notice (at most %d per task); read further matches from its output.", opts.WatchNotices)
			stop()
		}
		h.Notify(NoticeWatch, b.String())
		lines, more, skipped = nil, 0, 0
		return sent < opts.WatchNotices
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		p.ScanLines(ctx, 0, opts.NotifyOn, func(m proc.LineMatch) bool {
			mu.Lock()
			tell := true
			switch {
			case !m.Found:
				skipped += m.Skipped
				tell = !blind
			case len(lines) < opts.WatchLines:
				lines = append(lines, shortLine(m.Line))
			default:
				more++
			}
			mu.Unlock()
			if tell {
				select {
				case first <- struct{}{}:
				default:
				}
			}
			return true
		})
	}()
	var last time.Time // when the last notice went out
	for {
		select {
		case <-first:
		case <-scanned:
			post(true)
			return
		}
		wait := opts.WatchBatch
		if !last.IsZero() {
			wait = max(wait, opts.WatchEvery-time.Since(last))
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-scanned:
			timer.Stop()
			post(true)
			return
		}
		last = time.Now()
		if !post(false) {
			<-scanned
			return
		}
	}
}

// maxWatchLineBytes cuts each line a watch posts.
const maxWatchLineBytes = 300

func shortLine(s string) string {
	if len(s) <= maxWatchLineBytes {
		return s
	}
	return strings.ToValidUTF8(s[:maxWatchLineBytes], "") + "…"
}
