package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/internal/pollfd"
	"github.com/offstage/offstage/provider"
)

const acpUsage = `Usage: offstage acp [flags]

Runs offstage as an Agent Client Protocol agent on stdio, for editors that
start agents that way (Zed, and any ACP client). The model comes from the
same flags and environment as "offstage run". Each session's shells run in
the directory the editor gives; background shells and sub-agents keep
running between prompts, and their results reach the editor as they
finish, even while no prompt runs. Before a call that runs a command,
sends input to a program, starts a sub-agent or cancels a task, the editor
is asked (allow once, always for the session, reject) unless --yolo; a
sub-agent's calls too, named after it.
session/cancel stops the current turn, not background work; closing the
session or the editor ends all of it. Logs go to stderr or --log, never
stdout.

The MCP servers the editor passes for a session (stdio, HTTP or SSE) are
started with it and closed with it; the model gets their tools as
mcp__SERVER__TOOL. Their calls show as tool cards and ask as offstage's
own do: a tool whose annotations say it is read-only runs unasked, any
other asks. A stdio server runs in the session's directory with this
environment, less what shells do not get (secrets, by default; see
--env-keep and --env-drop), plus the variables the editor gives it. A server that does not start within
30s is named in the session with why; the session goes on without it.`

const acpExamples = `  OPENAI_API_KEY=sk-... offstage acp
  ANTHROPIC_API_KEY=sk-ant-... offstage acp --provider anthropic
  offstage acp --script examples/demo/demo.json     # a scripted model

  In Zed's settings.json:
    "agent_servers": {"offstage": {"command": "offstage", "args": ["acp"], "env": {"OPENAI_API_KEY": "sk-..."}}}
`

func acpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	stdin, stdout, restore := protocolStdio(stdin, stdout)
	defer restore()
	return acpFace(ctx, localFace(stdin, stdout, stderr), args, stdin, stdout, stderr)
}

// protocolStdio is pollfd.Stdio for a protocol on this process's stdio
// (offstage mcp, offstage acp), with the output through the poller
// whatever the processors: a write stuck on a client that reads nothing
// can then be cut when the session ends (rpcline's Writer.Cut), where a
// blocking one held the session, its shells and the process for as long
// as the client lived (an outsider's finding). Writing to a pipe that has
// room costs the same either way.
func protocolStdio(stdin io.Reader, stdout io.Writer) (io.Reader, io.Writer, func()) {
	stdin, stdout, restore := pollfd.Stdio(stdin, stdout)
	stdout, restoreOut := pollfd.Writer(stdout)
	return stdin, stdout, func() {
		restoreOut()
		restore()
	}
}

// acpFace is offstage acp for a face: this process's stdio, or, under
// offstage serve (f.host), a relayed connection whose sessions the
// supervisor keeps when it ends, for a later session/load to attach.
func acpFace(ctx context.Context, f *face, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	var sf serverFlags
	sf.register(fs, "")
	yolo := fs.Bool("yolo", false, "run every tool call without asking the editor for permission")
	noServe := fs.Bool("no-serve", false, "host the sessions in this process even when offstage serve runs (they then end with it)")
	if f.served() {
		args = absPaths(fs, args, f.abs)
	}
	rest, err := parse(fs, args, acpUsage, acpExamples, stdout)
	if err != nil {
		return err
	}
	// Without a model (no key, the likeliest first slip in an editor's
	// settings) the agent still answers initialize: an editor shows an
	// agent that exits at once as dead, and the message on stderr where
	// nobody looks. Each session/new then fails with the advice.
	var noModel string
	model, err := newModel(sf.model, f.getenv)
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		noModel = "offstage has no model: " + ue.msg + `; in the editor's settings, give it in the agent's "env"`
		fmt.Fprintln(stderr, "offstage:", ue.msg)
	case err != nil:
		return err
	}
	cwd, err := workDir(f.cwd)
	if err != nil {
		return err
	}
	if !f.served() && !*noServe && !sf.journal.noJournal {
		if conn, sock, _, err := dialLive(sf.journal); err == nil {
			// Checked here first: relayed, a mistake would reach only the
			// supervisor's log, and the editor would see an agent that ends.
			if len(rest) > 0 {
				conn.Close()
				return usagef("acp takes no arguments (got %q)", rest[0])
			}
			if _, err := sf.policy(); err != nil {
				conn.Close()
				return err
			}
			fmt.Fprintf(stderr, "offstage: the sessions are hosted by offstage serve (%s): they go on when the editor goes, and session/load attaches to them.\n", sock)
			return relayStream(ctx, conn, "acp", false, args, stdin, stdout)
		} else if !errors.Is(err, errNoServe) {
			fmt.Fprintf(stderr, "offstage: offstage serve does not answer at %s (%v); the sessions run in this process.\n", sock, err)
		}
	}
	if f.served() {
		return servedACP(ctx, f, &sf, model, noModel, *yolo, cwd, rest, stdin, stdout, stderr)
	}
	srv, err := sf.open(ctx, "acp", rest, stderr)
	if err != nil {
		return err
	}
	defer srv.close(&err)
	srv.logger.Info("serving ACP on stdio", "yolo", *yolo)
	// Profiles come from where offstage acp was started (and --agents);
	// each session's AGENTS.md from the session's own directory.
	cfg, surface := sf.template(model, sf.agents.profiles(cwd, sf.model, stderr), srv.policy, "", srv.rec.journal())
	cfg.Tracer = srv.tracer
	return acpserver.Serve(srv.ctx, acpserver.Config{Agent: cfg, Surface: surface, NoModel: noModel,
		AllowAll: *yolo, NoEscalation: sf.sandbox.escalation == "deny", Logger: srv.logger, Version: version(),
	}, stdin, stdout)
}

// servedACP serves ACP on a relayed connection in offstage serve: the
// supervisor's journal, tracer and log; the client's environment for the
// model and the shells; sessions kept by the supervisor's Keeper.
func servedACP(ctx context.Context, f *face, sf *serverFlags, model provider.Model, noModel string, yolo bool, cwd string, rest []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(rest) > 0 {
		return usagef("acp takes no arguments (got %q)", rest[0])
	}
	sf.readFrom(f.getenv)
	p, err := sf.policy()
	if err != nil {
		return err
	}
	sup := f.host
	cfg, surface := sf.template(model, sf.agents.profiles(cwd, sf.model, stderr), p, "", sup.rec.journal())
	cfg.Tracer = sup.tracer
	cfg.Tools.Process.Env = f.environ
	// The stop ends the connection's input, not Serve's context, as for
	// offstage mcp (servedMCP): the answers of the prompts it cancelled
	// then reach the editor before the connection ends.
	stop := context.AfterFunc(ctx, f.endInput)
	defer stop()
	return acpserver.Serve(context.WithoutCancel(ctx), acpserver.Config{Agent: cfg, Surface: surface, NoModel: noModel,
		AllowAll: yolo, NoEscalation: sf.sandbox.escalation == "deny", Logger: sup.logger, Version: version(),
		Keep: sup.acp,
	}, stdin, stdout)
}
