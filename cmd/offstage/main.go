// Command offstage is offstage's CLI: `offstage demo` shows every
// capability with a scripted model, `offstage run` talks to a real model,
// `offstage version` says which build this is. See `offstage --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGINT is not here: each command decides what Ctrl-C means (the
	// interactive mode cancels the turn, not the program).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}
