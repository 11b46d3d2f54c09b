// Command offstage is offstage's CLI: `offstage demo` shows every
// capability with a scripted model, `offstage run` talks to a real model,
// `offstage version` says which build this is. See `offstage --help`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/task"
)

func main() {
	// First, before any key is read: the commands offstage runs must not
	// read its environment or memory (see environ.ProtectHost).
	if err := environ.ProtectHost(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintln(os.Stderr, "offstage: warning: the commands it runs may read its environment and memory:", err)
	}
	// A reader of stdout that goes away (offstage run --json | head, an
	// MCP client that stops reading) must not kill offstage by SIGPIPE
	// before it has stopped its tasks and written its journal: with the
	// signal caught, a write to the closed pipe fails with EPIPE instead.
	// (Caught, not ignored: an ignored SIGPIPE would be inherited by every
	// command offstage runs, and `yes | head` in a shell would never end.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	sandbox.KeepInheritedToSelf()
	// SIGINT is not here: each command decides what Ctrl-C means (the
	// interactive mode cancels the turn, not the program).
	ctx, stop := notifyStop(context.Background())
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}

// notifyStop is signal.NotifyContext for SIGTERM and SIGHUP, whose
// cause is a stopSignal: what a command that did not finish its work
// says and exits with (128 plus the signal), and what the tasks it
// ends are ended by.
func notifyStop(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			cancel(stopSignal{sig: s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// stopSignal is the cause of main's context once SIGTERM or SIGHUP came.
type stopSignal struct {
	sig syscall.Signal
	// reason, if set, is the end it gives what it ends, naming the face
	// (nameStop): "run: stopped by SIGTERM (one-shot)".
	reason string
}

func (s stopSignal) Error() string { return "stopped by " + s.name() }

// name is the signal's name, SIGTERM or SIGHUP.
func (s stopSignal) name() string {
	if s.sig == syscall.SIGHUP {
		return "SIGHUP"
	}
	return "SIGTERM"
}

// EndedBy implements task.Ender: what a stop signal ends (a turn's
// foreground command) ends by the session, for that signal.
func (s stopSignal) EndedBy() (string, string) {
	if s.reason != "" {
		return task.BySession, s.reason
	}
	return task.BySession, s.Error()
}

// nameStop returns a context that ends with ctx, whose stop signal, if
// that is what ends it, names the face that stopped: prefix, the signal,
// suffix ("run: ", " (one-shot)"), as the face's own end names it.
func nameStop(ctx context.Context, prefix, suffix string) (context.Context, func()) {
	named, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		if s, ok := cause.(stopSignal); ok {
			s.reason = prefix + s.Error() + suffix
			cause = s
		}
		cancel(cause)
	})
	return named, func() { stop(); cancel(nil) }
}

// stoppedBy returns the stop signal that ended ctx, if one did.
func stoppedBy(ctx context.Context) (stopSignal, bool) {
	var s stopSignal
	return s, errors.As(context.Cause(ctx), &s)
}
