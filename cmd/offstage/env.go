package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
)

// envFlags are --env-keep and --env-drop, on run, mcp and acp: the last
// layer of the shells' environment policy, over the user's config file.
type envFlags struct{ keep, drop []string }

func (f *envFlags) register(fs *flag.FlagSet) {
	add := func(list *[]string) func(string) error {
		return func(name string) error {
			if err := environ.ValidName(name); err != nil {
				return err
			}
			*list = append(*list, name)
			return nil
		}
	}
	fs.Func("env-keep", "let commands see this environment variable although it looks like a secret (a name, or a pattern such as AWS_*); repeatable", add(&f.keep))
	fs.Func("env-drop", "withhold this environment variable from commands too (a name or a pattern); repeatable", add(&f.drop))
}

// check refuses flags that contradict each other.
func (f envFlags) check() error {
	for _, name := range f.keep {
		if slices.Contains(f.drop, name) {
			return usagef("--env-keep and --env-drop both name %s; give one of them", name)
		}
	}
	return nil
}

// policy returns the shells' environment policy: the default rule, then
// the user's config file's (file), then the flags.
func (f envFlags) policy(file environ.Policy) environ.Policy {
	return file.Then(environ.Policy{Keep: f.keep, Drop: f.drop})
}

// userConfigDir is $XDG_CONFIG_HOME/offstage, or ~/.config/offstage, in
// the environment getenv reads (nil: this process's); "" when neither can
// be known. Under offstage serve that is the client's, so a run's config
// file (its sandbox, its environment rules, its prices) and its profiles
// are the ones it would have used without a supervisor.
func userConfigDir(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	config := getenv("XDG_CONFIG_HOME")
	if config == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		config = filepath.Join(home, ".config")
	}
	return filepath.Join(config, "offstage")
}

func userConfigPath(getenv func(string) string) string {
	dir := userConfigDir(getenv)
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "config.yaml")
}

// userConfig is the user's config file:
//
//	env:
//	  keep: [GITHUB_TOKEN]   # commands see these although they look like secrets
//	  drop: [CORP_*]         # and not these, besides the default rule
//	limits:                  # each shell's, as --task-memory, --task-pids, --task-cpus
//	  memory: 2G
//	  pids: 512
//	  cpus: 1.5
//	sandbox:                 # as --sandbox, --sandbox-write, --sandbox-network, --sandbox-best-effort
//	  mode: workspace-write
//	  write: [~/.cache/go-build, ~/go/pkg/mod, ~/.npm]
//	  network: false
//	  best_effort: false
//	prices:                  # per million tokens, to show what tokens cost (see price)
//	  gpt-4.1: {input: 2, output: 8, cached_input: 0.5}
type userConfig struct {
	Env struct {
		Keep []string `yaml:"keep"`
		Drop []string `yaml:"drop"`
	} `yaml:"env"`
	Limits struct {
		Memory string  `yaml:"memory"`
		Pids   int     `yaml:"pids"`
		CPUs   float64 `yaml:"cpus"`
	} `yaml:"limits"`
	Sandbox struct {
		Mode       string   `yaml:"mode"`
		Write      []string `yaml:"write"`
		Network    bool     `yaml:"network"`
		BestEffort bool     `yaml:"best_effort"`
	} `yaml:"sandbox"`
	Prices prices `yaml:"prices"`
}

// sandbox returns the shells' sandbox the file sets.
func (c userConfig) sandbox() (sandbox.Policy, error) {
	m, err := sandbox.ParseMode(c.Sandbox.Mode)
	if err != nil {
		return sandbox.Policy{}, fmt.Errorf("mode: %s", trimProc(err))
	}
	s := sandbox.Policy{Mode: m, Network: c.Sandbox.Network, BestEffort: c.Sandbox.BestEffort}
	for _, d := range c.Sandbox.Write {
		d = expandHome(d)
		if !filepath.IsAbs(d) {
			return s, fmt.Errorf("write: %q is not an absolute path (or ~/…)", d)
		}
		s.Write = append(s.Write, d)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%s", trimProc(err))
	}
	return s, nil
}

// limits returns the shells' limits the file sets.
func (c userConfig) limits() (resource.Limits, error) {
	l := resource.Limits{Pids: c.Limits.Pids, CPUs: c.Limits.CPUs}
	if c.Limits.Memory != "" {
		n, err := resource.ParseSize(c.Limits.Memory)
		if err != nil {
			return l, fmt.Errorf("memory: %w", err)
		}
		l.Memory = n
	}
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("%s", trimProc(err))
	}
	return l, nil
}

func (c userConfig) policy() environ.Policy {
	return environ.Policy{Keep: c.Env.Keep, Drop: c.Env.Drop}
}

// configKeys are the config file's keys, by section ("" the top level),
// as userConfig has them (prices' keys are model names: any is taken).
var configKeys = map[string][]string{
	"":        {"env", "limits", "sandbox", "prices"},
	"env":     {"keep", "drop"},
	"limits":  {"memory", "pids", "cpus"},
	"sandbox": {"mode", "write", "network", "best_effort"},
	"a price": {"input", "output", "cached_input"}, // each model's under prices
}

// unknownConfigKey names the first key of the config file that offstage
// does not know, with the line, and the key it may be a slip for ("line
// 1: unknown key limts; did you mean limits?"), or returns "". A file
// that is not YAML it leaves to the decoder to describe.
func unknownConfigKey(data []byte) string {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return ""
	}
	var walk func(n *yaml.Node, section string) string
	walk = func(n *yaml.Node, section string) string {
		if n.Kind != yaml.MappingNode {
			return ""
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			known := configKeys[section]
			if !slices.Contains(known, k.Value) {
				where := "unknown key " + strconv.Quote(k.Value)
				if section != "" {
					where += " in " + section
				}
				msg := fmt.Sprintf("line %d: %s", k.Line, where)
				if near := text.Nearest(k.Value, known); near != "" {
					return msg + "; did you mean " + near + "?"
				}
				return msg + "; the keys there are " + strings.Join(known, ", ")
			}
			if _, sectioned := configKeys[k.Value]; section == "" && sectioned {
				if msg := walk(n.Content[i+1], k.Value); msg != "" {
					return msg
				}
			}
			if section == "" && k.Value == "prices" && n.Content[i+1].Kind == yaml.MappingNode {
				models := n.Content[i+1].Content
				for j := 1; j < len(models); j += 2 {
					if msg := walk(models[j], "a price"); msg != "" {
						return msg
					}
				}
			}
		}
		return ""
	}
	return walk(doc.Content[0], "")
}

// maxUserConfigBytes bounds the user's config file.
const maxUserConfigBytes = 256 << 10

// loadUserConfig reads path into the policy it sets, checked; a file
// that does not exist is an empty config, one that cannot be read or
// understood a usage error naming it. It is called once per start (see
// sessionFlags.policy).
func loadUserConfig(path string) (policy, error) {
	c, err := readUserConfig(path)
	if err != nil {
		return policy{}, err
	}
	p := policy{env: c.policy(), prices: c.Prices}
	if err := p.env.Validate(); err != nil {
		return policy{}, usagef("the config file %s: env: %v", path, err)
	}
	if p.limits, err = c.limits(); err != nil {
		return policy{}, usagef("the config file %s: limits: %v", path, err)
	}
	if p.sandbox, err = c.sandbox(); err != nil {
		return policy{}, usagef("the config file %s: sandbox: %v", path, err)
	}
	return p, nil
}

// readUserConfig reads and decodes path.
func readUserConfig(path string) (userConfig, error) {
	var c userConfig
	if path == "" {
		return c, nil
	}
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, nil
	case err != nil:
		// Not skipped: it may withhold variables the user relies on.
		return c, usagef("the config file %s cannot be read (%v): fix its permissions, or set XDG_CONFIG_HOME to a directory this user can read", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxUserConfigBytes+1))
	if err != nil {
		return c, usagef("the config file %s cannot be read: %v", path, err)
	}
	if len(data) > maxUserConfigBytes {
		return c, usagef("the config file %s is over %d KiB; it holds a few settings", path, maxUserConfigBytes>>10)
	}
	if msg := unknownConfigKey(data); msg != "" {
		return c, usagef("the config file %s: %s", path, msg)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return c, usagef("the config file %s: %s (it takes env: {keep: [NAME…], drop: [NAME…]}, limits: {memory: SIZE, pids: N, cpus: N} and sandbox: {mode: MODE, write: [DIR…], network: BOOL, best_effort: BOOL} and prices: {MODEL: {input: N, output: N, cached_input: N}})", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := c.Prices.validate(); err != nil {
		return c, usagef("the config file %s: prices: %v", path, err)
	}
	return c, nil
}

// untrustedKeeps clears env_keep in the profiles that came from the
// project's own directories (dirs are the project's profile directories)
// and says so: a repository must not decide which of the user's secrets
// its commands see. env_drop, which only withholds more, is honoured
// everywhere; env_keep in the user's directories and in --agents, which
// the user names, is honoured.
func untrustedKeeps(list []agent.Profile, from map[string]string, project, trusted []string, userDir string, stderr io.Writer) {
	for i := range list {
		p := &list[i]
		dir := filepath.Dir(from[p.Name])
		if len(p.Env.Keep) == 0 || !slices.Contains(project, dir) || slices.Contains(trusted, dir) {
			continue
		}
		fmt.Fprintf(stderr, "offstage: profile %s (%s): env_keep is ignored in a project's profile, which must not decide which of your secrets its commands see; put the profile in %s or pass its directory with --agents\n",
			p.Name, from[p.Name], filepath.Join(userDir, "agents"))
		p.Env.Keep = nil
	}
}

// hideWithheld overwrites the values env withholds in offstage's own
// initial environment block (issue 33), so that a command of a root host,
// unsandboxed, reading /proc/$PPID/environ finds none of them; offstage
// itself reads Go's copy of its environment, so its provider clients
// still find their keys. A failure is said, not fatal: the commands'
// environments are filtered either way.
func hideWithheld(env environ.Policy, stderr io.Writer) {
	if _, err := environ.HideWithheld(env); err != nil {
		fmt.Fprintf(stderr, "offstage: the withheld variables stay readable in /proc/%d/environ: %v\n", os.Getpid(), err)
	}
}
