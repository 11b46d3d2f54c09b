package proc_test

import (
	"context"
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
