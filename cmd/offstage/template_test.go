package main

import (
	"bufio"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/acpserver"
	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/mcpserver"
	"github.com/offstage/offstage/proc/environ"
	"github.com/offstage/offstage/proc/resource"
	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/provider/scripted"
	"github.com/offstage/offstage/tools"
)

// effective is what a face's session runs with, as its journal is given
// it: what must be the same whichever face opened the session.
type effective struct {
	System, ProjectInstructions string
	Profiles                    []string
	Dir                         string
	Env                         environ.Policy
	Limits                      resource.Limits
	Sandbox                     sandbox.Policy
	Advice                      tools.Advice
	MaxRunning                  int
	HasModel                    bool
	ModelName                   string
}

// capture is a journal that keeps the configuration each surface's
// session was opened with.
type capture struct {
	mu     sync.Mutex
	got    map[string]effective
	opened chan string
}

func (c *capture) Record(ctx context.Context, info agent.SessionInfo, cfg *agent.Config) (agent.Record, error) {
	e := effective{System: cfg.System, ProjectInstructions: cfg.ProjectInstructions, Dir: info.Dir,
		Env: cfg.Tools.Process.EnvPolicy, Limits: cfg.Tools.Process.Limits, Sandbox: cfg.Tools.Process.Sandbox,
		Advice: cfg.Tools.Advice, MaxRunning: cfg.Tasks.MaxRunning, HasModel: cfg.Model != nil, ModelName: info.Model}
	for _, p := range cfg.Profiles {
		e.Profiles = append(e.Profiles, p.Name)
	}
	c.mu.Lock()
	c.got[info.Surface] = e
	c.mu.Unlock()
	c.opened <- info.Surface
	return capturedRecord(info.Surface), nil
}

func (c *capture) Load(context.Context, string) (*agent.Resume, error) {
	return nil, agent.ErrUnknownSession
}

func (c *capture) List(context.Context, string, int) ([]agent.SessionSummary, error) {
	return nil, nil
}

type capturedRecord string

func (r capturedRecord) ID() string          { return string(r) }
func (r capturedRecord) Delivered(...string) {}
func (r capturedRecord) End()                {}

// TestFacesShareOneTemplate holds run, mcp and acp to one configuration:
// built once from the flags and the config file (sessionFlags.template),
// each face's session gets the same system prompt, profiles, project
// instructions, environment policy, limits, sandbox, advice, task options
// and journal. It pins the bug where offstage acp ran its sessions without
// the system prompt run sends.
func TestFacesShareOneTemplate(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	os.MkdirAll(filepath.Join(home, "offstage"), 0o755)
	os.WriteFile(filepath.Join(home, "offstage", "config.yaml"), []byte("env:\n  drop: [CORP_*]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte("Build with make."), 0o644)
	script := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(script, []byte(`{"turns": []}`), 0o644)

	var sf sessionFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	sf.register(fs, "")
	if err := fs.Parse([]string{"--script", script, "--env-drop", "SECRET_X", "--env-keep", "GH_TOKEN", "--max-running", "3"}); err != nil {
		t.Fatal(err)
	}
	model, err := scripted.Parse([]byte(`{"turns": []}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sf.policy()
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{got: make(map[string]effective), opened: make(chan string, 3)}
	cfg, surface := sf.template(model, sf.agents.profiles(dir, sf.model, io.Discard), p, dir, c)
	ctx := t.Context()

	// run: agent.Open with the template.
	runSurface := surface
	runSurface.Name = "run"
	s, err := agent.Open(ctx, cfg, runSurface)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	// mcp: a Service given the template, one in-memory session.
	svc, err := mcpserver.New(ctx, mcpserver.Config{Agent: cfg, Surface: surface})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := svc.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "task_list", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}

	// acp: Serve given the template, one session/new in dir.
	acpCfg := cfg
	acpCfg.Tools.Process.Dir = "" // each ACP session's directory is its cwd
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- acpserver.Serve(ctx, acpserver.Config{Agent: acpCfg, Surface: surface}, inR, outW)
		outW.Close()
	}()
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"`+dir+`","mcpServers":[]}}
`)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":2`) {
				break
			}
		}
		io.Copy(io.Discard, outR)
	}()

	for range 3 {
		select {
		case <-c.opened:
		case <-time.After(30 * time.Second):
			t.Fatalf("sessions opened: %v, want run, mcp and acp", c.got)
		}
	}
	inW.Close()
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v", err)
	}
	<-answered

	want := c.got["run"]
	if want.System != systemPrompt || want.ProjectInstructions == "" || len(want.Profiles) == 0 || want.MaxRunning != 3 || !want.HasModel {
		t.Fatalf("run's session = %+v, want the system prompt, AGENTS.md, the profiles and --max-running", want)
	}
	for _, face := range []string{"mcp", "acp"} {
		if diff := cmp.Diff(want, c.got[face]); diff != "" {
			t.Errorf("%s's session differs from run's (-run +%s):\n%s", face, face, diff)
		}
	}
}
