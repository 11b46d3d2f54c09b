package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/examples/demo"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/tools"
)

const demoUsage = `Usage: offstage demo [--json]

A ten-second tour of offstage. A scripted model (its script is
examples/demo/demo.json) drives a real session: real shells, real
sub-agents, real timings. No key and no network are needed.`

const demoExamples = `  offstage demo
  offstage demo --json | jq -c 'select(.type == "task")'
`

func demoCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the event stream as JSON lines")
	rest, err := parse(fs, args, demoUsage, demoExamples, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("demo takes no arguments (got %q)", rest[0])
	}
	model, err := scripted.Parse(demo.Script)
	if err != nil {
		return fmt.Errorf("the embedded demo script is broken: %w", err)
	}
	profiles, err := demo.Profiles()
	if err != nil {
		return fmt.Errorf("the embedded demo profiles are broken: %w", err)
	}
	dir, err := os.MkdirTemp("", "offstage-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// A directory outside the workspace, which the script tries to write
	// in: the sandbox refuses it where this host has one.
	outside, err := os.MkdirTemp("", "offstage-demo-outside-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(outside)
	policy := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: dir}
	fence, err := sandbox.Check(policy)
	sandboxLine := "offstage demo: the shells run in a sandbox: " + fence.String()
	if err != nil {
		policy = sandbox.Policy{}
		sandboxLine = "offstage demo: this host cannot sandbox the shells (" + trimProc(err) + "); they run unfenced, in a temporary directory."
	}

	ctx, cancel := cancelOnInterrupt(ctx)
	defer cancel()

	s, err := agent.New(ctx, agent.Config{
		Model:    model,
		System:   "You are the model of the offstage demo.",
		Profiles: profiles,
		Tools:    tools.Config{Process: proc.Config{Dir: dir, Sandbox: policy, Env: append(os.Environ(), "DEMO_OUTSIDE="+outside)}},
		Settle:   300 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	p := &printer{w: stdout, json: *asJSON, table: s.Table()}
	p.line("offstage demo: the model is scripted (no key, no network); the shells, sub-agents and timings are real.")
	p.line(sandboxLine)
	p.line("")
	p.line("you: " + demo.Prompt)

	// The user turn, then one autonomous turn when the build finishes.
	turns := make(chan error, 4)
	sink := agent.SinkFunc(func(e agent.Event) {
		p.Event(e)
		if e.Type == agent.TurnEnd {
			turns <- e.Err
		}
	})
	input := make(chan string, 1)
	input <- demo.Prompt
	ran := make(chan struct{})
	go func() { s.Run(ctx, input, sink); close(ran) }()
	var turnErr error
	for range 2 {
		select {
		case turnErr = <-turns:
		case <-ctx.Done():
		}
		if turnErr != nil || ctx.Err() != nil {
			break
		}
	}
	close(input)
	<-ran

	closeErr := s.Close(context.Background())
	left := 0
	for _, i := range s.Table().List() {
		if !i.State.Finished() {
			left++
		}
	}
	switch {
	case turnErr != nil:
		return fmt.Errorf("a demo turn failed: %w", turnErr)
	case closeErr != nil:
		return fmt.Errorf("closing the session: %w", closeErr)
	case left > 0:
		return fmt.Errorf("%d tasks were still running after Close", left)
	case ctx.Err() != nil && len(p.answers) < 2:
		return fmt.Errorf("the demo was interrupted")
	}
	p.line("")
	p.line(fmt.Sprintf("offstage demo: done. %d tasks ran; every one has finished and every process was reaped.", len(s.Table().List())))
	return nil
}
