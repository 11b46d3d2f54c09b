package proc

import (
	"context"
	"testing"
	"time"
)

// Two looks at a process in one long read find the same reader; a look
// after it ran (it read a line and echoed it) finds another, though the
// process is in a read again: so the kernel rule's second look tells a
// program that waits for its input from one that reads it often and
// works between its reads (an outsider's finding: a busy program that
// polled its input with short reads was marked waiting).
func TestASecondLookTellsTheSameRead(t *testing.T) {
	ctx := t.Context()
	p, err := Start(ctx, Config{Command: "cat", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait(context.Background())
	defer p.Stop(time.Second)
	blocked := func() reader {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if r, ok := p.blockedReading(); ok {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatal("cat is never seen reading its input")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first := blocked()
	if again := blocked(); again != first {
		t.Errorf("two looks at one read: %+v, then %+v", first, again)
	}
	if first.name != "cat" || first.pid == 0 {
		t.Errorf("the reader is %+v, want cat", first)
	}
	if _, err := p.Input(ctx, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitOutput(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if after := blocked(); after == first {
		t.Errorf("a read after cat ran looks like the first: %+v", after)
	}
	if err := p.CloseInput(ctx); err != nil {
		t.Fatal(err)
	}
}
