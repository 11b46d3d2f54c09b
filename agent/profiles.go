package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
)

// Profile files are Markdown with YAML front matter, the format Claude
// Code's sub-agents use, so existing files work as they are:
//
//	---
//	name: reviewer
//	description: Reviews a change for bugs and missing tests.
//	tools: bash, task_list        # or a YAML list; default: all tools
//	model: gpt-4.1-mini           # optional; default: the session's model
//	max_iterations: 10            # offstage's own: the sub-agent's turn cap
//	budget_tokens: 200k           # offstage's own: what each sub-agent may
//	budget_calls: 40              # spend, with its own sub-agents (tokens,
//	budget_seconds: 600           # model calls, wall time); spawn_agent can
//	                              # only tighten these
//	project_instructions: false   # offstage's own: leave AGENTS.md out
//	env_keep: GITHUB_TOKEN        # offstage's own: variables its shells see
//	env_drop: [CORP_*]            # although withheld, or withheld besides
//	task_memory: 1G               # offstage's own: caps on its shells, within
//	task_pids: 256                # the session's (--task-memory…); a profile
//	task_cpus: 1                  # can only tighten them
//	---
//	You review code. …             (the body is the system prompt)
//
// Claude Code's tool names are understood: Bash is bash, Task is
// spawn_agent, and Read, Grep, Glob and LS are bash (a shell reads and
// searches files); its tools that offstage has no equivalent of (Edit,
// Write, WebFetch…) are left out with a note. Any other tool name makes
// the file fail to load. Claude Code's keys that mean nothing here
// (color, permissionMode, skills) are ignored; any other key offstage
// does not know is ignored with a note naming its line (a misspelt
// "modle:" would otherwise go unnoticed).
//
// env_keep and env_drop (names or patterns, as environ.Policy reads them;
// a YAML list or names separated by commas) become Profile.Env, applied
// on top of the session's environment policy for this sub-agent's
// shells. Whether to honour env_keep from a given file is the caller's
// choice: a repository's own profiles should not decide which of the
// user's secrets its commands see (the CLI ignores it there).

// maxProfileBytes bounds a profile file; a larger one is skipped.
const maxProfileBytes = 256 << 10

// ToolNames are the tools a profile can name: the tool set's and
// spawn_agent.
func ToolNames() []string {
	return []string{"bash", "task_list", "task_inspect", "task_output", "task_wait", "task_cancel", "task_input", "spawn_agent"}
}

// claudeTools maps Claude Code's tool names to offstage's ("" for none).
var claudeTools = map[string]string{
	"Bash": "bash", "Task": "spawn_agent", "Read": "bash", "Grep": "bash", "Glob": "bash", "LS": "bash",
	"BashOutput": "task_output", "KillBash": "task_cancel", "KillShell": "task_cancel",
	"Edit": "", "MultiEdit": "", "Write": "", "NotebookEdit": "", "NotebookRead": "", "WebFetch": "",
	"WebSearch": "", "TodoWrite": "", "ExitPlanMode": "", "SlashCommand": "",
}

// Profiles is what LoadProfiles found.
type Profiles struct {
	// List holds the profiles, by name. Each name appears once: the
	// file read last (the most specific directory) wins.
	List []Profile
	// From says which file each profile came from.
	From map[string]string
	// Replaced says, by name, which files' profiles the one in List
	// replaced (a later file with the same name wins), earliest first.
	Replaced map[string][]string
	// Problems lists files that were skipped, and notes on files that
	// loaded (a tool left out).
	Problems []ProfileProblem
}

// ProfileProblem is a file LoadProfiles skipped (Skipped) or a note on one
// it loaded.
type ProfileProblem struct {
	Path    string
	Line    int // 0 when it is about the whole file
	Skipped bool
	Msg     string
}

func (p *ProfileProblem) Error() string { return p.String() }

func (p ProfileProblem) String() string {
	where := p.Path
	if p.Line > 0 {
		where += ":" + strconv.Itoa(p.Line)
	}
	if p.Skipped {
		return where + ": skipped: " + p.Msg
	}
	return where + ": " + p.Msg
}

// LoadProfiles reads the profile files (*.md) of dirs, in order: a profile
// from a later directory replaces one of the same name from an earlier
// one, so list the most general first (the user's, then the project's,
// then any given on the command line). A directory that does not exist
// is no problem; a file that cannot be read or parsed is reported in
// Problems and skipped, never fatal.
func LoadProfiles(dirs ...string) Profiles {
	ps := Profiles{From: make(map[string]string), Replaced: make(map[string][]string)}
	byName := make(map[string]Profile)
	for _, dir := range dirs {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.md"))
		sort.Strings(paths)
		for _, path := range paths {
			p, notes, err := readProfile(path)
			ps.Problems = append(ps.Problems, notes...)
			if err != nil {
				var pe *ProfileProblem
				if errors.As(err, &pe) {
					ps.Problems = append(ps.Problems, *pe)
				} else {
					ps.Problems = append(ps.Problems, ProfileProblem{Path: path, Skipped: true, Msg: err.Error()})
				}
				continue
			}
			if prev, ok := ps.From[p.Name]; ok {
				ps.Replaced[p.Name] = append(ps.Replaced[p.Name], prev)
			}
			byName[p.Name], ps.From[p.Name] = p, path
		}
	}
	for _, p := range byName {
		ps.List = append(ps.List, p)
	}
	slices.SortFunc(ps.List, func(a, b Profile) int { return strings.Compare(a.Name, b.Name) })
	return ps
}

// frontMatter is a profile file's YAML header.
type frontMatter struct {
	Name                string    `yaml:"name"`
	Description         string    `yaml:"description"`
	Tools               yaml.Node `yaml:"tools"`
	Model               string    `yaml:"model"`
	MaxIterations       int       `yaml:"max_iterations"`
	BudgetTokens        string    `yaml:"budget_tokens"`
	BudgetCalls         int64     `yaml:"budget_calls"`
	BudgetSeconds       int64     `yaml:"budget_seconds"`
	ProjectInstructions *bool     `yaml:"project_instructions"`
	EnvKeep             yaml.Node `yaml:"env_keep"`
	EnvDrop             yaml.Node `yaml:"env_drop"`
	TaskMemory          string    `yaml:"task_memory"`
	TaskPids            int       `yaml:"task_pids"`
	TaskCPUs            float64   `yaml:"task_cpus"`
	Sandbox             string    `yaml:"sandbox"`
	SandboxNetwork      *bool     `yaml:"sandbox_network"`
}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// readProfile parses one file; notes are remarks on a file that loads.
func readProfile(path string) (Profile, []ProfileProblem, error) {
	skip := func(line int, format string, args ...any) error {
		return &ProfileProblem{Path: path, Line: line, Skipped: true, Msg: fmt.Sprintf(format, args...)}
	}
	st, err := os.Stat(path)
	if err != nil {
		return Profile{}, nil, skip(0, "%v", err)
	}
	if st.Size() > maxProfileBytes {
		return Profile{}, nil, skip(0, "%d bytes is more than a profile may have (%d)", st.Size(), maxProfileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, nil, skip(0, "%v", err)
	}
	return ParseProfile(path, data)
}

// ParseProfile parses one profile file's content (path names it in
// problems): the profile, notes on a file that loads, or a
// *ProfileProblem saying why it does not.
func ParseProfile(path string, data []byte) (Profile, []ProfileProblem, error) {
	skip := func(line int, format string, args ...any) error {
		return &ProfileProblem{Path: path, Line: line, Skipped: true, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > maxProfileBytes {
		return Profile{}, nil, skip(0, "%d bytes is more than a profile may have (%d)", len(data), maxProfileBytes)
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return Profile{}, nil, skip(1, "no front matter: the file must start with a line \"---\", then name and description in YAML, then \"---\"")
	}
	header, body, ok := bytes.Cut(rest, []byte("\n---"))
	if !ok || (len(body) > 0 && body[0] != '\n') {
		return Profile{}, nil, skip(1, "the front matter is not closed by a line \"---\"")
	}
	fm, notes, err := parseFrontMatter(path, header)
	if err != nil {
		return Profile{}, notes, err
	}
	if fm.Name == "" {
		fm.Name = strings.TrimSuffix(filepath.Base(path), ".md")
	}
	if !validName.MatchString(fm.Name) {
		return Profile{}, notes, skip(2, "name %q: use lowercase letters, digits, - and _ (at most 64)", fm.Name)
	}
	if strings.TrimSpace(fm.Description) == "" {
		return Profile{}, notes, skip(2, "no description: the model reads it to decide when to use %s", fm.Name)
	}
	if fm.MaxIterations < 0 {
		return Profile{}, notes, skip(2, "max_iterations must not be negative")
	}
	budget := Budget{Calls: fm.BudgetCalls}
	if budget.Time, err = BudgetSeconds("budget_seconds", fm.BudgetSeconds); err != nil {
		return Profile{}, notes, skip(2, "%v", err)
	}
	if fm.BudgetCalls < 0 {
		return Profile{}, notes, skip(2, "budget_calls must not be negative (0 or absent is no bound)")
	}
	if fm.BudgetTokens != "" {
		if budget.Tokens, err = ParseTokens(fm.BudgetTokens); err != nil {
			return Profile{}, notes, skip(2, "budget_tokens: %v", err)
		}
	}
	tools, toolNotes, err := profileTools(path, fm.Tools)
	notes = append(notes, toolNotes...)
	if err != nil {
		return Profile{}, notes, err
	}
	var env environ.Policy
	if env.Keep, err = profileNames(path, "env_keep", fm.EnvKeep); err != nil {
		return Profile{}, notes, err
	}
	if env.Drop, err = profileNames(path, "env_drop", fm.EnvDrop); err != nil {
		return Profile{}, notes, err
	}
	limits := resource.Limits{Pids: fm.TaskPids, CPUs: fm.TaskCPUs}
	if fm.TaskMemory != "" {
		if limits.Memory, err = resource.ParseSize(fm.TaskMemory); err != nil {
			return Profile{}, notes, skip(2, "task_memory: %v", err)
		}
	}
	if err := limits.Validate(); err != nil {
		return Profile{}, notes, skip(2, "task_*: %s", strings.TrimPrefix(err.Error(), "proc: "))
	}
	var mode sandbox.Mode
	if fm.Sandbox != "" {
		if mode, err = sandbox.ParseMode(fm.Sandbox); err != nil {
			return Profile{}, notes, skip(2, "sandbox: %s", strings.TrimPrefix(err.Error(), "proc: "))
		}
	}
	p := Profile{
		Name: fm.Name, Description: strings.TrimSpace(fm.Description), System: strings.TrimSpace(string(body)),
		Tools: tools, MaxIterations: fm.MaxIterations, ModelName: strings.TrimSpace(fm.Model), Budget: budget,
		NoProjectInstructions: fm.ProjectInstructions != nil && !*fm.ProjectInstructions,
		Env:                   env,
		Limits:                limits,
		Sandbox:               mode,
		SandboxNetwork:        fm.SandboxNetwork,
	}
	return p, notes, nil
}

// parseFrontMatter reads the YAML header (its line 1 is the file's line
// 2). A value of the wrong type skips the file, saying which key and
// what YAML said of it; a key it does not know is a note, which names
// the known key it may be a slip for, except Claude Code's keys that
// mean nothing here, which are ignored quietly.
func parseFrontMatter(path string, header []byte) (frontMatter, []ProfileProblem, error) {
	var fm frontMatter
	skip := func(line int, msg string) error {
		return &ProfileProblem{Path: path, Line: line, Skipped: true, Msg: "front matter: " + msg}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(header, &doc); err != nil {
		return fm, nil, skip(yamlLine(err)+1, strings.TrimPrefix(yamlMsg(err), "yaml: "))
	}
	if doc.Kind == 0 {
		return fm, nil, nil // empty
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fm, nil, skip(root.Line+1, "not keys with values (name: …, description: …)")
	}
	keys := map[int]string{} // by line
	var notes []ProfileProblem
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		keys[k.Line] = k.Value
		if !slices.Contains(profileKeys, k.Value) && !slices.Contains(claudeKeys, k.Value) {
			msg := fmt.Sprintf("unknown key %q is ignored", k.Value)
			if near := text.Nearest(k.Value, profileKeys); near != "" {
				msg += "; did you mean " + near + "?"
			}
			notes = append(notes, ProfileProblem{Path: path, Line: k.Line + 1, Msg: msg})
		}
	}
	var te *yaml.TypeError
	if err := root.Decode(&fm); errors.As(err, &te) {
		// One error per value, as "line 3: cannot unmarshal !!str `lots` into int".
		var msgs []string
		for _, e := range te.Errors {
			line := yamlLine(errors.New(e))
			msg := fileLines(strings.TrimPrefix(e, fmt.Sprintf("line %d: ", line)))
			if key := keys[line]; key != "" {
				msg = key + ": " + msg
			}
			if len(msgs) > 0 {
				msg = fmt.Sprintf("line %d: %s", line+1, msg)
			}
			msgs = append(msgs, msg)
		}
		return fm, notes, skip(yamlLine(te)+1, strings.Join(msgs, "; "))
	} else if err != nil {
		return fm, notes, skip(0, err.Error())
	}
	return fm, notes, nil
}

// fileLines renumbers the lines a YAML message names as the file's: the
// front matter starts on its line 2.
func fileLines(msg string) string {
	return yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+1)
	})
}

// profileKeys are the keys of a profile's front matter (frontMatter's).
var profileKeys = []string{"name", "description", "tools", "model", "max_iterations", "budget_tokens", "budget_calls", "budget_seconds", "project_instructions", "env_keep", "env_drop", "task_memory", "task_pids", "task_cpus", "sandbox", "sandbox_network"}

// claudeKeys are Claude Code's front matter keys that offstage has no
// use for: a file written for Claude Code loads without a note.
var claudeKeys = []string{"color", "permissionMode", "skills"}

// nameList reads a list of names, or names separated by commas; ok is
// false when n is neither.
func nameList(n yaml.Node) (names []string, ok bool) {
	switch n.Kind {
	case 0:
		return nil, true
	case yaml.ScalarNode:
		for _, s := range strings.Split(n.Value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				names = append(names, s)
			}
		}
		return names, true
	case yaml.SequenceNode:
		err := n.Decode(&names)
		return names, err == nil
	}
	return nil, false
}

// profileNames reads env_keep or env_drop: variable names or patterns.
func profileNames(path, key string, n yaml.Node) ([]string, error) {
	names, ok := nameList(n)
	if !ok {
		return nil, &ProfileProblem{Path: path, Line: n.Line + 1, Skipped: true, Msg: key + ": a list of environment variable names, or names separated by commas"}
	}
	for _, name := range names {
		if err := environ.ValidName(name); err != nil {
			return nil, &ProfileProblem{Path: path, Line: n.Line + 1, Skipped: true, Msg: key + ": " + err.Error()}
		}
	}
	return names, nil
}

// profileTools reads tools: a list, or names separated by commas; nil
// (all tools) when absent.
func profileTools(path string, n yaml.Node) ([]string, []ProfileProblem, error) {
	if n.Kind == 0 {
		return nil, nil, nil
	}
	names, ok := nameList(n)
	if !ok {
		return nil, nil, &ProfileProblem{Path: path, Line: n.Line + 1, Skipped: true, Msg: "tools: a list of tool names, or names separated by commas"}
	}
	var out []string
	var notes []ProfileProblem
	for _, name := range names {
		if mapped, ok := claudeTools[name]; ok {
			if mapped == "" {
				notes = append(notes, ProfileProblem{Path: path, Line: n.Line + 1, Msg: fmt.Sprintf("tool %s (Claude Code's) has no equivalent here and is left out", name)})
				continue
			}
			name = mapped
		}
		if !slices.Contains(ToolNames(), name) {
			return nil, notes, &ProfileProblem{Path: path, Line: n.Line + 1, Skipped: true, Msg: fmt.Sprintf("tools: there is no tool %q; the tools are %s", name, strings.Join(ToolNames(), ", "))}
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if out == nil {
		out = []string{} // it named tools, none of which exists here: it gets none
	}
	return out, notes, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlLine returns the line a YAML error names (1-based within the front
// matter), or 0.
func yamlLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func yamlMsg(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "\n"); i > 0 {
		msg = msg[:i]
	}
	return regexp.MustCompile(`^yaml: line \d+: `).ReplaceAllString(msg, "")
}
