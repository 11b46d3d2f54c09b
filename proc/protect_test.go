//go:build linux

package proc_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offstage/offstage/proc/proctest"
)

// TestProtectHost: issue 19 item 3. A command could read the keys its
// environment was scrubbed of from its parent's /proc/PID/environ, and
// anything else from /proc/PID/mem. A protected host's are closed to it.
// Root (CAP_SYS_PTRACE) reads any process's memory, so when the test runs
// as root, the host and its command run as nobody.
func TestProtectHost(t *testing.T) {
	bin, cred := proctest.Unprivileged(t)
	for _, tc := range []struct {
		name    string
		protect bool
		env     []string
		want    []string
	}{
		{"unprotected", false, nil, []string{"environ: read, secret true", "mem: opened"}},
		{"protected", true, nil, []string{"environ: permission denied", "mem: permission denied"}},
		// A host that is itself some offstage's command stays readable:
		// its outer host finds it by its environment.
		{"nested", true, []string{"OFFSTAGE_MARK=1"}, []string{"environ: read, secret true", "mem: opened"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"protected-host"}
			if tc.protect {
				args = append(args, "protect")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Dir = filepath.Dir(bin)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "OFFSTAGE_MARK=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(append(cmd.Env, helperEnv+"=1", hostSecret), tc.env...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("host: %v\n%s", err, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(string(out), want+"\n") {
					t.Errorf("the command's probe of its host does not say %q:\n%s", want, out)
				}
			}
			if !strings.Contains(string(out), "own environment has the secret: false") {
				t.Errorf("the secret reached the command's own environment:\n%s", out)
			}
		})
	}
}
