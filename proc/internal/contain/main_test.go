package contain

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain: the keeper and the probe re-execute this test binary, and
// take over in this package's init function, before TestMain runs.
func TestMain(m *testing.M) {
	code := m.Run()
	DrainSpares() // kept on purpose; they would outlive the binary
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
