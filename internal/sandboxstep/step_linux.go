package sandboxstep

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
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
	if v == Probe {
		if err := loopbackUp(); err != nil {
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
	// Ambient capabilities (a user namespace's CAP_NET_ADMIN, for lo)
	// must not reach the command.
	const prCapAmbient, prCapAmbientClearAll = 47, 4
	syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	if syscall.Geteuid() != 0 {
		// Nor the inheritable bit Go set to raise it: a user keeps no
		// capability in its namespace past this step. (Root's own are
		// root's.)
		dropCapabilities()
	} else {
		// But for CAP_SYS_ADMIN, with which root may push keystrokes into
		// any terminal (TIOCSTI), the user's included, to be run by the
		// user's shell outside the sandbox.
		dropBounding(capSysAdmin)
	}
	if err := restrictSelf(sp); err != nil {
		return fail(126, "landlock: %v", err)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, Env+"=") {
			env = append(env, kv)
		}
	}
	closeInherited()
	err := syscall.Exec(os.Args[1], os.Args[2:], env)
	return fail(127, "exec %s: %v", os.Args[1], err)
}

// sandboxDevices are the device files a fenced command may write (and
// control, for a terminal): writing to /dev/null is no escape.
var sandboxDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/random", "/dev/urandom"}

// restrictSelf applies the Landlock rules of sp. The parent already
// decided what must hold (planSandbox), so this downgrades to the
// kernel's ABI quietly: what it drops was reported there.
func restrictSelf(sp Spec) error {
	cfg := landlock.Config{HandledAccessFS: landlock.V8.HandledAccessFS, Scoped: ll.ScopeSignal}
	if sp.NetTCP {
		cfg.HandledAccessNet = landlock.V10.HandledAccessNet
	}
	if sp.Abstract {
		cfg.Scoped |= ll.ScopeAbstractUnixSocket
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWFiles(sandboxDevices...).WithIoctlDev().IgnoreIfMissing(),
		landlock.RWDirs("/dev/pts").WithIoctlDev().IgnoreIfMissing(),
	}
	if len(sp.Write) > 0 {
		rules = append(rules, landlock.RWDirs(sp.Write...).WithRefer())
	}
	return cfg.BestEffort().Restrict(rules...)
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

// capSysAdmin is CAP_SYS_ADMIN's number.
const capSysAdmin = 21

// dropBounding takes capability c out of this thread's bounding set: the
// command the exec that follows (from this thread) runs, and all it
// starts, never have it.
func dropBounding(c uintptr) {
	const prCapbsetDrop = 24
	runtime.LockOSThread() // the exec must come from this thread; never unlocked
	syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, c, 0, 0, 0, 0)
}

// dropCapabilities empties this thread's capability sets; the exec that
// follows runs from it.
func dropCapabilities() {
	const linuxCapabilityVersion3 = 0x20080522
	hdr := struct {
		version uint32
		pid     int32
	}{linuxCapabilityVersion3, 0}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	runtime.LockOSThread() // the exec must come from this thread; never unlocked
	syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
}
