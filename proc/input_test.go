package proc_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
)

// TestInputBehindABlockedWriteHonoursItsContext pins review finding M1:
// the stdin lock was held across a blocking write, so a later Input
// waited for the first writer's context and ignored its own, and
// CloseInput (on a terminal a Ctrl-D written with no deadline) hung
// behind it. A process that stops reading must not hang later callers.
func TestInputBehindABlockedWriteHonoursItsContext(t *testing.T) {
	for _, tty := range []bool{false, true} {
		name := "pipe"
		if tty {
			name = "tty"
		}
		t.Run(name, func(t *testing.T) {
			if tty && runtime.GOOS != "linux" {
				t.Skip("a write to a terminal is given up on Linux only (see pollable)")
			}
			// A program that never reads; on a terminal it turns the line
			// discipline raw, which otherwise takes and drops what a
			// reader leaves.
			cmd := "exec sleep 1000"
			if tty {
				cmd = "stty raw -echo; " + cmd
			}
			p := mustStart(t, proc.Config{Command: cmd, Stdin: !tty, TTY: tty})
			first := make(chan error, 1)
			go func() {
				// Blocks until the process is stopped at cleanup.
				_, err := p.Input(context.Background(), make([]byte, 4<<20))
				first <- err
			}()
			t.Cleanup(func() {
				p.Stop(0)
				<-first
			})
			waitBlocked(t, p)
			for _, call := range []struct {
				name string
				do   func(ctx context.Context) error
			}{
				{"Input", func(ctx context.Context) error { _, err := p.Input(ctx, []byte("x")); return err }},
				{"CloseInput", func(ctx context.Context) error { return closeInput(ctx, p) }},
			} {
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				done := make(chan error, 1)
				go func() { done <- call.do(ctx) }()
				select {
				case err := <-done:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s behind a blocked write = %v, want DeadlineExceeded", call.name, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s behind a blocked write did not return 10s after its context ended", call.name)
				}
				cancel()
			}
		})
	}
}

// waitBlocked waits until a write to p's input has had the time to fill
// the pipe (or the terminal's queue) and block.
func waitBlocked(t *testing.T, p *proc.Process) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
}

func closeInput(ctx context.Context, p *proc.Process) error { return p.CloseInput(ctx) }
