package main

import (
	"os"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/tools"
)

// policy is what every shell of a command's sessions runs under: the
// environment it sees, its limits and its sandbox.
type policy struct {
	env     environ.Policy
	limits  resource.Limits
	sandbox sandbox.Policy // Workspace is left to the session's directory
	prices  prices         // the config file's, to show what tokens cost
}

// policy is the one place a command reads its shells' policy: the user's
// config file, read and checked once, then the flags over it, checked
// once against this host (a limit or sandbox the user asked for that
// cannot hold stops offstage from starting, saying why).
func (f *sessionFlags) policy() (policy, error) {
	if err := f.env.check(); err != nil {
		return policy{}, err
	}
	file, err := loadUserConfig(userConfigPath(f.getenv))
	if err != nil {
		return policy{}, err
	}
	p := policy{env: f.env.policy(file.env), prices: file.prices}
	if p.limits, err = f.limits.limits(file.limits); err != nil {
		return policy{}, err
	}
	if p.sandbox, err = f.sandbox.sandbox(file.sandbox); err != nil {
		return policy{}, err
	}
	return p, nil
}

// template is every session's configuration of a command, built once
// from its flags: run, mcp and acp each hand it to their face (agent.Open,
// mcpserver.Config, acpserver.Config) whole, so that no face misses a
// field another has (the ACP agent once ran without the system prompt).
// A face then sets only what is its own: its logger, how it asks to run a
// command outside the sandbox, run's directory.
func (f *sessionFlags) template(model provider.Model, profiles []agent.Profile, p policy, dir string, journal agent.Journal) (agent.Config, agent.Surface) {
	cfg := agent.Config{
		Model:    model,
		System:   systemPrompt,
		Profiles: profiles,
		Tools: tools.Config{Process: proc.Config{Dir: dir, EnvPolicy: p.env, Limits: p.limits, Sandbox: p.sandbox},
			Advice: cliAdvice},
		Tasks:            *f.tasks,
		Budget:           f.budget.session,
		AutonomousBudget: f.budget.autonomous,
	}
	sf := agent.Surface{Journal: journal, Model: f.model.describe(os.Getenv), NoProjectInstructions: f.agents.noInstructions}
	return cfg, sf
}

// cliAdvice is what the model is told the user can do about a refusal,
// in this CLI's flags (the library says it in general words).
var cliAdvice = tools.Advice{
	Escalation: "--sandbox-escalation allow",
	Widen:      "--sandbox-write DIR, --sandbox-network on",
	KeepEnv:    "offstage --env-keep NAME",
}
