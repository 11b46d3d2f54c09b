package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc/resource"
)

// agentFlags are how run, mcp, acp and agents find sub-agent profiles and
// project instructions.
type agentFlags struct {
	dirs           []string
	noInstructions bool
	getenv         func(string) string // where HOME and XDG_CONFIG_HOME are read (sessionFlags.readFrom); nil: this process's
}

func (f *agentFlags) register(fs *flag.FlagSet, instructions bool) {
	fs.Func("agents", "also read sub-agent profiles (*.md) from this directory; repeatable, later ones win", func(dir string) error {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("%q is not a directory", dir)
		}
		f.dirs = append(f.dirs, dir)
		return nil
	})
	if instructions {
		fs.BoolVar(&f.noInstructions, "no-project-instructions", false, "do not give the model the project's AGENTS.md files")
	}
}

// projectRoot is the nearest directory from dir up that holds .git, or
// dir itself.
func projectRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// profileDirs lists where profiles are read from, most general first, so
// that later ones win: Claude Code's user directory, offstage's
// ($XDG_CONFIG_HOME/offstage/agents), the project's .claude/agents, the
// project's .offstage/agents, then --agents.
func (f agentFlags) profileDirs(work string) []string {
	var dirs []string
	getenv := f.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if home := getenv("HOME"); home != "" {
		dirs = append(dirs, filepath.Join(home, ".claude", "agents"))
	}
	if config := userConfigDir(getenv); config != "" {
		dirs = append(dirs, filepath.Join(config, "agents"))
	}
	dirs = append(dirs, projectProfileDirs(work)...)
	return append(dirs, f.dirs...)
}

// projectProfileDirs are the project's own profile directories.
func projectProfileDirs(work string) []string {
	root := projectRoot(work)
	return []string{filepath.Join(root, ".claude", "agents"), filepath.Join(root, ".offstage", "agents")}
}

// trustedProfileDirs are the profile directories the user chose: the
// user's own and --agents (see untrustedKeeps).
func (f agentFlags) trustedProfileDirs(work string) []string {
	dirs := f.profileDirs(work)
	user := dirs[:len(dirs)-len(f.dirs)-len(projectProfileDirs(work))]
	return append(slices.Clone(user), f.dirs...)
}

// claudeAliases are Claude Code's model names, which mean nothing to
// another provider.
var claudeAliases = []string{"sonnet", "opus", "haiku"}

// profiles returns the built-in profiles overridden and extended by the
// files found for work, each with its model resolved, and tells stderr
// once about every file skipped and every note.
func (f agentFlags) profiles(work string, mf modelFlags, stderr io.Writer) []agent.Profile {
	found := agent.LoadProfiles(f.profileDirs(work)...)
	for _, p := range found.Problems {
		fmt.Fprintln(stderr, "offstage: profile", p.String())
	}
	untrustedKeeps(found.List, found.From, projectProfileDirs(work), f.trustedProfileDirs(work), userConfigDir(f.getenv), stderr)
	list := agent.WithDefaultProfiles(unlimitable(found.List, found.From, stderr))
	for i := range list {
		if note := resolveModel(&list[i], mf); note != "" {
			fmt.Fprintf(stderr, "offstage: profile %s: %s\n", list[i].Name, note)
		}
	}
	return list
}

// unlimitable leaves out, with a note, the profiles whose shell limits
// (task_memory…) this host cannot enforce: such a sub-agent's every shell
// would fail to start, and it must not run with them silently lifted. The
// session goes on without it, as with any profile that cannot load.
func unlimitable(list []agent.Profile, from map[string]string, stderr io.Writer) []agent.Profile {
	return slices.DeleteFunc(list, func(p agent.Profile) bool {
		err := resource.Check(p.Limits)
		if err != nil {
			fmt.Fprintf(stderr, "offstage: profile %s (%s): skipped: its shell limits cannot be enforced here: %s\n", p.Name, from[p.Name], trimProc(err))
		}
		return err != nil
	})
}

// resolveModel gives a profile whose file named a model that model, with
// the session's provider; it says why when it cannot.
func resolveModel(p *agent.Profile, mf modelFlags) string {
	name := p.ModelName
	if name == "" || name == "inherit" {
		return ""
	}
	prov := providerName(mf, os.Getenv)
	switch {
	case prov == "scripted":
		return "" // the script answers for every profile
	case slices.Contains(claudeAliases, name) && prov != "anthropic":
		return "model " + name + " is a Claude model name; it uses this session's model"
	case slices.Contains(claudeAliases, name):
		name = defaultAnthropicModel
	}
	mf.model = name
	m, err := newModel(mf, os.Getenv)
	if err != nil {
		return "model " + name + ": " + err.Error() + "; it uses this session's model"
	}
	p.Model = m
	return ""
}

const agentsUsage = `Usage: offstage agents [flags]

Lists the sub-agent profiles offstage run, mcp and acp would offer, where
each came from and what it overrides (a built-in profile, or a file read
before it with the same name), and the files skipped and why, with notes
such as a key it does not know. Profiles are Markdown files with YAML
front matter (Claude Code's sub-agent format), read from, most general
first (later ones win):
~/.claude/agents, $XDG_CONFIG_HOME/offstage/agents (~/.config/…), the
project's .claude/agents, the project's .offstage/agents, then --agents.
The project is the nearest directory holding .git.`

const agentsExamples = `  offstage agents
  offstage agents --dir ~/src/project --agents ./more-agents
`

func agentsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("agents", flag.ContinueOnError)
	var af agentFlags
	af.register(fs, false)
	dir := fs.String("dir", "", "the project directory (default: the current one)")
	rest, err := parse(fs, args, agentsUsage, agentsExamples, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("agents takes no arguments (got %q)", rest[0])
	}
	if *dir, err = workDir(*dir); err != nil {
		return err
	}
	found := agent.LoadProfiles(af.profileDirs(*dir)...)
	untrustedKeeps(found.List, found.From, projectProfileDirs(*dir), af.trustedProfileDirs(*dir), userConfigDir(nil), stdout)
	for _, p := range agent.WithDefaultProfiles(found.List) {
		from := found.From[p.Name]
		if from == "" {
			from = "built in"
		}
		tools := "all tools"
		if p.Tools != nil {
			tools = strings.Join(p.Tools, ", ")
			if tools == "" {
				tools = "no tools"
			}
		}
		fmt.Fprintf(stdout, "%s\n  %s\n  from %s; %s", p.Name, clip(p.Description, 100), from, tools)
		switch p.ModelName {
		case "":
		case "inherit": // Claude Code's word for what no model means
			fmt.Fprint(stdout, "; the session's model")
		default:
			fmt.Fprintf(stdout, "; model %s", p.ModelName)
		}
		if len(p.Env.Keep) > 0 {
			fmt.Fprintf(stdout, "; its shells also see %s", strings.Join(p.Env.Keep, ", "))
		}
		if len(p.Env.Drop) > 0 {
			fmt.Fprintf(stdout, "; its shells do not see %s", strings.Join(p.Env.Drop, ", "))
		}
		fmt.Fprintln(stdout)
		if over := overrides(p.Name, found); len(over) > 0 {
			fmt.Fprintf(stdout, "  overrides %s\n", strings.Join(over, " and "))
		}
	}
	for _, p := range found.Problems {
		fmt.Fprintln(stdout, p.String())
	}
	fmt.Fprintln(stdout, "searched:", strings.Join(af.profileDirs(*dir), ", "))
	return nil
}

// overrides names what the profile found as name replaced: the built-in
// profile of that name, and the files read before its own.
func overrides(name string, found agent.Profiles) []string {
	if found.From[name] == "" {
		return nil // the built-in one
	}
	var out []string
	for _, d := range agent.DefaultProfiles() {
		if d.Name == name {
			out = append(out, "the built-in "+name)
		}
	}
	return append(out, found.Replaced[name]...)
}
