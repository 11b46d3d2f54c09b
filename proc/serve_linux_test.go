package proc_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
)

// A process with pipes is served inline (one goroutine polls its pipes
// and a pidfd of its leader) while blocking waits are free, and by
// readers and a reaper otherwise; without a pidfd, the inline reaper
// looks for the exit itself. The behaviour tests that use pipes hold
// each way.
func TestTheWaysAProcessIsServed(t *testing.T) {
	behaviours := []struct {
		name string
		test func(*testing.T)
	}{
		{"StopKillsTheWholeGroup", TestStopKillsTheWholeGroup},
		{"LeaderExitingKillsWhatIsLeft", TestLeaderExitingKillsWhatIsLeft},
		{"WaitDoesNotHangOnUnmarkedPipeHolders", TestWaitDoesNotHangOnUnmarkedPipeHolders},
		{"IgnoringSIGTERMGetsSIGKILLAfterGrace", TestIgnoringSIGTERMGetsSIGKILLAfterGrace},
		{"ExitCodesAndSignals", TestExitCodesAndSignals},
		{"OutputComesBackInTheOrderWritten", TestOutputComesBackInTheOrderWritten},
		{"StreamsAreSeparateAndInterleaved", TestStreamsAreSeparateAndInterleaved},
		{"WaitOutputFollowsTheOutput", TestWaitOutputFollowsTheOutput},
		{"CommandWithoutInputHasDevNull", TestCommandWithoutInputHasDevNull},
		{"LastWordsDuringAStopAreRead", TestLastWordsDuringAStopAreRead},
	}
	for _, way := range []struct {
		name          string
		inline, pidfd bool
	}{{"inline", true, true}, {"inline-without-pidfd", true, false}, {"readers-and-reaper", false, true}} {
		t.Run(way.name, func(t *testing.T) {
			restore, before := proc.InlineReaper(way.inline, way.pidfd)
			defer restore()
			for _, b := range behaviours {
				t.Run(b.name, b.test)
			}
			_, after := proc.InlineReaper(way.inline, way.pidfd)
			if served := after - before; (served > 0) != way.inline {
				t.Errorf("%d processes served inline", served)
			}
		})
	}
}

// A terminal, and output copied to a writer, are served by readers and a
// reaper: the inline reaper polls pipes whose output goes nowhere else.
func TestATerminalIsNotServedInline(t *testing.T) {
	restore, before := proc.InlineReaper(true, true)
	defer restore()
	p := mustStart(t, proc.Config{Command: "echo hi", TTY: true})
	mustWait(t, p)
	if _, after := proc.InlineReaper(true, true); after != before {
		t.Errorf("a terminal was served inline")
	}
}

// A program that starts a command and waits for it has it served on the
// goroutine that waits, as os/exec's Run does, with a context that can
// end or not: no goroutine of its own, no thread woken to run one.
func TestAWaitServesItsOwnProcess(t *testing.T) {
	restore, _ := proc.InlineReaper(true, true)
	defer restore()
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		wait, look, sweeper := proc.ServedBy()
		p, err := proc.Start(context.Background(), proc.Config{Command: "echo hi; exit 3"})
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.Wait(ctx)
		if err != nil || e.Code != 3 {
			t.Fatalf("Wait = %+v, %v; want exit 3", e, err)
		}
		if got := string(p.Read(proc.Stdout, 0, 0).Data); got != "hi\n" {
			t.Errorf("output %q, want %q", got, "hi\n")
		}
		w, l, s := proc.ServedBy()
		if w-wait != 1 || l != look || s != sweeper {
			t.Errorf("served by a Wait %d, a look %d, the sweeper %d; want by the Wait alone", w-wait, l-look, s-sweeper)
		}
	}
}

// A process nobody looks at is served all the same, by the sweeper: its
// output read, its leader reaped, its exit kept for a later look.
func TestAProcessNobodyLooksAtIsServed(t *testing.T) {
	restore, _ := proc.InlineReaper(true, true)
	defer restore()
	_, look, sweeper := proc.ServedBy()
	p, err := proc.Start(context.Background(), proc.Config{Command: "echo unseen; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	e := waitEnded(t, p)
	_, l, s := proc.ServedBy()
	if s-sweeper != 1 || l != look {
		t.Errorf("served by a look %d, the sweeper %d; want by the sweeper", l-look, s-sweeper)
	}
	if e.Code != 4 {
		t.Errorf("Exit = %+v; want exit 4", e)
	}
	if got := string(p.Read(proc.Stdout, 0, 0).Data); got != "unseen\n" {
		t.Errorf("output %q, want %q", got, "unseen\n")
	}
}

// A Wait whose context ends returns while the command runs on, and the
// rest of its serving goes on in a goroutine of its own: the output that
// comes after is read, the leader reaped with nobody waiting. A Wait
// whose context has ended before it begins serves nothing.
func TestAWaitThatGivesUpLeavesItsProcessServed(t *testing.T) {
	restore, _ := proc.InlineReaper(true, true)
	defer restore()
	p, err := proc.Start(context.Background(), proc.Config{Command: "echo early; read _; echo late; exit 5", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0); p.Wait(context.Background()) })
	wait, look, _ := proc.ServedBy()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Wait(ended); err != context.Canceled {
		t.Fatalf("Wait with an ended context = %v, want %v", err, context.Canceled)
	}
	if w, l, _ := proc.ServedBy(); w != wait || l-look != 1 {
		t.Errorf("after a Wait whose context had ended: served by a Wait %d, a look %d; want by a look", w-wait, l-look)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want %v", err, context.DeadlineExceeded)
	}
	if _, err := p.Input(context.Background(), []byte("go on\n")); err != nil {
		t.Fatal(err)
	}
	if e := waitEnded(t, p); e.Code != 5 {
		t.Errorf("Exit = %+v; want exit 5", e)
	}
	if got := string(p.Read(proc.Stdout, 0, 0).Data); got != "early\nlate\n" {
		t.Errorf("output %q, want %q", got, "early\nlate\n")
	}

	// The same, the Wait serving first: it gives up, and a goroutine
	// takes over.
	p, err = proc.Start(context.Background(), proc.Config{Command: "echo early; read _; echo late; exit 6", Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0); p.Wait(context.Background()) })
	wait, look, sweeper := proc.ServedBy()
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want %v", err, context.DeadlineExceeded)
	}
	if w, l, s := proc.ServedBy(); w-wait != 1 || l != look || s != sweeper {
		t.Errorf("served by a Wait %d, a look %d, the sweeper %d; want by the Wait", w-wait, l-look, s-sweeper)
	}
	if got := string(p.Read(proc.Stdout, 0, 0).Data); got != "early\n" {
		t.Errorf("output %q while the command reads, want %q", got, "early\n")
	}
	if _, err := p.Input(context.Background(), []byte("go on\n")); err != nil {
		t.Fatal(err)
	}
	if e := waitEnded(t, p); e.Code != 6 {
		t.Errorf("Exit = %+v; want exit 6", e)
	}
	if got := string(p.Read(proc.Stdout, 0, 0).Data); got != "early\nlate\n" {
		t.Errorf("output %q, want %q", got, "early\nlate\n")
	}
}

// waitEnded waits, without a look at p, until its leader is reaped
// (/proc has no such process any more), and then for p's end: the
// server that reaped it records the exit after, with the last of the
// output, so the exit can lag the reaping a little (a CI run found
// Exit not done yet). p is served already, so the Wait serves nothing.
func waitEnded(t *testing.T, p *proc.Process) proc.Exit {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(p.PID())); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not reaped after 10 s", p.PID())
		}
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	e, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("process %d reaped, but not done after 10 s: %v", p.PID(), err)
	}
	return e
}

// A process whose context has ended by the time Start sets it up is
// stopped at once, from another goroutine, while Start goes on: it is
// served all the same, by the sweeper, nobody looking.
func TestAStartWhoseContextHasEndedIsServed(t *testing.T) {
	restore, _ := proc.InlineReaper(true, true)
	defer restore()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := proc.Start(ctx, proc.Config{Command: "exec sleep 1000"})
	if err != nil {
		t.Fatal(err)
	}
	if e := waitEnded(t, p); !e.Stopped || e.Cause != context.Canceled {
		t.Errorf("Exit = %+v; want stopped by the context's end", e)
	}
}

// A Wait whose context ends returns, even while the output waits for a
// log whose disk is behind (here a FIFO nobody reads, as a hung network
// mount would be): it does not serve its process itself, where queueing
// for the log blocks beyond its context's reach (an outsider's finding:
// it still blocked after 3 s).
func TestAWaitReturnsWhenItsContextEndsWhileTheLogIsBehind(t *testing.T) {
	for _, inline := range []bool{true, false} {
		t.Run(map[bool]string{true: "inline", false: "readers-and-reaper"}[inline], func(t *testing.T) {
			restore, _ := proc.InlineReaper(inline, true)
			defer restore()
			fifo := filepath.Join(t.TempDir(), "log")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			// Open for reading and writing, so the log's open does not
			// wait, and never read until the end: its writes block once
			// the FIFO is full.
			hold, err := os.OpenFile(fifo, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Close()
			p, err := proc.Start(context.Background(), proc.Config{Command: "exec yes", LogPath: fifo, LogReserveBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				p.Stop(0)
				go io.Copy(io.Discard, hold) // the log drains, the process ends
				p.Wait(context.Background())
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			waited := make(chan error, 1)
			go func() { _, err := p.Wait(ctx); waited <- err }()
			select {
			case err := <-waited:
				if err != context.DeadlineExceeded {
					t.Errorf("Wait = %v, want %v", err, context.DeadlineExceeded)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Wait with a context of 200 ms still blocked after 10 s (%d bytes written)", p.Written())
			}
		})
	}
}
