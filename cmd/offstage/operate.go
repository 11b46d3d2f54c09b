package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/offstage/offstage/cmd/offstage/internal/fleet"
	"github.com/offstage/offstage/journal"
)

// operator names who runs offstage tasks cancel, as the record keeps it.
func operator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host + " with offstage tasks cancel"
}

// outcome is how a cancel ended when it stopped nothing: said as it is,
// never taken for the journal's trouble.
type outcome struct{ error }

// maxReason bounds a cancel's reason, which the owner's model is told.
const maxReason = 500

// cancelTask stops the task id names wherever it runs, and says how it
// ended.
func cancelTask(ctx context.Context, store *journal.DB, session, id, reason string, w io.Writer) error {
	t, err := findTask(ctx, store, session, id, nil) // never the newest of several: it stops one
	if err != nil {
		return err
	}
	name := t.Session + "/" + t.ID
	if len(reason) > maxReason {
		return usagef("--reason is %d bytes; at most %d are kept (the dashboard's bound too)", len(reason), maxReason)
	}
	got, err := fleet.Cancel(ctx, store, t.Session, t.ID, operator(), reason)
	switch {
	case errors.Is(err, fleet.ErrFinished):
		// What was asked holds: the task is not running. Safe to repeat,
		// as task_cancel is (a script's second cancel is no failure).
		fmt.Fprintf(w, "%s had already ended (%s): nothing to stop\n", name, got.State)
		return nil
	case errors.Is(err, fleet.ErrOwnerGone):
		why := strings.TrimPrefix(err.Error(), t.ID+": ") // fleet names the task too
		return outcome{fmt.Errorf("%s: %s; the task is orphaned (the next offstage to start on %s marks it so and stops what is left of it)", name, why, got.Hostname)}
	case errors.Is(err, fleet.ErrNotHere):
		return outcome{fmt.Errorf("%s: its session is no longer open in the offstage that ran it (on %s), so nobody can stop it; if that offstage is gone, the task is orphaned (offstage tasks show %s)", name, got.Hostname, name)}
	case errors.Is(err, fleet.ErrPending):
		return outcome{fmt.Errorf("%s: the request is recorded, but the offstage that runs it (on %s) has not acted on it yet: it acts on it when it next reads the journal; offstage tasks show %s says when it ends", name, got.Hostname, name)}
	case err != nil:
		return err
	}
	fmt.Fprintf(w, "%s %s", name, got.State)
	if got.Hostname != "" {
		fmt.Fprintf(w, " on %s", got.Hostname)
	}
	if got.Error != "" {
		fmt.Fprintf(w, ": %s", got.Error)
	}
	fmt.Fprintln(w)
	return nil
}

// followTask prints the task's output as it comes until it ends, then
// how it ended, on stderr.
func followTask(ctx context.Context, store *journal.DB, session, id string, since int64, lines int, stdout, stderr io.Writer) error {
	opts := fleet.FollowOptions{Since: since, Lines: lines}
	t, err := findTask(ctx, store, session, id, func(msg string) { fmt.Fprintf(stderr, "offstage: %s.\n", msg) })
	if err != nil {
		return err
	}
	opts.Note = func(msg string) { fmt.Fprintf(stderr, "offstage: %s.\n", safeText(msg)) }
	out := stdout
	if isTerminal(stdout) {
		// A task's bytes as they are, to a file or a pipe; to a terminal,
		// without the escape sequences that would act on it (a clipboard
		// write, a cleared screen).
		out = &safeWriter{w: stdout}
	}
	if err := fleet.Follow(ctx, store, t.Session, t.ID, opts, out); err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C: the user stopped following
		}
		if le := (fleet.LogError{}); errors.As(err, &le) {
			return outcome{err} // the log's trouble, not the journal's
		}
		return err
	}
	// The end is recorded within a batch of the owner's journal (20 ms).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if t, err = store.Task(ctx, t.Session, t.ID); err != nil || t.State.Finished() {
			break
		}
	}
	if t.State.Finished() {
		msg := fmt.Sprintf("offstage: %s/%s %s", t.Session, t.ID, t.State)
		if t.ExitCode != nil {
			msg += fmt.Sprintf(", exit %d", *t.ExitCode)
		}
		if t.Error != "" {
			msg += ": " + t.Error
		}
		fmt.Fprintln(stderr, safeText(msg)+".")
	}
	return nil
}
