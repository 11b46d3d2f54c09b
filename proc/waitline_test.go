package proc_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
)

// TestWaitLine: a server prints a line some time after it starts; the
// wait returns with it, woken by the output; waiting again from the
// cursor it gave does not find the same line; the end of the process
// ends a wait that found nothing, and its last line counts without a
// newline.
func TestWaitLine(t *testing.T) {
	p := mustStart(t, proc.Config{Command: `echo starting; sleep 0.3; printf '\033[32mlistening on :8080\033[0m\n'; read _; printf 'ready?'`, Stdin: true})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m, err := p.WaitLine(ctx, 0, regexp.MustCompile(`listening on`))
	if err != nil || !m.Found || m.Line != "listening on :8080" {
		t.Fatalf("WaitLine = %+v, %v; want the cleaned line", m, err)
	}
	if got := string(p.Read(proc.Combined, 0, 1000).Data); m.Next != int64(len(got)) {
		t.Errorf("Next = %d, want %d (just after the line)", m.Next, len(got))
	}
	short, stop := context.WithTimeout(ctx, 200*time.Millisecond)
	again, err := p.WaitLine(short, m.Next, regexp.MustCompile(`listening on`))
	stop()
	if err == nil || again.Found || again.Next != m.Next {
		t.Errorf("waiting again from Next = %+v, %v; want no match and a timeout", again, err)
	}
	// A line printed before the wait starts is found.
	early, err := p.WaitLine(ctx, 0, regexp.MustCompile(`^starting$`))
	if err != nil || !early.Found {
		t.Errorf("WaitLine for an earlier line = %+v, %v", early, err)
	}
	p.CloseInput(t.Context()) // read returns: it prints "ready?" without a newline and exits
	last, err := p.WaitLine(ctx, m.Next, regexp.MustCompile(`ready\?`))
	if err != nil || !last.Found || last.Line != "ready?" {
		t.Errorf("WaitLine for the unfinished last line = %+v, %v", last, err)
	}
	none, err := p.WaitLine(ctx, 0, regexp.MustCompile(`never printed`))
	if err != nil || none.Found || none.Next != p.Written() {
		t.Errorf("WaitLine after exit with no match = %+v, %v; want not found, at the end", none, err)
	}
	mustWait(t, p)
}

// TestWaitLineLongOutput: a match far into output that arrives in many
// pieces, past the in-memory ring: the wait still finds it.
func TestWaitLineLongOutput(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "seq 1 200000; echo the end", TailBytes: 64 << 10, HeadBytes: 1 << 10})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m, err := p.WaitLine(ctx, 0, regexp.MustCompile(`^the end$`))
	if err != nil || !m.Found || !strings.Contains(m.Line, "the end") {
		t.Fatalf("WaitLine = %+v, %v", m, err)
	}
	mustWait(t, p)
}

// TestScanLines: every line with a nil pattern, in order, as it arrives,
// the last one without its newline; a scan stopped by its callback says
// where; output that passed the ring unread is told as it is found.
func TestScanLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	p := mustStart(t, proc.Config{Command: `echo one; sleep 0.1; echo two; printf three`})
	var lines []string
	end, err := p.ScanLines(ctx, 0, nil, func(m proc.LineMatch) bool {
		lines = append(lines, m.Line)
		return true
	})
	if err != nil || end.Found || end.Next != int64(len("one\ntwo\nthree")) || strings.Join(lines, ",") != "one,two,three" {
		t.Errorf("ScanLines = %+v, %v, lines %q; want one, two, three to the end", end, err, lines)
	}
	stopped, err := p.ScanLines(ctx, 0, regexp.MustCompile(`^t`), func(m proc.LineMatch) bool { return false })
	if err != nil || !stopped.Found || stopped.Line != "two" || stopped.Next != int64(len("one\ntwo\n")) {
		t.Errorf("ScanLines stopped at the first match = %+v, %v; want two", stopped, err)
	}
	// 4 MiB through a 4 KiB ring, no log: the scan is told what it missed.
	q := mustStart(t, proc.Config{Command: `yes | head -c 4194304`, HeadBytes: 4 << 10, TailBytes: 4 << 10})
	mustWait(t, q)
	var told int64
	all, err := q.ScanLines(ctx, 0, regexp.MustCompile(`never`), func(m proc.LineMatch) bool {
		if m.Found {
			t.Errorf("matched %q", m.Line)
		}
		told += m.Skipped
		return true
	})
	if err != nil || all.Skipped == 0 || told != all.Skipped {
		t.Errorf("ScanLines past the ring = %+v, %v, told %d; want the skipped bytes told as they were found", all, err, told)
	}
}

// TestWaitLineOverALineCutWhereTheHeldOutputStops: a wait from the start
// of output whose kept head ends in the middle of a line, past which the
// output was not held, ends with its ctx, and the line cut there is looked
// at as a piece. Before, the wait read the piece again and again, for
// ever, spinning a core (an outsider's finding: 23-byte lines, 3 MB).
func TestWaitLineOverALineCutWhereTheHeldOutputStops(t *testing.T) {
	const head, line = 64 << 10, "a line of 22 bytes..." // 22 bytes with its newline: the head ends 20 bytes into one
	p := mustStart(t, proc.Config{Command: `yes '` + line + `' | head -c 3000000; echo; echo last; sleep 30`, HeadBytes: head})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := p.WaitLine(ctx, 0, regexp.MustCompile(`^last$`)); err != nil {
		t.Fatal(err)
	}
	// Everything is out: a wait from 0 reads the head, then the tail.
	short, cancelShort := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancelShort()
	m, err := p.WaitLine(short, 0, regexp.MustCompile(`never printed`))
	if !errors.Is(err, context.DeadlineExceeded) || m.Found || m.Next < 3000000 {
		t.Errorf("WaitLine for a line never printed = %+v, %v; want the deadline, past the output", m, err)
	}
	// The piece at the head's end is looked at, and passed.
	cut := head % (len(line) + 1)
	piece, err := p.WaitLine(ctx, head-int64(cut), regexp.MustCompile(`^a line of`))
	if err != nil || !piece.Found || piece.Line != line[:cut] || piece.Next != head {
		t.Errorf("WaitLine at the head's end = %+v, %v; want the piece %q, then the head's end", piece, err, line[:cut])
	}
}
