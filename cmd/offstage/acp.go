package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/tools"
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
stdout.`

const acpExamples = `  OPENAI_API_KEY=sk-... offstage acp
  ANTHROPIC_API_KEY=sk-ant-... offstage acp --provider anthropic
  offstage acp --script examples/demo/demo.json     # a scripted model

  In Zed's settings.json:
    "agent_servers": {"offstage": {"command": "offstage", "args": ["acp"], "env": {"OPENAI_API_KEY": "sk-..."}}}
`

func acpCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("acp", flag.ContinueOnError)
	var mf modelFlags
	mf.register(fs, "")
	yolo := fs.Bool("yolo", false, "run every tool call without asking the editor for permission")
	logPath := fs.String("log", "", "write logs to this file instead of stderr")
	taskOpts := taskFlags(fs)
	var af agentFlags
	af.register(fs, true)
	var ef envFlags
	ef.register(fs)
	var jf journalFlags
	jf.register(fs)
	rest, err := parse(fs, args, acpUsage, acpExamples, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("acp takes no arguments (got %q)", rest[0])
	}
	envPolicy, err := ef.policy()
	if err != nil {
		return err
	}
	model, err := newModel(mf, os.Getenv)
	if err != nil {
		return err
	}
	logger, closeLog, err := openLog(*logPath, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	if err := logContainment(logger); err != nil {
		return err
	}
	ctx, cancel := cancelOnInterrupt(ctx)
	defer cancel()
	rec, err := openRecorder(ctx, jf, stderr)
	if err != nil {
		return err
	}
	defer rec.closeInto(&err)
	logger.Info("serving ACP on stdio", "yolo", *yolo)
	cwd, err := workDir("")
	if err != nil {
		return err
	}
	// Profiles come from where offstage acp was started (and --agents);
	// each session's AGENTS.md from the session's own directory.
	return acpserver.Serve(ctx, acpserver.Config{
		Tools: tools.Config{Process: proc.Config{EnvPolicy: envPolicy}},
		Model: model, Profiles: af.profiles(cwd, mf, stderr), NoProjectInstructions: af.noInstructions,
		AllowAll: *yolo, Logger: logger, Version: version(), Journal: rec.journal(), ModelName: mf.describe(os.Getenv),
		Tasks: *taskOpts,
	}, stdin, stdout)
}
