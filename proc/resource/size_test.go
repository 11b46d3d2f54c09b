package resource_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/proc/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"2G", 2 << 30}, {"512M", 512 << 20}, {"512m", 512 << 20}, {"1.5G", 3 << 29},
		{"64MiB", 64 << 20}, {"100", 100}, {"4k", 4 << 10}, {"1T", 1 << 40},
	} {
		if got, err := resource.ParseSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v, want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "G", "-1G", "2X", "1e9", "lots", "0x10", "99999999T"} {
		if got, err := resource.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{2 << 30: "2 GiB", 64 << 20: "64 MiB", 3 << 29: "1.5 GiB", 900: "900 B"} {
		if got := resource.FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestLimitsNarrow: a narrower policy (a sub-agent's) tightens each limit
// and never lifts one.
func TestLimitsNarrow(t *testing.T) {
	for _, tc := range []struct{ l, m, want resource.Limits }{
		{resource.Limits{}, resource.Limits{Memory: 1 << 30}, resource.Limits{Memory: 1 << 30}},
		{resource.Limits{Memory: 1 << 30, Pids: 64}, resource.Limits{}, resource.Limits{Memory: 1 << 30, Pids: 64}},
		{resource.Limits{Memory: 1 << 30, Pids: 64, CPUs: 2}, resource.Limits{Memory: 2 << 30, Pids: 32, CPUs: 0.5}, resource.Limits{Memory: 1 << 30, Pids: 32, CPUs: 0.5}},
		{resource.Limits{CPUs: 1}, resource.Limits{CPUs: 4, Pids: 10}, resource.Limits{CPUs: 1, Pids: 10}},
	} {
		if got := tc.l.Narrow(tc.m); got != tc.want {
			t.Errorf("%+v.Narrow(%+v) = %+v, want %+v", tc.l, tc.m, got, tc.want)
		}
	}
}
