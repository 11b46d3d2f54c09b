package proc_test

import (
	"os"
	"testing"

	"github.com/offstage/offstage/proc"
)

// The switches CI sets (.ci/run) so that a suite that needs a host
// feature fails where the feature is missing, instead of going green
// without running.
const (
	requireSandbox = "OFFSTAGE_REQUIRE_SANDBOX" // a sandbox that holds (Landlock, namespaces)
	requireCgroup  = "OFFSTAGE_REQUIRE_CGROUP"  // containment and limits by cgroup
)

// requireFeature skips t, which needs a host feature this host lacks
// (why), or fails it where env is set.
func requireFeature(t testing.TB, env, why string) {
	t.Helper()
	if os.Getenv(env) != "" {
		t.Fatalf("%s is set, but %s", env, why)
	}
	t.Skip(why)
}

// TestContainmentIsRequired: where CI requires cgroups, the first run's
// containment is a cgroup per command, not the marks it falls back to
// (which would leave the limit tests checking refusals only).
func TestContainmentIsRequired(t *testing.T) {
	info := proc.Containment()
	t.Log(info)
	if os.Getenv(requireCgroup) != "" && info.Mode != "cgroup" {
		t.Fatalf("%s is set, but %v", requireCgroup, info)
	}
}
