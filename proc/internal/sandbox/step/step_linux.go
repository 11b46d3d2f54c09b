package step

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The step is this binary re-executed, as the keeper is: the hook runs
// before main, and never returns.
func init() {
	if v, ok := os.LookupEnv(Env); ok {
		os.Exit(sandboxMain(v))
	}
}

// sandboxMain is the step: fence this process, then become the command.
// It returns only on failure, with 126 (or 127: the command is missing)
// after saying why on stderr.
func sandboxMain(v string) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "offstage sandbox: "+format+"\n", a...)
		return code
	}
	if ids, ok := os.LookupEnv(IDsEnv); ok {
		if err := mapSelf(ids); err != nil {
			return fail(126, "%v", err)
		}
	}
	switch v {
	case Probe:
		if err := loopbackUp(); err != nil {
			return fail(1, "%v", err)
		}
		return 0
	case Forker:
		// Not dumpable, as its host (ProtectHost): its memory holds the
		// requests, environments included.
		syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
		return forkerMain()
	case ProbeMounts:
		runtime.LockOSThread()
		if err := ReadOnlyMounts(nil, nil, true); err != nil {
			return fail(1, "%v", err)
		}
		return 0
	}
	var sp Spec
	if err := json.Unmarshal([]byte(v), &sp); err != nil || len(os.Args) < 3 {
		return fail(126, "bad invocation (%s is for offstage alone)", Env)
	}
	if sp.Loopback {
		if err := loopbackUp(); err != nil {
			return fail(126, "%v", err)
		}
	}
	// The rules are this thread's, and the exec comes from it: the
	// process's other threads (the Go runtime's) need none, and so no
	// signal to each of them to apply them. Never unlocked.
	runtime.LockOSThread()
	if sp.Mounts {
		wd, err := os.Getwd()
		if err != nil {
			return fail(126, "%v", err)
		}
		if err := ReadOnlyMounts(sp.Write, sp.WriteFDs, sp.Terminal == ""); err != nil {
			return fail(126, "%v", err)
		}
		if err := syscall.Chdir(wd); err != nil { // onto the writable mount, if it is one
			return fail(126, "%v", err)
		}
	}
	if err := Fence(sp); err != nil {
		return fail(126, "%v", err)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, Env+"=") && !strings.HasPrefix(kv, IDsEnv+"=") {
			env = append(env, kv)
		}
	}
	closeInherited()
	err := syscall.Exec(os.Args[1], os.Args[2:], env)
	return fail(127, "exec %s: %v", os.Args[1], err)
}

// loopbackUp brings up lo in this process's (new) network namespace.
func loopbackUp() error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: socket: %w", err)
	}
	defer syscall.Close(fd)
	var ifr [40]byte // struct ifreq: name, then the flags as a short
	copy(ifr[:], "lo")
	flags := (*uint16)(unsafe.Pointer(&ifr[syscall.IFNAMSIZ]))
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCGIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("loopback: get flags: %w", e)
	}
	*flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.SIOCSIFFLAGS, uintptr(unsafe.Pointer(&ifr[0]))); e != 0 {
		return fmt.Errorf("loopback: bring lo up: %w", e)
	}
	return nil
}

// KeepFDs is how many descriptors the command gets from the step: 0 to 2
// and proc's lifeline at 10 (3 to 9 are closed). Every other one open
// here came from whoever started offstage without close-on-exec, and
// would hand the command a file or socket outside the fence (Landlock
// checks opens, not writes to what is open).
const KeepFDs = 11

// closeInherited makes every descriptor from KeepFDs up close at the
// exec.
func closeInherited() {
	const closeRangeCloexec = 1 << 2
	if _, _, errno := syscall.RawSyscall(unix.SYS_CLOSE_RANGE, KeepFDs, ^uintptr(0)>>1, closeRangeCloexec); errno == 0 {
		return
	}
	entries, _ := os.ReadDir("/proc/self/fd") // before Linux 5.11
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= KeepFDs {
			syscall.CloseOnExec(fd)
		}
	}
}

// mapSelf maps the user and group ids "UID GID" of the parent user
// namespace to themselves in this process's new one, the step being its
// only process. The step does it, not offstage (as Go's UidMappings
// would, from the parent): a host that called ProtectHost is not
// dumpable, and so neither is the child it clones until that child
// execs, and the /proc files of a process that is not dumpable belong to
// root, where a user that is not root cannot write its map. After the
// exec the step is dumpable, and its own. Mapping one's own ids needs
// CAP_SETUID and CAP_SETGID in the new namespace, which offstage gave it
// as ambient capabilities; Fence drops them.
func mapSelf(ids string) error {
	var uid, gid int
	if _, err := fmt.Sscan(ids, &uid, &gid); err != nil {
		return fmt.Errorf("bad %s %q", IDsEnv, ids)
	}
	for _, w := range []struct{ file, data string }{
		{"/proc/self/setgroups", "deny"}, // before gid_map, unprivileged
		{"/proc/self/uid_map", fmt.Sprintf("%d %d 1", uid, uid)},
		{"/proc/self/gid_map", fmt.Sprintf("%d %d 1", gid, gid)},
	} {
		if err := os.WriteFile(w.file, []byte(w.data), 0); err != nil {
			return fmt.Errorf("user namespace: %w", err)
		}
	}
	return nil
}
