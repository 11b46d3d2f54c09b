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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}
