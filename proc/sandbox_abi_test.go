//go:build linux

package proc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/proctest"
	"github.com/offstage/offstage/proc/sandbox"
)

// The sandbox on older kernels (issue 33, item 2): below Landlock ABI 3
// nothing in Landlock refuses truncate(2) by path, and below ABI 2 a
// file is never linked or renamed into another directory (EXDEV; mv
// copies instead). The read-only mounts
// refuse truncating (and chmod, chown, touch) outside the writable
// places whatever the ABI, so the sandbox holds from ABI 1, as root and
// as a user that is not root (in a user namespace of the step's own).
// The kernel here is newer: the tests make proc plan and fence for ABI N.

// olderScript tries, from the workspace, to write, append to, truncate
// and chmod the file out outside it, and to link a file of one
// directory of the workspace into another; self is the test binary.
func olderScript(self, out string) string {
	q := shellQuote(out)
	return strings.Join([]string{
		`echo in > in.txt && echo "ws: ok"`,
		`echo x >> ` + q + ` 2>/dev/null && echo "append: written" || echo "append: refused"`,
		shellQuote(self) + ` truncate ` + q,
		`chmod 600 ` + q + ` 2>/dev/null && echo "chmod: done" || echo "chmod: refused"`,
		`mkdir -p a b && echo r > a/f && { ln a/f b/f 2>/dev/null && echo "link: done" || echo "link: refused"; }`,
	}, "\n")
}

// checkOlder checks olderScript's output at ABI abi, and that out is
// as it was.
func checkOlder(t *testing.T, abi int, out, got string) {
	t.Helper()
	want := []string{"ws: ok", "append: refused", "chmod: refused"}
	if abi >= 2 {
		want = append(want, "link: done")
	} else {
		want = append(want, "link: refused")
	}
	for _, w := range want {
		if !strings.Contains(got, w+"\n") {
			t.Errorf("ABI %d: output lacks %q:\n%s", abi, w, got)
		}
	}
	if strings.Contains(got, "truncate: done") || !strings.Contains(got, "truncate: ") {
		t.Errorf("ABI %d: truncate(2) of a file outside was not refused:\n%s", abi, got)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "outside\n" {
		t.Errorf("ABI %d: the file outside holds %q (%v), want it as it was", abi, b, err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("ABI %d: the file outside: %v %v, want mode 0666", abi, fi.Mode(), err)
	}
}

// outsideFile makes a file, writable by uid, outside every workspace.
func outsideFile(t *testing.T, uid int) string {
	dir, err := os.MkdirTemp("", "offstage-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	f := filepath.Join(dir, "out")
	if err := os.WriteFile(f, []byte("outside\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(f, 0o666)
	os.Chown(f, uid, -1)
	return f
}

func TestSandboxOnOlderLandlock(t *testing.T) {
	needSandbox(t)
	for _, abi := range []int{1, 2} {
		t.Run("ABI"+strconv.Itoa(abi), func(t *testing.T) {
			proc.SandboxABI(abi)
			defer proc.SandboxABI(0)
			st, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()})
			if err != nil {
				t.Fatalf("at ABI %d, with read-only mounts: %v", abi, err)
			}
			if !strings.Contains(strings.Join(st.Enforced, "; "), "truncating files outside the writable places: read-only mounts") {
				t.Errorf("Enforced = %q, want it to say the mounts refuse truncating", st.Enforced)
			}
			bothWays(t, func(t *testing.T) {
				out := outsideFile(t, os.Getuid())
				got, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite}, t.TempDir(), olderScript(os.Args[0], out))
				checkOlder(t, abi, out, got)
			})
		})
	}
}

// TestSandboxOnOlderLandlockNotRoot: TestSandboxOnOlderLandlock as a
// user that is not root, whose mounts are made in a user namespace.
func TestSandboxOnOlderLandlockNotRoot(t *testing.T) {
	needSandbox(t)
	bin, cred := proctest.Unprivileged(t)
	uid := os.Getuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	for _, abi := range []int{1, 2} {
		t.Run("ABI"+strconv.Itoa(abi), func(t *testing.T) {
			ws, err := os.MkdirTemp("", "offstage-ws-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(ws)
			os.Chown(ws, uid, -1)
			out := outsideFile(t, uid)
			cmd := exec.CommandContext(context.Background(), bin, "sandboxed-abi", strconv.Itoa(abi), olderScript(bin, out))
			cmd.Dir = ws
			cmd.Env = []string{helperEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + ws, "OFFSTAGE_CONTAINMENT=marks"}
			if cred != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			}
			got, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, got)
			}
			checkOlder(t, abi, out, string(got))
			if !strings.Contains(string(got), "read-only mounts (Landlock truncates from ABI 3)") {
				t.Errorf("the sandbox's status does not say the mounts refuse truncating:\n%s", got)
			}
		})
	}
}

// TestSandboxOnOlderLandlockNeedsTheMounts: at ABI 2 without read-only
// mounts a strict sandbox is refused, saying why; best effort starts and
// then truncate(2) outside works, so the checks above can fail.
func TestSandboxOnOlderLandlockNeedsTheMounts(t *testing.T) {
	needSandbox(t)
	proc.SandboxABI(2)
	proc.SandboxMounts(false)
	defer func() { proc.SandboxABI(0); proc.SandboxMounts(true) }()
	_, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "truncating") {
		t.Errorf("CheckSandbox at ABI 2 without mounts = %v, want a refusal naming truncating", err)
	}
	out := outsideFile(t, os.Getuid())
	got, _ := runIn(t, sandbox.Policy{Mode: sandbox.WorkspaceWrite, BestEffort: true}, t.TempDir(), shellQuote(os.Args[0])+" truncate "+shellQuote(out))
	if !strings.Contains(got, "truncate: done") {
		t.Errorf("best effort at ABI 2 without mounts: %s, want the truncate to get through", got)
	}
}

// TestSandboxLandlockAloneFencesWrites (issue 34, item 8): as root the
// read-only mounts refuse every write outside before Landlock is asked,
// so a Landlock rule that let everything through would pass every other
// test. With the mounts off, the refusals here come from Landlock alone.
// Below ABI 3 Landlock cannot refuse truncate(2): a strict sandbox is
// then refused naming it, and a best-effort one says it is not enforced
// (TestSandboxOnOlderLandlockNeedsTheMounts shows it gets through); every
// other write outside is still Landlock's to refuse, at any ABI. The
// place outside is one this user may write, so that its own permissions
// refuse nothing.
func TestSandboxLandlockAloneFencesWrites(t *testing.T) {
	needSandbox(t)
	proc.SandboxMounts(false)
	defer proc.SandboxMounts(true)
	bothWays(t, func(t *testing.T) {
		s := sandbox.Policy{Mode: sandbox.WorkspaceWrite}
		truncates := true
		st, err := sandbox.Check(sandbox.Policy{Mode: s.Mode, Workspace: t.TempDir()})
		if err != nil {
			if !strings.Contains(err.Error(), "truncating") || !strings.Contains(err.Error(), "Landlock ABI 3 needed") {
				t.Fatal(err)
			}
			t.Logf("Landlock below ABI 3, without the mounts: %v", err)
			truncates, s.BestEffort = false, true
			st, err = sandbox.Check(sandbox.Policy{Mode: s.Mode, Workspace: t.TempDir(), BestEffort: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(st.NotEnforced, "; "), "truncating") {
				t.Errorf("best effort below ABI 3 without mounts: NotEnforced = %q, want it to name truncating", st.NotEnforced)
			}
		}
		if strings.Contains(strings.Join(st.Enforced, "; "), "read-only mounts") {
			t.Fatalf("the mounts are still on: %q", st.Enforced)
		}
		out := outsideFile(t, os.Getuid())
		created := filepath.Join(filepath.Dir(out), "created")
		script := strings.Join([]string{
			`echo in > in.txt && echo "ws: ok"`,
			`echo x >> ` + shellQuote(out) + ` 2>/dev/null && echo "append: written" || echo "append: refused"`,
			`touch ` + shellQuote(created) + ` 2>/dev/null && echo "create: written" || echo "create: refused"`,
			`mkdir ` + shellQuote(filepath.Dir(out)) + `/d 2>/dev/null && echo "mkdir: done" || echo "mkdir: refused"`,
			`rm -f ` + shellQuote(out) + ` 2>/dev/null; [ -e ` + shellQuote(out) + ` ] && echo "remove: refused" || echo "remove: done"`,
			shellQuote(os.Args[0]) + ` truncate ` + shellQuote(out),
		}, "\n")
		got, _ := runIn(t, s, t.TempDir(), script)
		for _, w := range []string{"ws: ok", "append: refused", "create: refused", "mkdir: refused", "remove: refused"} {
			if !strings.Contains(got, w+"\n") {
				t.Errorf("output lacks %q:\n%s", w, got)
			}
		}
		if _, err := os.Lstat(created); err == nil {
			t.Errorf("%s was created outside", created)
		}
		if !truncates {
			return
		}
		if strings.Contains(got, "truncate: done") || !strings.Contains(got, "truncate: permission denied") {
			t.Errorf("truncate(2) outside was not refused by Landlock:\n%s", got)
		}
		if b, err := os.ReadFile(out); err != nil || string(b) != "outside\n" {
			t.Errorf("the file outside holds %q (%v), want it as it was", b, err)
		}
	})
}
