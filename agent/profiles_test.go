package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/provider"
	"github.com/offstage/offstage/provider/scripted"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadProfiles(t *testing.T) {
	root := t.TempDir()
	user, project, extra := filepath.Join(root, "user"), filepath.Join(root, "project"), filepath.Join(root, "extra")
	write(t, user, "reviewer.md", "---\nname: reviewer\ndescription: the user's reviewer\n---\nReview, user style.\n")
	write(t, user, "tester.md", "---\nname: tester\ndescription: Runs the tests.\ntools: [bash, task_wait]\nmax_iterations: 7\n---\nRun the tests.\n")
	project1 := write(t, project, "reviewer.md", "---\nname: reviewer\ndescription: the project's reviewer\ntools: bash, task_list\nproject_instructions: false\n---\nReview, project style.\n")
	// A Claude Code file, as such files are written.
	write(t, project, "claude.md", "---\nname: code-explorer\ndescription: Explores code. Use it to find where things are.\ntools: Read, Grep, Glob, Bash, Edit\nmodel: sonnet\ncolor: blue\n---\n\nYou explore code bases.\n")
	bad := write(t, project, "bad.md", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
	write(t, project, "nofront.md", "Just a prompt, no front matter.\n")
	write(t, project, "notool.md", "---\nname: wrongtool\ndescription: names a tool that does not exist\ntools: bash, frobnicate\n---\nx\n")
	write(t, project, "README.txt", "not a profile")
	write(t, extra, "tester.md", "---\ndescription: Runs the tests, from --agents.\n---\nRun them all.\n")

	got := agent.LoadProfiles(user, project, extra, filepath.Join(root, "missing"))
	names := map[string]agent.Profile{}
	for _, p := range got.List {
		names[p.Name] = p
	}
	want := map[string]agent.Profile{
		"reviewer":      {Name: "reviewer", Description: "the project's reviewer", System: "Review, project style.", Tools: []string{"bash", "task_list"}, NoProjectInstructions: true},
		"code-explorer": {Name: "code-explorer", Description: "Explores code. Use it to find where things are.", System: "You explore code bases.", Tools: []string{"bash"}, ModelName: "sonnet"},
		"tester":        {Name: "tester", Description: "Runs the tests, from --agents.", System: "Run them all."},
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("profiles (-want +got):\n%s", diff)
	}
	if got.From["reviewer"] != project1 {
		t.Errorf("reviewer from %s, want the project's file", got.From["reviewer"])
	}
	wantReplaced := map[string][]string{"reviewer": {filepath.Join(user, "reviewer.md")}, "tester": {filepath.Join(user, "tester.md")}}
	if diff := cmp.Diff(wantReplaced, got.Replaced); diff != "" {
		t.Errorf("replaced (-want +got):\n%s", diff)
	}
	var problems []string
	for _, p := range got.Problems {
		problems = append(problems, p.String())
	}
	all := strings.Join(problems, "\n")
	for _, w := range []string{
		bad + ":2: skipped: front matter: did not find expected",
		"nofront.md:1: skipped: no front matter",
		`notool.md:4: skipped: tools: there is no tool "frobnicate"`,
		"claude.md:4: tool Edit (Claude Code's) has no equivalent here and is left out",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("problems lack %q:\n%s", w, all)
		}
	}
	if len(problems) != 4 {
		t.Errorf("%d problems, want 4:\n%s", len(problems), all)
	}
}

// TestProfileMistakesNameTheirKeyAndLine (issue 23 item 11): a value of
// the wrong type said only "front matter: unmarshal errors:", and a
// misspelt key was ignored without a word.
func TestProfileMistakesNameTheirKeyAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, front string
		skipped     bool
		want        []string
	}{
		{"a word for a number", "name: x\ndescription: d\nmax_iterations: lots\n", true,
			[]string{"p.md:4: skipped: front matter: max_iterations: cannot unmarshal !!str `lots` into int"}},
		{"two of them", "name: x\nmax_iterations: lots\nproject_instructions: maybe\ndescription: d\n", true,
			[]string{"p.md:3: skipped: front matter: max_iterations: cannot unmarshal !!str `lots` into int; line 4: project_instructions: cannot unmarshal !!str `maybe` into bool"}},
		{"a key twice", "name: x\nname: y\ndescription: d\n", true,
			[]string{`p.md:3: skipped: front matter: name: mapping key "name" already defined at line 2`}},
		{"a list for the front matter", "- name\n- description\n", true,
			[]string{"p.md:2: skipped: front matter: not keys with values"}},
		{"a misspelt key", "name: x\ndescription: d\nmodle: gpt-4.1\nmax_iteration: 3\nflavour: mild\n", false,
			[]string{`p.md:4: unknown key "modle" is ignored; did you mean model?`, `p.md:5: unknown key "max_iteration" is ignored; did you mean max_iterations?`, `p.md:6: unknown key "flavour" is ignored` + "\n"}},
		{"Claude Code's keys", "name: x\ndescription: d\ncolor: blue\npermissionMode: plan\n", false, nil},
		// Budgets that would have been none, or wrapped to a fraction of a
		// second (an outsider's finding), each named for its key.
		{"NaN tokens", "name: x\ndescription: d\nbudget_tokens: NaN\n", true, []string{`skipped: budget_tokens: "NaN" is not a token count`}},
		{"a fraction of a token", "name: x\ndescription: d\nbudget_tokens: 0.3\n", true, []string{`skipped: budget_tokens: "0.3" is less than one token`}},
		{"seconds past a duration", "name: x\ndescription: d\nbudget_seconds: 18446744074\n", true, []string{"skipped: budget_seconds is at most 9223372036"}},
		{"negative calls", "name: x\ndescription: d\nbudget_calls: -2\n", true, []string{"skipped: budget_calls must not be negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, notes, err := agent.ParseProfile("p.md", []byte("---\n"+tc.front+"---\nbody\n"))
			var got strings.Builder
			for _, n := range notes {
				got.WriteString(n.String() + "\n")
			}
			if err != nil {
				got.WriteString(err.Error() + "\n")
			}
			if (err != nil) != tc.skipped {
				t.Errorf("ParseProfile() error = %v, want skipped %v", err, tc.skipped)
			}
			if tc.want == nil && got.Len() > 0 {
				t.Errorf("ParseProfile() said %q, want nothing", got.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(got.String(), w) {
					t.Errorf("ParseProfile() said:\n%s\nwant %q", got.String(), w)
				}
			}
		})
	}
}

func TestFindProjectInstructions(t *testing.T) {
	repo := t.TempDir()
	os.Mkdir(filepath.Join(repo, ".git"), 0o755)
	sub := filepath.Join(repo, "pkg", "deep")
	os.MkdirAll(sub, 0o755)
	write(t, repo, "AGENTS.md", "Use gofmt.")
	write(t, filepath.Join(repo, "pkg"), "AGENTS.md", "Package rules.")
	write(t, filepath.Dir(repo), "AGENTS.md", "outside the repository: never read")
	text, files, err := agent.FindProjectInstructions(sub)
	if err != nil || len(files) != 2 {
		t.Fatalf("FindProjectInstructions() = %q, %v, %v", text, files, err)
	}
	if i, j := strings.Index(text, "Use gofmt."), strings.Index(text, "Package rules."); i < 0 || j < i || strings.Contains(text, "never read") {
		t.Errorf("instructions = %q, want the root's first, then the package's, nothing from outside", text)
	}
	write(t, repo, "AGENTS.md", strings.Repeat("x", agent.MaxInstructionBytes+100))
	text, _, _ = agent.FindProjectInstructions(sub)
	if len(text) > agent.MaxInstructionBytes+100 || !strings.Contains(text, "more bytes of project instructions were cut") {
		t.Errorf("a long AGENTS.md gave %d bytes, want it cut to %d with a note", len(text), agent.MaxInstructionBytes)
	}
}

// TestProjectInstructionsReachTheModels: the top level and a sub-agent
// get AGENTS.md in their system prompts; a profile that opts out does not.
func TestProjectInstructionsReachTheModels(t *testing.T) {
	m, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "with", "prompt": "go"}}]},
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "without", "prompt": "go"}}]},
		{"text": "done"}
	], "agents": {"with": [{"text": "ok"}], "without": [{"text": "ok"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rec := &systemRecorder{Model: m, systems: map[string]string{}}
	s, err := agent.New(t.Context(), agent.Config{
		Model: rec, System: "You are the top level.", ProjectInstructions: "ALWAYS RUN THE TESTS",
		Profiles: []agent.Profile{{Name: "with", Description: "a", System: "sub one"}, {Name: "without", Description: "b", System: "sub two", NoProjectInstructions: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := s.Turn(t.Context(), "go", agent.Discard); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for who, want := range map[string]bool{"": true, "with": true, "without": false} {
		if got := strings.Contains(rec.systems[who], "ALWAYS RUN THE TESTS"); got != want {
			t.Errorf("%q's system prompt %q: instructions present %v, want %v", who, rec.systems[who], got, want)
		}
	}
}

// systemRecorder is a model that remembers each agent's system prompt.
type systemRecorder struct {
	provider.Model
	mu      sync.Mutex
	systems map[string]string
}

func (r *systemRecorder) Generate(ctx context.Context, req provider.Request, emit func(provider.Event)) (provider.Response, error) {
	r.mu.Lock()
	r.systems[req.Agent] = req.System
	r.mu.Unlock()
	return r.Model.Generate(ctx, req, emit)
}
