//go:build !linux

package journal_test

import (
	"os"
	"testing"

	"github.com/offstage/offstage/journal"
)

// readOnlyDir makes dir unwritable for this process: mode 0555. As root,
// whom permissions do not stop, it skips the test (Linux uses a
// read-only bind mount there).
func readOnlyDir(t *testing.T, dir string) (string, error) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("skipping: permissions do not stop root, and only Linux's test makes a read-only mount")
	}
	os.Chmod(dir, 0o555)
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	return dir, journal.ErrPermission
}
