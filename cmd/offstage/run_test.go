package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/offstage/offstage/provider/providertest"
	"github.com/offstage/offstage/provider/scripted"
)

const oneShotScript = `{"turns": [
  {"text": "Starting it in the background.", "tool_calls": [{"name": "bash", "input": {"command": "sleep 0.3; echo from the background", "run_in_background": true}}]},
  {"text": "It is running; I will report back."},
  {"expect": "from the background", "text": "It printed: from the background."}
]}`

func exitOf(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("running offstage: %v", err)
	return -1
}

func TestRunOneShotAgainstAFakeOpenAIServer(t *testing.T) {
	model, err := scripted.Parse([]byte(oneShotScript))
	if err != nil {
		t.Fatal(err)
	}
	srv := providertest.OpenAI(model, providertest.Options{Key: "sk-test"})
	defer srv.Close()
	env := []string{"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=" + srv.URL}

	t.Run("json", func(t *testing.T) {
		cmd, mark := offstage(t, env, "run", "--json", "--model", "fake", "start something")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if code := exitOf(t, cmd.Run()); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
		}
		types := map[string]int{}
		var answers []string
		// Issue 37 item 8: the first event names the session, for --resume=.
		var first struct {
			Type      string
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(out.String()[:strings.IndexByte(out.String(), '\n')]), &first); first.Type != "session" || first.SessionID == "" {
			t.Errorf("the first event is %+v, want the session and its id", first)
		}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("not a JSON line: %q", line)
			}
			typ, _ := e["type"].(string)
			types[typ]++
			if typ == "turn_end" {
				answers = append(answers, e["text"].(string))
				// docs/cli.md: each turn_end has the turn's usage (an
				// outsider found none).
				if u, _ := e["usage"].(map[string]any); u == nil || u["model_calls"] == nil || u["model_calls"].(float64) < 1 || u["input_tokens"].(float64) < 1 {
					t.Errorf("turn_end = %s, want the turn's usage", line)
				}
			}
			if typ == "turn_start" && e["autonomous"] == true {
				types["autonomous"]++
			}
			if tk, _ := e["task"].(map[string]any); tk != nil && tk["event"] == "background_idle" {
				types["background_idle"]++ // issue 25 item 5: once, when the one shell ends
			}
		}
		if types["tool_call"] != 1 || types["task"] == 0 || types["autonomous"] != 1 || types["background_idle"] != 1 {
			t.Errorf("event types = %v", types)
		}
		want := []string{"It is running; I will report back.", "It printed: from the background."}
		if strings.Join(answers, "|") != strings.Join(want, "|") {
			t.Errorf("answers = %q, want %q", answers, want)
		}
		noSurvivors(t, mark)
	})

	t.Run("plain", func(t *testing.T) {
		config := t.TempDir()
		if err := os.MkdirAll(filepath.Join(config, "offstage"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte("prices:\n  fake: {input: 10000, output: 20000}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd, mark := offstage(t, append(env, "XDG_CONFIG_HOME="+config), "run", "--model", "fake", "start something")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if code := exitOf(t, cmd.Run()); code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut.String())
		}
		if got := out.String(); got != "It is running; I will report back.\n\nIt printed: from the background.\n" {
			t.Errorf("stdout = %q, want only the answers", got)
		}
		if !strings.Contains(errOut.String(), "→ bash") {
			t.Errorf("stderr lacks the progress: %q", errOut.String())
		}
		// The fake reports 11 tokens in (3 cached) and 7 out a call; the
		// third call is the autonomous turn's.
		if want := "offstage: this session spent 33 tokens in (9 cached), 21 out, 3 model calls, cost 0.75; its autonomous turns 11 tokens in (3 cached), 7 out, 1 model call, cost 0.25.\n"; !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks the end-of-session line %q:\n%s", want, errOut.String())
		}
		noSurvivors(t, mark)
	})
}

func TestConfigurationErrorsExitTwoWithOneSentence(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(script, []byte(`{"turns": [{"text": "hi"}]}`), 0o644)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no command", nil, nil, "no command given"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"no model", nil, []string{"run", "hi"}, "no model is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY"},
		{"no key for openai", nil, []string{"run", "--provider", "openai", "hi"}, "no API key (set OPENAI_API_KEY"},
		{"no key for anthropic", nil, []string{"run", "--provider", "anthropic", "hi"}, "no API key (set ANTHROPIC_API_KEY)"},
		{"unreachable", []string{"OPENAI_API_KEY=k"}, []string{"run", "--base-url", "http://127.0.0.1:1/v1", "hi"}, "cannot reach the model endpoint"},
		{"unknown flag", nil, []string{"run", "--bogus"}, `unknown flag --bogus; see "offstage run --help"`},
		// Issue 37 item 11: typos get a suggestion.
		{"mistyped command", nil, []string{"rnu"}, `unknown command "rnu"; did you mean run?`},
		{"mistyped flag", nil, []string{"run", "--modle", "m", "hi"}, `unknown flag --modle; did you mean --model?`},
		{"wait without a unit", nil, []string{"run", "--wait", "5", "hi"}, `--wait "5" is not a duration: give one with a unit, such as 30s, 5m or 1h30m; see "offstage run --help"`},
		{"lease without a unit", nil, []string{"mcp", "--lease", "90"}, `--lease "90" is not a duration`},
		{"max-running 0", nil, []string{"run", "--max-running", "0", "hi"}, `invalid value "0" for flag -max-running: want a whole number, at least 1`},
		{"mcp max-sessions 0", nil, []string{"mcp", "--http", "127.0.0.1:0", "--max-sessions", "0"}, "--max-sessions must be at least 1, not 0"},
		{"mcp max-running", nil, []string{"mcp", "--max-running", "none"}, `want a whole number, at least 1`},
		{"acp max-running", nil, []string{"acp", "--max-running", "-1"}, `want a whole number, at least 1`},
		{"unknown provider", nil, []string{"run", "--provider", "nope", "hi"}, `unknown provider "nope"`},
		{"scripted without a script", nil, []string{"run", "--provider", "scripted", "hi"}, "needs --script FILE"},
		{"missing script", nil, []string{"run", "--script", "/no/such/script.json", "hi"}, "no such file"},
		{"prompt twice", nil, []string{"run", "--script", script, "--prompt-file", script, "hi"}, "not both"},
		{"missing prompt file", nil, []string{"run", "--script", script, "--prompt-file", "/no/such/prompt"}, "cannot read the prompt file"},
		{"empty prompt on stdin", nil, []string{"run", "--script", script, "-"}, "the prompt in stdin is empty"},
		{"journal dir from the flag", nil, []string{"run", "--script", script, "--state-dir", "/proc/x", "hi"}, "cannot open the journal in /proc/x (set by --state-dir): mkdir /proc/x: no such file or directory; pass --state-dir DIR for another directory, or --no-journal to record nothing"},
		{"journal dir from XDG_STATE_HOME", []string{"XDG_STATE_HOME=/proc/y"}, []string{"mcp"}, "cannot open the journal in /proc/y/offstage (from XDG_STATE_HOME=/proc/y)"},
		{"bad dir", nil, []string{"run", "--script", script, "--dir", "/no/such/dir", "hi"}, "is not a directory"},
		{"demo with arguments", nil, []string{"demo", "extra"}, "demo takes no arguments"},
		{"mcp on all interfaces", nil, []string{"mcp", "--http", "0.0.0.0:0"}, "pass --allow-remote if you mean it"},
		{"mcp with a bad address", nil, []string{"mcp", "--http", "nonsense"}, "is not host:port"},
		{"acp with arguments", nil, []string{"acp", "--script", script, "extra"}, "acp takes no arguments"},
		{"acp with a bad log", nil, []string{"acp", "--script", script, "--log", "/no/such/dir/log"}, "cannot open the log file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, _ := offstage(t, tc.env, tc.args...)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if code := exitOf(t, cmd.Run()); code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, errOut.String())
			}
			last := strings.TrimSpace(errOut.String())
			last = last[strings.LastIndexByte(last, '\n')+1:]
			if !strings.HasPrefix(last, "offstage: ") || !strings.Contains(last, tc.want) {
				t.Errorf("stderr ends with %q, want a sentence with %q", last, tc.want)
			}
			if strings.Contains(errOut.String(), "goroutine ") {
				t.Errorf("a stack trace: %s", errOut.String())
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"demo", "--help"}, {"mcp", "--help"}, {"version"}} {
		cmd, _ := offstage(t, nil, args...)
		var out bytes.Buffer
		cmd.Stdout = &out
		if code := exitOf(t, cmd.Run()); code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		if args[0] != "version" && args[0] != "--help" && !strings.Contains(out.String(), "Examples:") {
			t.Errorf("%v: no examples in\n%s", args, out.String())
		}
		if args[0] == "version" && !strings.HasPrefix(out.String(), "offstage ") {
			t.Errorf("version = %q", out.String())
		}
	}
}

// TestVersionSaysContainment: version -v names the containment in force
// and where each limit holds, and OFFSTAGE_CONTAINMENT=marks forces the
// fallback, where none does.
func TestVersionSaysContainment(t *testing.T) {
	for _, force := range []string{"", "marks"} {
		cmd, _ := offstage(t, nil, "version", "-v")
		cmd.Env = append(cmd.Environ(), "OFFSTAGE_CONTAINMENT="+force)
		var out bytes.Buffer
		cmd.Stdout = &out
		if code := exitOf(t, cmd.Run()); code != 0 {
			t.Fatalf("version -v: exit %d", code)
		}
		_, line, _ := strings.Cut(out.String(), "\n")
		if !strings.HasPrefix(line, "containment: ") || force != "" && !strings.HasPrefix(line, "containment: marks (OFFSTAGE_CONTAINMENT=marks") {
			t.Errorf("OFFSTAGE_CONTAINMENT=%q: version -v said %q, want the containment line", force, out.String())
		}
		// Then where each limit holds, or why it cannot.
		for _, name := range []string{"memory", "pids", "cpu"} {
			want := "\n" + name + " limit: "
			if force == "marks" {
				want += "cannot be enforced: "
			}
			if !strings.Contains(out.String(), want) {
				t.Errorf("OFFSTAGE_CONTAINMENT=%q: version -v said %q, want a line %q", force, out.String(), want[1:])
			}
		}
	}
}

// TestStateIsATaskStateInEveryCommand (issue 23 item 9): --state was the
// journal's directory in run, mcp and acp and a task-state filter in
// offstage tasks. Now the directory is --state-dir everywhere; run's
// --state still sets it, says to use --state-dir, and is not in --help.
func TestStateIsATaskStateInEveryCommand(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(script, []byte(`{"turns": [{"tool_calls": [{"name": "bash", "input": {"command": "true"}}]}, {"text": "hi"}]}`), 0o644)
	dir := filepath.Join(t.TempDir(), "journal-here")
	cmd, _ := offstage(t, nil, "run", "--state", dir, "--script", script, "hello")
	out, err := cmd.CombinedOutput()
	if code := exitOf(t, err); code != 0 {
		t.Fatalf("run --state DIR: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "journal.db")); err != nil {
		t.Errorf("run --state DIR wrote no journal there: %v", err)
	}
	if !strings.Contains(string(out), "use --state-dir") {
		t.Errorf("run --state DIR does not say to use --state-dir:\n%s", out)
	}
	stateFlag := regexp.MustCompile(`(?m)^\s+--state(\s|$)`)
	for _, name := range []string{"run", "mcp", "acp", "tasks"} {
		cmd, _ := offstage(t, nil, name, "--help")
		help, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		if !strings.Contains(string(help), "-state-dir") {
			t.Errorf("%s --help does not list --state-dir", name)
		}
		if listed := stateFlag.Find(help) != nil; listed != (name == "tasks") {
			t.Errorf("%s --help lists --state: %v, want %v\n%s", name, listed, name == "tasks", help)
		}
	}
	cmd, _ = offstage(t, nil, "tasks", "--state-dir", dir, "--state", dir)
	if out, _ := cmd.CombinedOutput(); !strings.Contains(string(out), "the journal's directory is --state-dir") {
		t.Errorf("tasks --state DIR: %s", out)
	}
	cmd, _ = offstage(t, nil, "tasks", "--state-dir", dir, "--state", "completed", "--json")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), `"state":"completed"`) {
		t.Errorf("tasks --state completed: %v\n%s", err, out)
	}
}

// TestTheREADMEsScriptRuns (issue 23 item 12): the scripted model's format
// was documented only in a Go package doc. The CLI page's example is the
// file it names, runs as written, and a mistake in a script is refused
// with its line and column.
func TestTheREADMEsScriptRuns(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	readme, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Trying it without a key")
	_, block, ok2 := strings.Cut(section, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/cli.md has no scripted model's example any more")
	}
	file, err := os.ReadFile(filepath.Join(root, "examples", "scripted", "hello.json"))
	if err != nil || block != string(file) {
		t.Fatalf("docs/cli.md's example is not examples/scripted/hello.json (%v):\n%s", err, block)
	}
	cmd, mark := offstage(t, nil, "run", "--script", filepath.Join(root, "examples", "scripted", "hello.json"), "run the tests")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if code := exitOf(t, cmd.Run()); code != 0 || !strings.HasSuffix(out.String(), "The tests passed.\n") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	noSurvivors(t, mark)

	bad := filepath.Join(t.TempDir(), "typo.json")
	os.WriteFile(bad, []byte("{\"turns\": [\n  {\"txt\": \"hello\"}\n]}\n"), 0o644)
	cmd, _ = offstage(t, nil, "run", "--script", bad, "hi")
	got, err := cmd.CombinedOutput()
	if code := exitOf(t, err); code != 2 || !strings.Contains(string(got), `typo.json: scripted: line 2, column 4: unknown field "txt"`) {
		t.Errorf("a script with a typo: exit %d, %s", code, got)
	}
	cmd, _ = offstage(t, nil, "run", "--help")
	if help, _ := cmd.Output(); !strings.Contains(string(help), `"tool_calls": [{"name": "bash"`) || strings.Contains(string(help), "provider/scripted") {
		t.Errorf("run --help does not give the script's format:\n%s", help)
	}
	// Issue 37 item 15: a blank line before Flags:, and the flags as the
	// docs write them.
	cmd, _ = offstage(t, nil, "run", "--help")
	if help, _ := cmd.Output(); !strings.Contains(string(help), "\n\nFlags:\n  --agents") || strings.Contains(string(help), "\n  -model") {
		t.Errorf("run --help:\n%s", help)
	}
}

// A model endpoint that answers HTTP 500 was reported as one that cannot
// be reached. Now offstage says what it answered (status, a clipped body)
// and that it is the server's error, a runtime failure (exit 1), for both
// providers, and a body that is not JSON (a proxy's page) shows too.
func TestAServerErrorIsNotUnreachable(t *testing.T) {
	for _, tc := range []struct{ ctype, body, want string }{
		{"application/json", `{"error":{"message":"CUDA out of memory in worker 3","type":"server_error"}}`, "CUDA out of memory in worker 3"},
		{"text/html", "<html><body>Bad gateway " + strings.Repeat("x", 5000) + "</body></html>", "<html><body>Bad gateway xxx"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ctype)
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, tc.body)
		}))
		for _, args := range [][]string{
			{"--provider", "openai", "--base-url", srv.URL + "/v1"},
			{"--provider", "anthropic", "--base-url", srv.URL},
		} {
			args = append(append([]string{"run", "--no-journal", "--model", "m"}, args...), "hi")
			cmd, _ := offstage(t, []string{"OPENAI_API_KEY=k", "ANTHROPIC_API_KEY=k"}, args...)
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			code := exitOf(t, cmd.Run())
			last := strings.TrimSpace(errOut.String())
			last = last[strings.LastIndexByte(last, '\n')+1:]
			if code != 1 || !strings.Contains(last, "answered HTTP 500") || !strings.Contains(last, tc.want) ||
				!strings.Contains(last, "not a connection failure") || strings.Contains(last, "cannot reach") || len(last) > 1000 {
				t.Errorf("offstage %s: exit %d, stderr ends with %q", args, code, last)
			}
		}
		srv.Close()
	}
}

// Issue 37 items 1, 4 and 6: the first slips with a local server are
// configuration errors (exit 2) that say what to do: a base URL without
// /v1 (whatever the body's shape), no --model (naming the models the
// server lists), an invalid key reported in the stream.
func TestFirstSlipsWithALocalServer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer bad" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"error":{"message":"Invalid API key provided","code":401}}`+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"model \"gpt-4.1\" not found, try pulling it first","type":"api_error"}}`)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"qwen3:8b","object":"model"},{"id":"llama3.2","object":"model"}]}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"boom"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"no /v1", nil, []string{"--base-url", srv.URL, "--model", "m"},
			[]string{"HTTP 404: boom", "most OpenAI-compatible servers want " + srv.URL + "/v1"}},
		{"no --model", nil, []string{"--base-url", srv.URL + "/v1"},
			[]string{`no model "gpt-4.1", the default for --model: pass --model NAME; the server lists qwen3:8b, llama3.2`}},
		{"invalid key in the stream", []string{"OPENAI_API_KEY=bad"}, []string{"--base-url", srv.URL + "/v1", "--model", "m"},
			[]string{"refused the key", "Invalid API key provided"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--no-journal"}, tc.args...), "hi")
			cmd, _ := offstage(t, tc.env, args...)
			var errOut bytes.Buffer
			cmd.Stderr = &errOut
			code := exitOf(t, cmd.Run())
			last := strings.TrimSpace(errOut.String())
			last = last[strings.LastIndexByte(last, '\n')+1:]
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("stderr ends with %q, want %q", last, w)
				}
			}
			if code != 2 || strings.Contains(last, "malformed") || strings.Contains(last, "Go value") {
				t.Errorf("exit %d, stderr ends with %q; want 2, no internals", code, last)
			}
		})
	}
}

// Issue 37 item 12: the user's own Ctrl-C during a one-shot run showed
// as "✗ the turn failed: turn canceled", and the run could exit 0. It
// is now "⏹ interrupted" and exit 130, as a shell reports SIGINT.
func TestCtrlCEndsAOneShotRunAsInterrupted(t *testing.T) {
	script := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo ready"}}]},
		{"delay_ms": 60000, "text": "too late"}
	]}`), 0o644)
	cmd, mark := offstage(t, nil, "run", "--no-journal", "--script", script, "go")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), "← bash") {
		n, err := stderr.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("offstage ended before its first result: %v\n%s", err, seen.String())
		}
	}
	cmd.Process.Signal(os.Interrupt)
	rest, _ := io.ReadAll(stderr)
	seen.Write(rest)
	if code := exitOf(t, cmd.Wait()); code != 130 || !strings.Contains(seen.String(), "⏹ interrupted") || strings.Contains(seen.String(), "failed") {
		t.Errorf("exit %d, stderr:\n%s\nwant 130 and \"⏹ interrupted\", no failure", code, seen.String())
	}
	noSurvivors(t, mark)
}

// TestAFailedOneShotTurnIsNotCalledAWait: a one-shot turn that fails with
// background work running ends the run at once; stderr said "--wait 5m0s
// ran out" and advised a longer --wait, which no wait had done (found by
// an outside trial).
func TestAFailedOneShotTurnIsNotCalledAWait(t *testing.T) {
	script := filepath.Join(t.TempDir(), "fails.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 30", "run_in_background": true}}]},
		{"expect": "something that never comes", "text": "no"}
	]}`), 0o600)
	cmd, mark := offstage(t, nil, "run", "--script", script, "--no-journal", "go")
	out, err := cmd.CombinedOutput()
	if code := exitOf(t, err); code != 1 || !strings.Contains(string(out), "the turn failed with 1 task still running: cancelled") || strings.Contains(string(out), "--wait") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	noSurvivors(t, mark)
}

// TestABudgetStoppedOneShotEndsAndSaysWhatWasNotHeard: once a session
// budget stops autonomous turns, a one-shot run has no turn left to hear
// its results. It waited out the whole --wait with nothing running and
// exited 0 (an outside trial); now it ends when the work does, naming
// the results the model never heard, and fails.
func TestABudgetStoppedOneShotEndsAndSaysWhatWasNotHeard(t *testing.T) {
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	cmd, mark := offstage(t, nil, "run", "--script", filepath.Join(root, "examples", "scripted", "hello.json"), "--budget-calls", "4", "--wait", "20s", "go")
	out, err := cmd.CombinedOutput()
	if code := exitOf(t, err); code != 1 || !strings.Contains(string(out), "call budget of 4 reached after 4 calls, so the results of shell:1 reached no turn of the model") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	noSurvivors(t, mark)
}
