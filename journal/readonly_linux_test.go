package journal_test

import (
	"os"
	"syscall"
	"testing"

	"github.com/offstage/offstage/journal"
)

// readOnlyDir makes dir unwritable for this process: a read-only bind
// mount of it as root (whom permissions do not stop), else mode 0555. It
// returns the directory to use and the kind of trouble writing it gives.
func readOnlyDir(t *testing.T, dir string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir, journal.ErrPermission
	}
	ro := t.TempDir()
	if err := syscall.Mount(dir, ro, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("skipping: root cannot bind-mount here (%v), and permissions do not stop root", err)
	}
	t.Cleanup(func() { syscall.Unmount(ro, syscall.MNT_DETACH) })
	if err := syscall.Mount("", ro, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("skipping: cannot make the bind mount read-only (%v)", err)
	}
	return ro, journal.ErrReadOnlyFS
}
