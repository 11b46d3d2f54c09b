package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShellLimits: --task-memory reaches each shell, and a shell the kernel
// kills for it says so to the model (issue 22 item 3). Where limits cannot
// be enforced (OFFSTAGE_CONTAINMENT=marks), asking for one stops offstage
// at start-up with a usage error.
func TestShellLimits(t *testing.T) {
	script := scriptRunning(t, "head -c 300m /dev/zero | tail; echo tail ended")
	cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + t.TempDir()}, "run", "--no-journal", "--json", "--script", script, "--task-memory", "64M", "go")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code := exitOf(t, cmd.Run())
	if os.Getenv("OFFSTAGE_CONTAINMENT") == "marks" {
		if code != 2 || !strings.Contains(errOut.String(), "cannot limit the shells") {
			t.Fatalf("marks mode with --task-memory: exit %d, stderr %q; want 2 and a sentence", code, errOut.String())
		}
		return
	}
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "reached the memory limit of 64 MiB") {
		t.Errorf("the model was not told of the memory limit:\n%s", out.String())
	}
}

// TestShellLimitsBadValues: a bad limit, on the command line or in the
// config file, is a usage error that says what is wrong, before anything
// runs.
func TestShellLimitsBadValues(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		config string
		want   string
	}{
		{[]string{"--task-memory", "2X"}, "", "-task-memory: not a size"},
		{[]string{"--task-memory", "-1G"}, "", "-task-memory: not a size"},
		{[]string{"--task-pids", "lots"}, "", "-task-pids: not a number of processes"},
		{[]string{"--task-cpus", "-2"}, "", "-task-cpus: not a number of CPUs"},
		{[]string{"--task-pids", "1"}, "", "a process limit of 1"},
		{[]string{"--task-memory", "100K"}, "", "too small to run a shell"},
		{nil, "limits:\n  memory: lots\n", "limits: memory"},
		{nil, "limits:\n  cpus: -1\n", "limits: a limit must not be negative"},
		{nil, "limits:\n  swap: 1G\n", `unknown key "swap" in limits; the keys there are memory, pids, cpus`},
	} {
		config := t.TempDir()
		if tc.config != "" {
			os.MkdirAll(filepath.Join(config, "offstage"), 0o755)
			os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte(tc.config), 0o644)
		}
		args := append([]string{"run", "--no-journal", "--script", scriptRunning(t, "true")}, tc.args...)
		cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + config}, append(args, "go")...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if code := exitOf(t, cmd.Run()); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v with config %q: exit %d, stderr %q; want 2 and %q", tc.args, tc.config, code, errOut.String(), tc.want)
		}
	}
}

// TestProfileLimitsThatCannotHold: where limits cannot be enforced, a
// profile that sets one is skipped with a note, and offstage runs on.
func TestProfileLimitsThatCannotHold(t *testing.T) {
	agents := t.TempDir()
	os.WriteFile(filepath.Join(agents, "small.md"), []byte("---\nname: small\ndescription: runs small\ntask_pids: 64\n---\nBe small.\n"), 0o644)
	cmd, _ := offstage(t, []string{"XDG_CONFIG_HOME=" + t.TempDir(), "OFFSTAGE_CONTAINMENT=marks"},
		"run", "--no-journal", "--script", scriptRunning(t, "true"), "--agents", agents, "go")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if code := exitOf(t, cmd.Run()); code != 0 || !strings.Contains(errOut.String(), "profile small") || !strings.Contains(errOut.String(), "skipped: its shell limits cannot be enforced") {
		t.Errorf("exit %d, stderr %q; want 0 and a note that profile small is skipped", code, errOut.String())
	}
}
