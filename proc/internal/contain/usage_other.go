//go:build !linux

package contain

import (
	"os"
	"time"
)

// procUsage measures nothing: this system has no /proc.
func procUsage([]int) (time.Duration, int64, bool) { return 0, 0, false }

// Pids returns the leader alone: without /proc its descendants cannot
// be found.
func (t *Task) Pids() []int { return []int{t.pid} }

// maxRSS is 0: the units of ru_maxrss differ between the BSDs, and
// Usage measures nothing here to compare it with.
func maxRSS(*os.ProcessState) int64 { return 0 }
