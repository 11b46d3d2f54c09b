package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Input writes b to the process's stdin. It blocks while the pipe is full,
// and while another Input or CloseInput is writing, until ctx ends (then
// it returns how much was written and context.Cause(ctx)). It fails with
// ErrNoStdin without Config.Stdin (or TTY), with ErrInputClosed after
// CloseInput, and with ErrExited once the process has exited or stopped
// reading. Safe for concurrent use: writes are never interleaved.
func (p *Process) Input(ctx context.Context, b []byte) (int, error) {
	if p.stdin == nil {
		return 0, ErrNoStdin
	}
	p.serveSoon() // its answer is read at once
	if err := p.lockInput(ctx); err != nil {
		return 0, err
	}
	defer p.unlockInput()
	p.mu.Lock()
	closed := p.stdinClosed
	p.mu.Unlock()
	if closed {
		return 0, ErrInputClosed
	}
	// A deadline in the past ends a blocked write when ctx ends. The reset
	// waits for the AfterFunc to have run, or its late deadline would end
	// the next writer's write.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		p.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	n, err := p.stdin.Write(b)
	if !stop() {
		<-fired
		p.stdin.SetWriteDeadline(time.Time{})
		if err != nil {
			return n, context.Cause(ctx)
		}
	}
	if n > 0 {
		p.mu.Lock()
		p.prompt = "" // answered, or at least written to: no longer waiting
		p.mu.Unlock()
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, syscall.EPIPE), errors.Is(err, os.ErrClosed):
		return n, ErrExited
	default:
		return n, fmt.Errorf("proc: write stdin: %w", err)
	}
}

// lockInput takes the input semaphore, unless ctx ends first (then it
// returns context.Cause(ctx)) or the process is done (ErrExited).
func (p *Process) lockInput(ctx context.Context) error {
	select {
	case <-p.done:
		return ErrExited
	default:
	}
	select {
	case p.in <- struct{}{}:
		return nil
	case <-p.done:
		return ErrExited
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (p *Process) unlockInput() { <-p.in }

// CloseInput closes the process's stdin, so it reads end of file; on a
// terminal (Config.TTY), which stays open as the output, it writes what a
// keyboard sends for end of file, Ctrl-D, seen by a reader at the start of
// a line. On a pipe it is idempotent, and does nothing once the process is
// done; on a terminal each call sends another Ctrl-D, and one after the
// process is done fails with ErrExited.
//
// Its wait is bounded by ctx: behind a write in progress (an Input to a
// child that stopped reading), and on a terminal for the Ctrl-D to be
// taken, it waits until ctx ends, then returns context.Cause(ctx) and the
// input stays open. (Off Linux a write to a terminal, once begun, is not
// given up: it waits until the terminal is read or the process is done.)
// It fails with ErrNoStdin without Config.Stdin or TTY.
func (p *Process) CloseInput(ctx context.Context) error {
	if p.stdin == nil {
		return ErrNoStdin
	}
	p.serveSoon()
	if p.cfg.TTY {
		_, err := p.Input(ctx, []byte{4})
		return err
	}
	switch err := p.lockInput(ctx); {
	case errors.Is(err, ErrExited):
		return nil // reap closed it
	case err != nil:
		return err
	}
	defer p.unlockInput()
	p.mu.Lock()
	already := p.stdinClosed
	p.stdinClosed = true
	p.mu.Unlock()
	if already {
		return nil
	}
	if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
