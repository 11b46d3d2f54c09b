// Command embedding shows how a Go agent that has its own loop uses
// offstage as a library, without offstage's runtime (package agent): a task
// table for background work, the model's tools, passive reflow of finished
// results before each model call, and waking up on Ready when background
// work finishes while the agent is idle.
//
//	go run ./examples/embedding
//
// The "model" here is a fixed list of tool calls, so the program runs
// anywhere; in your agent, the calls come from your model and the results
// go back into your conversation.
//
// Then (session.go) the same with offstage's runtime and a journal: a
// session opened with agent.Open and recorded by a journal.Recorder, a
// process that crashes (SIGKILL) with a build running in the background,
// and a restart that resumes the session, so the model is told, once,
// that the build was orphaned. This program runs itself again as the
// process that crashes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

func main() {
	if crashChild() {
		return
	}
	// First: the commands the model runs must not read this process's
	// environment (its API keys) or memory. Commands already run without
	// the variables that look like secrets (environ.Policy).
	if err := environ.ProtectHost(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		fmt.Fprintln(os.Stderr, "embedding:", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embedding:", err)
		os.Exit(1)
	}
	if err := restart(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embedding:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer) error {
	// One table per conversation. Closing it cancels everything and reaps
	// every process.
	table := task.New(ctx, task.Options{})
	defer table.Close(context.Background())
	set := tools.New(tools.Config{})
	me := table.View("") // the top level of the conversation

	// Your model's tool calls go to the tools, with the caller's view.
	call := func(name, args string) (tools.Result, error) {
		return set.Tool(name).Call(ctx, me, json.RawMessage(args))
	}
	// Before every model call, finished background results join the
	// conversation, each exactly once.
	reflow := func() {
		for _, r := range me.Drain() {
			fmt.Fprintf(w, "reflow into the conversation: %s (%s) %s\n", r.ID, r.Label, r.State)
		}
	}

	res, err := call("bash", `{"command": "sleep 0.5; echo build ok", "run_in_background": true}`)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "model ran bash in the background:", res.Text)

	reflow() // nothing has finished yet
	res, err = call("bash", `{"command": "echo the foreground answer"}`)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "model ran bash in the foreground:", res.Text)

	// The agent is idle: instead of polling, wait for background work to
	// finish, then give the model a turn with the results. A wake-up can
	// be stale (the foreground command above finished too, and bash already
	// took its result), so reflow and keep waiting while work is running.
	fmt.Fprintln(w, "idle; waiting for background work")
	for running(me) {
		select {
		case <-me.Ready():
			reflow()
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("background work did not finish in 30s")
		}
	}
	reflow() // whatever finished after the last wake-up
	return nil
}

// running reports whether any of the view's tasks is unfinished.
func running(v *task.View) bool {
	for _, t := range v.List() {
		if !t.State.Finished() {
			return true
		}
	}
	return false
}
