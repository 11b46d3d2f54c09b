package step_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/proc/internal/sandbox/step"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The step refuses an invocation that is not package proc's, saying so,
// rather than run anything unfenced.
func TestTheStepRefusesABadSpec(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the step exists on Linux only")
	}
	for _, spec := range []string{"not json", `{"w": ["/tmp"]}`} { // the second lacks the command
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), step.Env+"="+spec)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 126 || !strings.Contains(string(out), "offstage sandbox: bad invocation") {
			t.Errorf("spec %q: %v, %q; want exit 126 and why", spec, err, out)
		}
	}
	if b, err := json.Marshal(step.Spec{Write: []string{"/w"}, Loopback: true}); err != nil || string(b) != `{"w":["/w"],"lo":true}` {
		t.Errorf("Spec in JSON = %s, %v", b, err)
	}
}
