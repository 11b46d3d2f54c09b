//go:build unix

package proctest

import (
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Unprivileged returns the running test binary and the credential to
// run it with so that it lacks CAP_SYS_PTRACE, for tests of what a
// process may not read of another: as root, a copy of the binary in a
// directory nobody can reach and the credential of the user nobody;
// otherwise the binary itself and nil. As root without a user nobody it
// skips the test: root reads every process's memory, so there is nothing
// to test. The copy is removed when the test ends.
func Unprivileged(t testing.TB) (string, *syscall.Credential) {
	t.Helper()
	if os.Getuid() != 0 {
		return os.Args[0], nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("running as root with no user nobody to drop to (%v): root reads every process's memory, so there is nothing to test", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "offstage-unprivileged-") // t.TempDir's parent is closed to nobody
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := copyExecutable(bin, os.Args[0]); err != nil {
		t.Fatal(err)
	}
	return bin, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func copyExecutable(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
