package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/tools"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAgentsCommand: offstage agents shows each profile's source, what it
// overrides and the files skipped; a project file beats a user one and
// a built-in one, and says so (issue 23 item 11), and a key offstage does
// not know is a note with its line.
func TestAgentsCommand(t *testing.T) {
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".config", "offstage", "agents", "reviewer.md"), "---\nname: reviewer\ndescription: the user's\n---\nx\n")
	cmd, _ := offstage(t, []string{"HOME=" + home, "XDG_CONFIG_HOME="}, "agents")
	os.Mkdir(filepath.Join(cmd.Dir, ".git"), 0o755)
	writeFile(t, filepath.Join(cmd.Dir, ".offstage", "agents", "reviewer.md"), "---\nname: reviewer\ndescription: the project's\ntools: bash\n---\nx\n")
	writeFile(t, filepath.Join(cmd.Dir, ".claude", "agents", "explorer.md"), "---\nname: explorer\ndescription: Explores.\ntools: Read, Grep, Write\nmodel: sonnet\n---\nx\n")
	writeFile(t, filepath.Join(cmd.Dir, ".claude", "agents", "inheritor.md"), "---\nname: inheritor\ndescription: Inherits.\nmodel: inherit\n---\nx\n")
	writeFile(t, filepath.Join(cmd.Dir, ".offstage", "agents", "broken.md"), "---\nname: [\n---\n")
	writeFile(t, filepath.Join(cmd.Dir, ".offstage", "agents", "general.md"), "---\nname: general\ndescription: the project's general\nmodle: gpt-4.1\n---\nx\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("offstage agents: %v\n%s", err, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"reviewer\n  the project's\n  from " + filepath.Join(cmd.Dir, ".offstage", "agents", "reviewer.md") + "; bash",
		"explorer\n  Explores.\n  from " + filepath.Join(cmd.Dir, ".claude", "agents", "explorer.md") + "; bash; model sonnet",
		// Issue 37 item 15: "model inherit" was shown literally.
		"inheritor.md; all tools; the session's model\n",
		"; bash\n  overrides " + filepath.Join(home, ".config", "offstage", "agents", "reviewer.md") + "\n",
		"general\n  the project's general\n  from " + filepath.Join(cmd.Dir, ".offstage", "agents", "general.md") + "; all tools\n  overrides the built-in general\n",
		"general.md:4: unknown key \"modle\" is ignored; did you mean model?",
		"broken.md:2: skipped: front matter:",
		"explorer.md:4: tool Write (Claude Code's) has no equivalent here and is left out",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("offstage agents lacks %q:\n%s", want, got)
		}
	}
}

// TestRunSpawnsAFileDefinedProfile: a profile from --agents is offered
// and runs with its own tools (the script expects its output).
func TestRunSpawnsAFileDefinedProfile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "agents", "counter.md"), "---\nname: counter\ndescription: Counts things.\ntools: bash\n---\nYou count.\n")
	script := filepath.Join(dir, "script.json")
	writeFile(t, script, `{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "counter", "prompt": "count to 3"}}]},
		{"expect": "1 2 3", "text": "The counter says 1 2 3."}
	], "agents": {"counter": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo 1 2 3"}}]},
		{"expect": "1 2 3", "text": "1 2 3"}
	]}}`)
	cmd, mark := offstage(t, nil, "run", "--script", script, "--agents", filepath.Join(dir, "agents"), "count")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("offstage run: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "The counter says 1 2 3.") {
		t.Errorf("stdout: %s\nstderr: %s", out.String(), errOut.String())
	}
	noSurvivors(t, mark)
}

// TestREADMECommands runs, as written, every command of the README and the
// docs pages that needs no key and no network: the set-up and the
// scripted-model examples.
func TestREADMECommands(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	var cmds []string
	for _, page := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(text)) {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "offstage run --script") || strings.HasPrefix(line, "offstage agents") {
				if i := strings.Index(line, "  #"); i > 0 {
					line = strings.TrimSpace(line[:i])
				}
				cmds = append(cmds, line)
			}
		}
	}
	if len(cmds) == 0 {
		t.Fatal("the README has no scripted-model example any more; this test runs it")
	}
	for _, c := range cmds {
		t.Run(c, func(t *testing.T) {
			args := shellWords(t, strings.TrimPrefix(c, "offstage "))
			cmd, mark := offstage(t, nil, args...)
			cmd.Dir = root
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\n%s", c, err, errOut.String())
			}
			if strings.Contains(out.String()+errOut.String(), "no profile") || strings.Contains(errOut.String(), "skipped") {
				t.Errorf("%s:\n%s\n%s", c, out.String(), errOut.String())
			}
			noSurvivors(t, mark)
		})
	}
}

// shellWords splits a command line with double-quoted words.
func shellWords(t *testing.T, s string) []string {
	var words []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				t.Fatalf("unbalanced quotes in %q", s)
			}
			words, s = append(words, s[1:end+1]), s[end+2:]
			continue
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		words, s = append(words, s[:end]), s[end:]
	}
	return words
}

// TestProjectInstructionsFlag: AGENTS.md is read from a subdirectory of
// the repository, and --no-project-instructions turns it off.
func TestProjectInstructionsFlag(t *testing.T) {
	repo := t.TempDir()
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	writeFile(t, filepath.Join(repo, "AGENTS.md"), "Run go vet before you commit.")
	sub := filepath.Join(repo, "internal", "x")
	os.MkdirAll(sub, 0o755)
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"--no-project-instructions"}, false}} {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		var af agentFlags
		af.register(fs, true)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		var system string
		model := systemModel(func(s string) { system = s })
		s, err := agent.Open(t.Context(), agent.Config{Model: model, Tools: tools.Config{Process: proc.Config{Dir: sub}}},
			agent.Surface{NoProjectInstructions: af.noInstructions})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Turn(t.Context(), "hi", agent.Discard); err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
		if strings.Contains(system, "Run go vet") != tc.want {
			t.Errorf("with %v: system prompt %q, want the instructions present %v", tc.args, system, tc.want)
		}
	}
}

// systemModel answers "ok" and tells seen each request's system prompt.
type systemModel func(system string)

func (m systemModel) Generate(_ context.Context, req provider.Request, _ func(provider.Event)) (provider.Response, error) {
	m(req.System)
	return provider.Response{StopReason: provider.EndTurn, Message: provider.Message{Role: provider.Assistant, Content: []provider.Block{{Type: provider.Text, Text: "ok"}}}}, nil
}
