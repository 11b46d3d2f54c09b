package proc_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
)

func waitFor(t *testing.T, p *proc.Process, from int64, pattern string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	m, err := p.WaitLine(ctx, from, regexp.MustCompile(pattern))
	if err != nil || !m.Found {
		t.Fatalf("no line matching %q (%+v, %v); output:\n%s", pattern, m, err, proc.Clean(p.Read(proc.Combined, 0, 1<<20).Data))
	}
	return m.Next
}

// TestTTY: a shell on a terminal sees one, is driven by input, a Ctrl-C
// interrupts the job in its foreground without ending it, and cancelling
// reaps it.
func TestTTY(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "exec sh -i", TTY: true, TTYCols: 100, TTYRows: 30})
	ctx := t.Context()
	input := func(s string) {
		t.Helper()
		if _, err := p.Input(ctx, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	// The terminal echoes what is typed, and the shell's prompt starts
	// lines: the values to look for are computed, so the echo cannot
	// match them.
	input("test -t 0 && test -t 1 && echo TTY-$((2+3)); stty size; echo TERM=$TERM\n")
	at := waitFor(t, p, 0, `TTY-5$`)
	at = waitFor(t, p, at, `(^|\s)30 100$`)
	at = waitFor(t, p, at, `TERM=xterm-256color$`)
	// Ctrl-C ends the foreground sleep, not the shell: the next command
	// runs at once, which it could not while a 100 s sleep ran.
	input("sleep 100\n")
	// Ctrl-C goes to the terminal's foreground group: wait until the job
	// is it (the shell's tpgid is no longer its own group).
	for deadline := time.Now().Add(20 * time.Second); foreground(p.PID()) == p.PID(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sleep never became the foreground job")
		}
	}
	input("\x03")
	input("echo STILL-$((1+1))\n")
	waitFor(t, p, at, `STILL-2$`)
	if n := p.Processes(); n != 1 {
		t.Errorf("Processes() = %d after the sleep was interrupted, want the shell alone", n)
	}
	p.Stop(time.Second)
	e := mustWait(t, p)
	if !e.Stopped || e.Contained.Survivors != 0 {
		t.Errorf("Exit = %+v", e)
	}
}

// TestTTYEndOfInput: CloseInput sends end of file to a program reading
// the terminal.
func TestTTYEndOfInput(t *testing.T) {
	p := mustStart(t, proc.Config{Command: "cat; echo CAT-ENDED", TTY: true})
	if _, err := p.Input(t.Context(), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	at := waitFor(t, p, 0, `^hello$`)
	if err := p.CloseInput(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, at, `CAT-ENDED`)
	if e := mustWait(t, p); e.Code != 0 {
		t.Errorf("Exit = %+v", e)
	}
	if out := proc.Clean(p.Read(proc.Combined, 0, 1<<20).Data); !strings.Contains(out, "hello") {
		t.Errorf("output = %q", out)
	}
}

// foreground returns the foreground process group of pid's terminal
// (tpgid, from /proc/PID/stat), or 0.
func foreground(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(fields) < 6 {
		return 0
	}
	n, _ := strconv.Atoi(fields[5])
	return n
}
