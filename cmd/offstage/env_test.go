package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/provider/providertest"
	"github.com/offstage/offstage/provider/scripted"
)

// scriptRunning writes a scripted model's script that runs command in the
// foreground, then answers "done".
func scriptRunning(t *testing.T, command string) string {
	t.Helper()
	input, _ := json.Marshal(map[string]string{"command": command})
	script := `{"turns": [{"tool_calls": [{"name": "bash", "input": ` + string(input) + `}]}, {"text": "done"}]}`
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCommandsSeeTheEnvironmentPolicy: issue 19 item 4, end to end. By
// default keys, tokens and URL passwords stay out of commands; the
// config file and the flags keep and drop names; the model is told the
// names withheld, never the values.
func TestCommandsSeeTheEnvironmentPolicy(t *testing.T) {
	config := t.TempDir()
	os.MkdirAll(filepath.Join(config, "offstage"), 0o755)
	if err := os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte("env:\n  keep: [NPM_TOKEN]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_CONFIG_HOME=" + config, "GITHUB_TOKEN=ghp_e2e1", "NPM_TOKEN=npm_e2e2", "DATABASE_URL=postgres://a:pw_e2e3@db/a",
		"PLAIN_DROP=plain_e2e4", "AWS_SECRET_ACCESS_KEY=aws_e2e5", "GEMINI_API_KEY=gem_e2e6", "PLAIN_KEEP=plain_e2e7"}
	script := scriptRunning(t, "env | grep _e2e | sort")
	cmd, mark := offstage(t, env, "run", "--no-journal", "--json", "--script", script, "--env-drop", "PLAIN_DROP", "--env-keep", "AWS_*", "go")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	for _, gone := range []string{"ghp_e2e1", "pw_e2e3", "plain_e2e4", "gem_e2e6"} {
		if strings.Contains(text, gone) {
			t.Errorf("a command or the model saw %s", gone)
		}
	}
	for _, kept := range []string{"NPM_TOKEN=npm_e2e2", "AWS_SECRET_ACCESS_KEY=aws_e2e5", "PLAIN_KEEP=plain_e2e7"} {
		if !strings.Contains(text, kept) {
			t.Errorf("the command did not see %s", kept)
		}
	}
	for _, named := range []string{"DATABASE_URL", "GEMINI_API_KEY", "GITHUB_TOKEN", "PLAIN_DROP"} {
		if !strings.Contains(text, named) {
			t.Errorf("the model was not told %s was withheld", named)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
	noSurvivors(t, mark)
}

func TestEnvPolicyMistakes(t *testing.T) {
	config := t.TempDir()
	os.MkdirAll(filepath.Join(config, "offstage"), 0o755)
	bad := filepath.Join(config, "offstage", "config.yaml")
	for _, tc := range []struct {
		config string
		args   []string
		want   string
	}{
		{"", []string{"--env-keep", "A=B"}, "cannot hold ="},
		{"", []string{"--env-keep", "X", "--env-drop", "X"}, "both name X"},
		{"env:\n  kep: [X]\n", nil, `line 2: unknown key "kep" in env; did you mean keep?`},
		// Issue 37 item 11: this said "field limts not found in type main.userConfig".
		{"limts:\n  memory: 1G\n", nil, `line 1: unknown key "limts"; did you mean limits?`},
		{"colour: red\n", nil, `line 1: unknown key "colour"; the keys there are env, limits, sandbox, prices`},
		{"prices:\n  gpt-4.1: {input: 2, outptu: 8}\n", nil, `line 2: unknown key "outptu" in a price; did you mean output?`},
		{"env:\n  keep: [\"A=1\"]\n", nil, "cannot hold ="},
	} {
		os.WriteFile(bad, []byte(tc.config), 0o644)
		args := append([]string{"run", "--no-journal", "--script", scriptRunning(t, "true")}, tc.args...)
		cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + config}, append(args, "go")...)
		msg, err := cmd.CombinedOutput()
		if code := exitOf(t, err); code != 2 || !strings.Contains(string(msg), tc.want) {
			t.Errorf("config %q, args %q: exit %d, %s; want exit 2 saying %q", tc.config, tc.args, code, msg, tc.want)
		}
	}
}

// TestCommandsCannotReadOffstage: issue 19 item 3, end to end. A command
// read offstage's keys from /proc/$PPID/environ. Root reads any process,
// so as root the test runs offstage as nobody.
func TestCommandsCannotReadOffstage(t *testing.T) {
	bin, cred := proctest.Unprivileged(t)
	script := scriptRunning(t, `for f in environ mem; do (exec 3< /proc/$PPID/$f) 2>/dev/null && echo $f-opened || echo $f-denied; done; tr '\0' '\n' < /proc/$PPID/environ | grep -c e2e-secret`)
	if err := os.Rename(script, filepath.Join(filepath.Dir(bin), "script.json")); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(filepath.Dir(bin), "script.json")
	home := filepath.Dir(bin) // nobody's home for the test: root's is closed to it
	cmd, mark := offstage(t, []string{"OPENAI_API_KEY=sk-e2e-secret", "HOME=" + home, "XDG_CONFIG_HOME=" + home}, "run", "--no-journal", "--json", "--script", script, "go")
	cmd.Path, cmd.Args[0] = bin, bin
	// Run from inside some offstage's shell, the test's offstage would be a
	// nested host, which stays readable on purpose.
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "OFFSTAGE_MARK=") })
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	for _, want := range []string{"environ-denied", "mem-denied"} {
		if !strings.Contains(text, want) {
			t.Errorf("the command's probe does not say %q", want)
		}
	}
	if strings.Contains(text, "sk-e2e-secret") {
		t.Error("the command read the key")
	}
	if t.Failed() {
		t.Logf("output:\n%s\n%s", text, errOut.String())
	}
	noSurvivors(t, mark)
}

// TestProjectProfilesCannotKeepSecrets: env_keep in a repository's own
// profile is ignored (the repository must not choose which of the user's
// secrets its commands see); the same file named with --agents is the
// user's choice and is honoured.
func TestProjectProfilesCannotKeepSecrets(t *testing.T) {
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "spawn_agent", "input": {"profile": "deployer", "prompt": "go"}}]},
		{"text": "done"}
	], "agents": {"deployer": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo token=$GITHUB_TOKEN > seen.txt"}}]},
		{"text": "ok"}
	]}}`), 0o644)
	for _, tc := range []struct {
		name   string
		agents bool
		want   string
	}{
		{"project", false, "token=\n"},
		{"--agents", true, "token=ghp_profile\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", "--no-journal", "--script", script}
			cmd, _ := offstage(t, []string{"GITHUB_TOKEN=ghp_profile", "HOME=" + t.TempDir(), "XDG_CONFIG_HOME="}, "run")
			profiles := filepath.Join(cmd.Dir, ".offstage", "agents")
			os.MkdirAll(profiles, 0o755)
			os.Mkdir(filepath.Join(cmd.Dir, ".git"), 0o755)
			os.WriteFile(filepath.Join(profiles, "deployer.md"), []byte("---\nname: deployer\ndescription: deploys\nenv_keep: GITHUB_TOKEN\n---\nDeploy.\n"), 0o644)
			if tc.agents {
				args = append(args, "--agents", profiles)
			}
			cmd.Args = append([]string{cmd.Args[0]}, append(args, "go")...)
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			if code := exitOf(t, cmd.Run()); code != 0 {
				t.Fatalf("exit %d\n%s", code, errOut.String())
			}
			seen, err := os.ReadFile(filepath.Join(cmd.Dir, "seen.txt"))
			if err != nil || string(seen) != tc.want {
				t.Errorf("the sub-agent's shell saw %q (%v), want %q", seen, err, tc.want)
			}
			if said := strings.Contains(errOut.String(), "env_keep is ignored"); said == tc.agents {
				t.Errorf("stderr says env_keep is ignored: %v, want %v:\n%s", said, !tc.agents, errOut.String())
			}
		})
	}
}

// TestHostsEnvironHoldsNoKey: issue 33 item 5, end to end. A command of a
// host run as the same user (root on root's hosts, which no protection of
// the host's keeps out) reads the host's /proc/$PPID/environ and finds no
// key; the host's own provider client still sends it (the fake server
// refuses any other).
func TestHostsEnvironHoldsNoKey(t *testing.T) {
	const key = "sk-e2e-environ-secret"
	model, err := scripted.Parse([]byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "tr '\\0' '\\n' </proc/$PPID/environ | grep -c environ-secret; tr '\\0' '\\n' </proc/$PPID/environ | grep -c ^OPENAI_API_KEY="}}]},
		{"text": "done"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := providertest.OpenAI(model, providertest.Options{Key: key})
	defer srv.Close()
	cmd, mark := offstage(t, []string{"OPENAI_API_KEY=" + key, "OPENAI_BASE_URL=" + srv.URL}, "run", "--no-journal", "--json", "--model", "fake", "go")
	// Inside some offstage's shell the test's offstage would be a nested
	// host, whose block stays as it was on purpose.
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "OFFSTAGE_MARK=") })
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitOf(t, cmd.Run()); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	// Not root, the host is not dumpable and its block is closed to its
	// commands anyway; as root behind the root fence, Landlock closes it
	// too (ptrace-mode reads stay in the command's domain). Without the
	// fence (marks mode) root's command reads it, and proc's
	// TestHideWithheldClearsTheEnvironmentBlock checks the block there.
	read := strings.Contains(text, `"output\":\"0\\n1\\n\"`)
	denied := strings.Contains(text, "Permission denied")
	if strings.Contains(text, key) || !read && !denied {
		t.Errorf("the command found the key in its host's environ block (want counts 0 for the value, 1 for the name)")
	}
	if strings.Contains(errOut.String(), "stay readable") {
		t.Errorf("offstage could not hide the keys: %s", errOut.String())
	}
	if t.Failed() {
		t.Logf("output:\n%s\n%s", text, errOut.String())
	}
	noSurvivors(t, mark)
}

// TestConfigKeysAreUserConfigs: the keys the typo check knows are the
// config file's own, so a section added to userConfig is not refused as
// unknown (prices once was).
func TestConfigKeysAreUserConfigs(t *testing.T) {
	var tags []string
	ty := reflect.TypeOf(userConfig{})
	for i := range ty.NumField() {
		tags = append(tags, strings.Split(ty.Field(i).Tag.Get("yaml"), ",")[0])
	}
	if !slices.Equal(tags, configKeys[""]) {
		t.Errorf("userConfig's sections %v, configKeys knows %v", tags, configKeys[""])
	}
}
