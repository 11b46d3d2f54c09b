package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"github.com/offstage/offstage/proc"
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
	tasks   *task.Options
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
	env      proc.EnvPolicy
	limits   proc.Limits  // each shell's
	sandbox  proc.Sandbox // each shell's; Workspace is the session's directory
	rec      *recorder    // nil with --no-journal
	stop     func()
	closeLog func()
}

// open checks a server command's arguments (it takes none) and opens what
// it runs with, in order: the commands' environment policy, the log, the
// containment it says it uses and the shells' limits, the interrupt
// handling and the journal.
// close undoes it; a journal's loss becomes *errp.
func (f *serverFlags) open(ctx context.Context, name string, rest []string, stderr io.Writer) (*server, error) {
	if len(rest) > 0 {
		return nil, usagef("%s takes no arguments (got %q)", name, rest[0])
	}
	env, err := f.env.policy()
	if err != nil {
		return nil, err
	}
	hideWithheld(env, stderr)
	logger, status, closeLog, err := openLog(f.log, f.level, stderr)
	if err != nil {
		return nil, err
	}
	if err := logContainment(status); err != nil {
		closeLog()
		return nil, err
	}
	limits, err := f.limits.limits()
	if err != nil {
		closeLog()
		return nil, err
	}
	if !limits.IsZero() {
		status.Info("shell limits", "limits", limits.String())
	}
	sandbox, err := f.sandbox.sandbox()
	if err != nil {
		closeLog()
		return nil, err
	}
	if sandbox.On() {
		status.Info("sandbox", "sandbox", sandboxStatus(sandbox, f.workspace))
	}
	ctx, stop := cancelOnInterrupt(ctx)
	rec, err := openRecorder(ctx, f.journal, stderr)
	if err != nil {
		stop()
		closeLog()
		return nil, err
	}
	return &server{ctx: ctx, logger: logger, status: status, env: env, limits: limits, sandbox: sandbox, rec: rec, stop: stop, closeLog: closeLog}, nil
}

// close closes the journal (its loss, if any, becomes *errp), stops
// listening for interrupts and closes the log.
func (s *server) close(errp *error) {
	s.rec.closeInto(errp)
	s.stop()
	s.closeLog()
}
