package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/trace"

	"github.com/offstage/offstage/task"
)

// sessionFlags are the flags of every command that opens sessions (run,
// mcp, acp): the model, the sub-agent profiles and project instructions,
// the commands' environment and limits, the journal and the task table.
type sessionFlags struct {
	model   modelFlags
	agents  agentFlags
	env     envFlags
	limits  limitFlags
	sandbox sandboxFlags
	journal journalFlags
	budget  budgetFlags
	tasks   *task.Options
	getenv  func(string) string // where the user's files are found (readFrom); nil: this process's environment
}

// readFrom makes the flags find the user's config file and profiles in
// the environment getenv reads (HOME, XDG_CONFIG_HOME): a run served by
// offstage serve reads its client's, as it would without a supervisor.
func (f *sessionFlags) readFrom(getenv func(string) string) {
	f.getenv, f.agents.getenv = getenv, getenv
}

// register declares them; modelNote says what the model is for, if not
// the conversation.
func (f *sessionFlags) register(fs *flag.FlagSet, modelNote string) {
	f.model.register(fs, modelNote)
	f.agents.register(fs, true)
	f.env.register(fs)
	f.limits.register(fs)
	f.sandbox.register(fs)
	f.journal.register(fs)
	f.budget.register(fs)
	f.tasks = taskFlags(fs)
}

// serverFlags are a server command's (mcp, acp): its sessions' flags and
// where it logs, from which level. A command sets level before register
// to choose its default (the zero value is info).
type serverFlags struct {
	sessionFlags
	log   string
	level slog.Level
	// workspace is the shells' directory, for the start-up line about the
	// sandbox: mcp's --dir; "" where each session has its own (acp).
	workspace string
}

func (f *serverFlags) register(fs *flag.FlagSet, modelNote string) {
	f.sessionFlags.register(fs, modelNote)
	fs.StringVar(&f.log, "log", "", "write logs to this file instead of stderr")
	fs.TextVar(&f.level, "log-level", f.level, "log from this `level` on: debug, info, warn or error (the start-up lines are always written)")
}

// server is what a server command runs with.
type server struct {
	ctx    context.Context // ends at SIGINT or SIGTERM
	logger *slog.Logger    // from --log-level
	// status writes the lines a user needs whatever --log-level says: how
	// shells are contained, where it serves, that it stopped. To the same
	// place as logger, at info.
	status   *slog.Logger
	policy   policy               // each shell's
	rec      *recorder            // nil with --no-journal
	tracer   trace.TracerProvider // nil unless the OTLP environment names a collector
	stop     func()
	closeLog func()
	closeTr  func()
}

// open checks a server command's arguments (it takes none) and opens what
// it runs with, in order: the shells' policy (environment, limits,
// sandbox: sessionFlags.policy), the log, the containment it says it uses
// and the policy's lines, the interrupt handling and the journal.
// close undoes it; a journal's loss becomes *errp.
func (f *serverFlags) open(ctx context.Context, name string, rest []string, stderr io.Writer) (*server, error) {
	if len(rest) > 0 {
		return nil, usagef("%s takes no arguments (got %q)", name, rest[0])
	}
	p, err := f.policy()
	if err != nil {
		return nil, err
	}
	hideWithheld(p.env, stderr)
	logger, status, closeLog, err := openLog(f.log, f.level, stderr)
	if err != nil {
		return nil, err
	}
	if err := logContainment(status); err != nil {
		closeLog()
		return nil, err
	}
	if !p.limits.IsZero() {
		status.Info("shell limits", "limits", p.limits.String())
	}
	if p.sandbox.On() {
		status.Info("sandbox", "sandbox", sandboxStatus(p.sandbox, f.workspace))
	}
	tracer, closeTr, err := openTracing(ctx, stderr)
	if err != nil {
		closeLog()
		return nil, err
	}
	if tracer != nil {
		status.Info("tracing", "otlp", endpointOf(os.Getenv))
	}
	ctx, stop := cancelOnInterrupt(ctx)
	rec, err := openRecorder(ctx, f.journal, stderr)
	if err != nil {
		stop()
		closeTr()
		closeLog()
		return nil, err
	}
	return &server{ctx: ctx, logger: logger, status: status, policy: p, rec: rec, tracer: tracer, stop: stop, closeLog: closeLog, closeTr: closeTr}, nil
}

// close closes the journal (its loss, if any, becomes *errp), stops
// listening for interrupts and closes the log.
func (s *server) close(errp *error) {
	s.rec.closeInto(errp)
	s.stop()
	s.closeTr()
	s.closeLog()
}
