package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/offstage/offstage/internal/text"
)

// maxListed bounds the unfinished tasks a line of offstage sessions (or
// offstage tasks' live sessions) names; the rest are counted.
const maxListed = 8

const sessionsUsage = `Usage: offstage sessions [--json] [--state-dir DIR]
       offstage sessions close ID [--state-dir DIR]

Lists the live sessions of the state directory's offstage serve: those of
offstage run, offstage mcp on stdio and offstage acp it hosts, each with
its face, whether a client is attached (or since when none is), and its
unfinished tasks. A session whose client went away goes on until it is
closed: by offstage sessions close, by the idle policy (no client and no
unfinished task for serve's --idle), or by stopping offstage serve.

offstage sessions close ID (an id or its start) closes a live session,
with a client or not: its unfinished tasks end, recorded with ended_by
user and "offstage sessions close" as the reason, and every process of
theirs is reaped; it returns once they have. An MCP client still
attached is disconnected; an editor's later prompts on it are refused. A
session with an offstage run attached is not closed (/quit in that run
ends it). The journal keeps what the session ran
(offstage tasks --session ID).`

const sessionsExamples = `  offstage sessions
  offstage sessions close 20260512-0931
`

func sessionsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	var jf journalFlags
	jf.register(fs)
	jsonOut := fs.Bool("json", false, "print the supervisor's answer as JSON: its pid and each session with its tasks")
	rest, err := parse(fs, args, sessionsUsage, sessionsExamples, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(rest) == 0:
		st, err := askServe[liveState](ctx, jf, serveHeader{Face: "sessions"}, 10*time.Second)
		if err != nil {
			return err
		}
		if *jsonOut {
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false)
			return enc.Encode(st)
		}
		writeSessions(stdout, st, timeNow())
		return nil
	case rest[0] == "close" && len(rest) == 2:
		a, err := askServe[closeAnswer](ctx, jf, serveHeader{Face: "close", Args: rest[1:]}, time.Minute)
		if err != nil {
			return err
		}
		if a.ID == "" {
			return usagef("%s", a.Err)
		}
		fmt.Fprintf(stdout, "offstage: closed session %s: %s ended (ended_by user), every process reaped.\n", a.ID, text.Plural(a.Ended, "unfinished task"))
		if a.Err != "" {
			return fmt.Errorf("closing session %s: %s", a.ID, a.Err)
		}
		return nil
	case rest[0] == "close":
		return usagef("offstage sessions close takes one session id (offstage sessions lists them)")
	}
	return usagef("offstage sessions takes no arguments but close ID (got %q)", rest[0])
}

// askServe sends h to the state directory's supervisor and decodes its
// one answer, waiting at most wait, or until ctx ends (SIGTERM: an
// outsider waited a minute on a stopped supervisor); without a
// supervisor it says so.
func askServe[T any](ctx context.Context, jf journalFlags, h serveHeader, wait time.Duration) (T, error) {
	var v T
	c, sock, err := dialServe(jf)
	if errors.Is(err, errNoServe) {
		state, _ := jf.dir(os.Getenv)
		return v, usagef("no offstage serve runs for %s, so no session outlives its client: offstage serve --detach starts one; offstage tasks lists what ran", state)
	}
	if err != nil {
		return v, usagef("offstage serve does not answer at %s (%v)", sock, err)
	}
	defer c.Close()
	if stopped := stoppedPeer(c); stopped != nil {
		// It would not answer: not waited for in vain (an outsider
		// waited 10 s, then was sent to a log that said nothing).
		return v, usagef("offstage serve does not answer at %s (%v)", sock, stopped)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	c.SetDeadline(time.Now().Add(wait)) // a close reaps within 20 s
	if err := newWireWriter(c).send(h); err != nil {
		if ctx.Err() != nil {
			return v, context.Cause(ctx)
		}
		return v, fmt.Errorf("asking offstage serve: %w", err)
	}
	if err := json.NewDecoder(io.LimitReader(c, 64<<20)).Decode(&v); err != nil {
		if ctx.Err() != nil {
			return v, context.Cause(ctx)
		}
		return v, fmt.Errorf("offstage serve did not answer within %s (%v); its log says why", wait, err)
	}
	return v, nil
}

// writeSessions prints the supervisor's live sessions, a line each.
func writeSessions(w io.Writer, st liveState, now time.Time) {
	if len(st.Sessions) == 0 {
		fmt.Fprintf(w, "offstage serve (pid %d) hosts no live session.\n", st.PID)
		return
	}
	fmt.Fprintf(w, "offstage serve (pid %d) hosts %s:\n", st.PID, text.Plural(len(st.Sessions), "live session"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tFACE\tCLIENT\tUNFINISHED")
	for _, s := range st.Sessions {
		client := "attached"
		if !s.Attached {
			client = "none"
			if !s.Left.IsZero() {
				client = "detached " + now.Sub(s.Left).Round(time.Second).String() + " ago"
			}
		}
		var run []string
		for _, i := range s.Tasks {
			if !i.State.Finished() {
				run = append(run, fmt.Sprintf("%s %s", i.ID, i.State))
			}
		}
		unfinished := "none"
		if len(run) > maxListed { // a line a terminal can show: sessions --json has them all
			run = append(run[:maxListed], fmt.Sprintf("and %d more", len(run)-maxListed))
		}
		if len(run) > 0 {
			unfinished = strings.Join(run, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Face, client, unfinished)
	}
	tw.Flush()
}
