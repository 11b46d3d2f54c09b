//go:build linux

package proc_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// userKey is the helper "userkey": add|read|sread UID DESC, or session UID DESC COMMAND.
func userKey(args []string) int {
	uid, _ := strconv.Atoi(args[2])
	if os.Getuid() != uid {
		if err := syscall.Setuid(uid); err != nil {
			fmt.Println("setuid:", err)
			return 1
		}
	}
	if args[1] == "session" { // DESC COMMAND: a session keyring of this process's own holding key DESC, then helper "sandboxed" COMMAND
		// The session keyring is the thread's credential until the exec.
		runtime.LockOSThread()
		// An anonymous one (no name).
		if _, _, errno := syscall.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 {
			fmt.Println("join:", errno)
			return 1
		}
		if _, err := unix.AddKey("user", args[3], []byte("session-secret"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
			fmt.Println("add_key:", err)
			return 1
		}
		err := syscall.Exec(os.Args[0], []string{os.Args[0], "sandboxed", args[4]}, os.Environ())
		fmt.Println("exec:", err)
		return 1
	}
	if args[1] == "sread" { // DESC: read key DESC found from the session keyring
		return readKey(unix.KEY_SPEC_SESSION_KEYRING, args[3])
	}
	if args[1] == "add" {
		if _, err := unix.AddKey("user", args[3], []byte("secret-of-"+args[2]), unix.KEY_SPEC_USER_KEYRING); err != nil {
			fmt.Println("add_key:", err)
			return 1
		}
		fmt.Println("added")
		return 0
	}
	return readKey(unix.KEY_SPEC_USER_KEYRING, args[3])
}

// readKey finds key desc from keyring and says "read VALUE", or why not.
func readKey(keyring int, desc string) int {
	id, err := unix.KeyctlSearch(keyring, "user", desc, 0)
	if err != nil {
		fmt.Println("search:", err)
		return 1
	}
	buf := make([]byte, 64)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil {
		fmt.Println("read:", err)
		return 1
	}
	fmt.Printf("read %s\n", buf[:min(n, len(buf))])
	return 0
}
