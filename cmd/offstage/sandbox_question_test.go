package main

import (
	"strings"
	"testing"
)

// TestTheEscalationQuestionShowsWhatRuns (an outsider's finding): the
// question that lets a command run outside the sandbox printed it raw, so
// "\r\x1b[2K" erased its dangerous start from the screen and the user
// approved "ls -la"; and it cut the command at 400 bytes, hiding its end.
// Now control and direction characters are written out, every line is
// shown, and what is not shown is counted.
func TestTheEscalationQuestionShowsWhatRuns(t *testing.T) {
	spoof := "touch /tmp/x; echo #\r\x1b[2K  ls -la\x1b[8m\u202eevil"
	q := escalation{command: spoof}.question()
	for _, want := range []string{`touch /tmp/x; echo #\x0d\x1b[2K  ls -la\x1b[8m\u202eevil`} {
		if !strings.Contains(q, want) {
			t.Errorf("question = %q, want it to show %q", q, want)
		}
	}
	if strings.ContainsAny(q, "\r\x1b\u202e") {
		t.Errorf("question = %q: it holds raw control characters", q)
	}
	long := strings.Repeat("a", 3990) + "; rm -rf ~/src" + strings.Repeat("b", 996)
	q = escalation{command: long}.question()
	if !strings.Contains(q, "1000 more bytes not shown") {
		t.Errorf("a 5000-byte command: the question does not count what it leaves out:\n%s", q[len(q)-200:])
	}
	q = escalation{command: "make build\nmake install"}.question()
	if !strings.Contains(q, "  make build\n  make install") {
		t.Errorf("question = %q, want each line shown", q)
	}
}

// TestSafeWriterKeepsEscapesOffTheTerminal (an outsider's finding):
// tasks follow printed a task's output raw to the operator's terminal,
// where "\x1b]52;c;…\a" set the clipboard and "\x1b[2J" cleared the
// screen; tasks show printed labels and cancel reasons raw. What reaches
// a terminal now has no control character but lines and tabs, also when
// a two-byte C1 control (U+009B, a CSI) is split across writes; text is
// otherwise kept, UTF-8 included.
func TestSafeWriterKeepsEscapesOffTheTerminal(t *testing.T) {
	var b strings.Builder
	w := &safeWriter{w: &b}
	for _, chunk := range []string{"before\x1b]52;c;cHduZWQ=\x07\x1b[2Jafter\n", "caf\xc3", "\xa9 \xc2", "\x9b31m red\tok\r\n", "\u202espoof\n"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	want := "before]52;c;cHduZWQ=[2Jafter\ncafé 31m red\tok\n\u202espoof\n"
	if got := b.String(); got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	if got := safeText("a\u202eb\x1b[2Jc"); got != "ab[2Jc" {
		t.Errorf("safeText = %q", got)
	}
}
