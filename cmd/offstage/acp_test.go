package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A real peer that nobody here wrote: the TypeScript ACP SDK drives
// offstage acp, and sees a background result arrive while no prompt runs.
func TestACPWithTheTypeScriptSDK(t *testing.T) {
	node := nodeBinary(t, "the TypeScript ACP SDK peer test")
	dir := nodePeer(t, "@agentclientprotocol/sdk")
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [
		{"text": "Starting the build.", "tool_calls": [{"name": "bash", "input": {"command": "echo building; sleep 0.5; echo built", "run_in_background": true}}]},
		{"expect": "shell:1", "text": "It runs in the background."},
		{"expect": "background-result", "text": "The build finished."},
		{"expect": "and now", "text": "Still here."}
	]}`), 0o644)
	cwd, state := t.TempDir(), t.TempDir()
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state})
	cmd.Path, cmd.Args = node, []string{node, filepath.Join(dir, "acp-client.mjs"), cwd, os.Args[0], "acp", "--script", script}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the node client failed: %v\n%s", err, stderr.String())
	}
	var got struct {
		Capabilities struct {
			LoadSession         bool
			PromptCapabilities  map[string]bool
			SessionCapabilities map[string]any
		}
		StopReason  string
		AtPromptEnd int
		Idle        bool
		Updates     []string
		Asked       []string
		BadCwd      *string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("node printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	all := strings.Join(got.Updates, "\n")
	if got.StopReason != "end_turn" || !got.Idle {
		t.Fatalf("stopReason %q, background result while idle %v; updates:\n%s", got.StopReason, got.Idle, all)
	}
	if !got.Capabilities.LoadSession || got.Capabilities.SessionCapabilities["list"] == nil || got.Capabilities.SessionCapabilities["close"] == nil || !got.Capabilities.PromptCapabilities["embeddedContext"] || got.Capabilities.PromptCapabilities["image"] {
		t.Errorf("capabilities = %+v", got.Capabilities)
	}
	if len(got.Asked) != 1 || !strings.HasPrefix(got.Asked[0], "Run: echo building") {
		t.Errorf("permission asked for %q, want the bash call once", got.Asked)
	}
	before := strings.Join(got.Updates[:got.AtPromptEnd], "\n")
	if strings.Contains(before, "The build finished.") || !strings.Contains(before, "tool_call pending execute Run: echo building") {
		t.Errorf("updates by the prompt's end:\n%s", before)
	}
	after := strings.Join(got.Updates[got.AtPromptEnd:], "\n")
	for _, want := range []string{"tool_call_update completed shell:1 completed (exit 0)", "Background work finished (shell:1)"} {
		if !strings.Contains(after, want) {
			t.Errorf("no %q after the prompt ended:\n%s", want, after)
		}
	}
	if got.BadCwd == nil {
		t.Errorf("a relative cwd was accepted")
	} else {
		t.Logf("a relative cwd: %s", *got.BadCwd)
	}
	noSurvivors(t, mark)
	sessions, tasks := journalOf(t, state)
	if len(sessions) != 1 || sessions[0].Surface != "acp" || sessions[0].Cwd != cwd || sessions[0].Model != "scripted script.json" {
		t.Errorf("sessions = %+v", sessions)
	}
	if len(tasks) != 1 || tasks[0].State != "completed" || !tasks[0].Delivered {
		t.Errorf("tasks = %+v", tasks)
	}

	// A second offstage acp on the same journal lists the session, loads
	// it (the conversation replayed), and goes on with it.
	load, mark2 := offstage(t, []string{"XDG_STATE_HOME=" + state})
	load.Path, load.Args = node, []string{node, filepath.Join(dir, "acp-load.mjs"), cwd, os.Args[0], "acp", "--script", script, "--yolo"}
	stdout.Reset()
	stderr.Reset()
	load.Stdout, load.Stderr = &stdout, &stderr
	if err := load.Run(); err != nil {
		t.Fatalf("the node loader failed: %v\n%s", err, stderr.String())
	}
	var loaded struct {
		LoadSession bool
		Listed      []struct{ SessionID, Cwd, Title string }
		Replayed    int
		StopReason  string
		Updates     []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &loaded); err != nil {
		t.Fatalf("node printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	replay := strings.Join(loaded.Updates[:loaded.Replayed], "\n")
	if !loaded.LoadSession || len(loaded.Listed) != 1 || loaded.Listed[0].SessionID != sessions[0].ID || loaded.Listed[0].Title != "build it" {
		t.Errorf("listed = %+v", loaded)
	}
	// Issue 37 item 5: the thread looks as it did live: the background
	// result ends the card that started it, announced as live, and
	// neither the runtime's framing nor raw JSON shows.
	for _, want := range []string{"user build it", "message Starting the build.", "tool_call in_progress execute Run: echo building",
		"tool_call_update  Running in the background as shell:1.", "tool_call_update completed shell:1 completed (exit 0)", "building\nbuilt",
		"thought Background work finished (shell:1); looking at the results.", "message The build finished."} {
		if !strings.Contains(replay, want) {
			t.Errorf("the replay lacks %q:\n%s", want, replay)
		}
	}
	for _, unwanted := range []string{"[offstage]", "background-result", `{"`} {
		if strings.Contains(replay, unwanted) {
			t.Errorf("the replay shows %q:\n%s", unwanted, replay)
		}
	}
	if after := strings.Join(loaded.Updates[loaded.Replayed:], "\n"); loaded.StopReason != "end_turn" || !strings.Contains(after, "message Still here.") {
		t.Errorf("the loaded session's prompt: %s\n%s", loaded.StopReason, after)
	}
	noSurvivors(t, mark2)
}

// Issue 37 item 2: with no key, offstage acp exited 2 before answering
// initialize, and the editor showed a dead agent. Now it answers, and
// session/new fails with the CLI's advice, which the editor shows.
func TestACPWithoutAKeyAnswersAndSaysWhy(t *testing.T) {
	node := nodeBinary(t, "the TypeScript ACP SDK peer test")
	dir := nodePeer(t, "@agentclientprotocol/sdk")
	cwd := t.TempDir()
	cmd, mark := offstage(t, nil)
	cmd.Path, cmd.Args = node, []string{node, filepath.Join(dir, "acp-nokey.mjs"), cwd, os.Args[0], "acp"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the node client failed: %v\n%s", err, stderr.String())
	}
	var got struct {
		ProtocolVersion int
		NewSession      *string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("node printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if got.ProtocolVersion != 1 {
		t.Errorf("initialize answered protocol version %d, want 1", got.ProtocolVersion)
	}
	if got.NewSession == nil || !strings.Contains(*got.NewSession, "no model is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY") ||
		!strings.Contains(*got.NewSession, `"env"`) {
		t.Errorf("session/new without a model: error %v, want the CLI's advice", got.NewSession)
	}
	noSurvivors(t, mark)
}
