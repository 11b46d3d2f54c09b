package step

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The containment fence: what keeps a command run by root, without a
// sandbox, in the cgroup offstage gave it. Root may write any file, and
// so its own pids.max, or its pid into the root cgroup's cgroup.procs,
// and leave its limits and its task behind. Package proc forks such a
// command from a thread that has
//
//   - joined a mount namespace (made once per host by ContainNamespace)
//     where every cgroup file system and sysfs, and every proc's sys and
//     sysrq-trigger, are read-only mounts (EROFS), and nothing else
//     changes: the command writes files as before;
//   - dropped from its bounding set (and its inheritable set, which
//     root's exec would give back), so that the command never has them,
//     the capabilities with which root would undo that or reach around
//     it (ContainDrops): CAP_SYS_ADMIN (remount, mount, setns back into
//     the host's namespace), CAP_SYS_PTRACE (another process's
//     /proc/PID/root, or its memory), and those that change the kernel
//     itself (CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT's kexec,
//     CAP_BPF, CAP_PERFMON), and CAP_SYS_NICE, with which it would take
//     a real-time priority that no CPU limit of its cgroup bounds (where
//     the kernel has no real-time group scheduling, as distributions'
//     do not), and CAP_SYS_RESOURCE, with which it would raise its
//     real-time limit (RLIMIT_RTPRIO) and take one that way (a host
//     started with that limit above 0, by LimitRTPRIO= or limits.conf,
//     passes it on);
//   - entered a Landlock domain that allows every file access it fences
//     everywhere under / (ContainRuleset), which no process in it can
//     leave: Landlock refuses mount, remount, move_mount and pivot_root
//     to it, even in a user namespace of its own (where root would have
//     CAP_SYS_ADMIN again and could mount a cgroup file system of its own
//     namespace), and writes to files on a mount not attached under /
//     (fsmount's); and it may ptrace (so read the /proc/PID/root of)
//     only processes in its own domain;
//   - installed a seccomp filter that refuses clone3 (ContainFilter):
//     with CLONE_INTO_CGROUP and a descriptor of a cgroup directory,
//     opened read-only on the read-only mount, clone3 starts a process in
//     any cgroup root may write to, the root one too.
//
// No no_new_privs: the thread is root with CAP_SYS_ADMIN, which Landlock
// takes instead, and set-uid programs keep working.

// ContainDrops are the capabilities a contained root command never has,
// as a mask (bit n: capability n).
const ContainDrops = 1<<16 | 1<<17 | 1<<19 | 1<<21 | 1<<22 | 1<<23 | 1<<24 | 1<<38 | 1<<39

// ContainDropped names ContainDrops, for what offstage tells its user.
const ContainDropped = "CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT, CAP_SYS_NICE, CAP_SYS_RESOURCE, CAP_BPF, CAP_PERFMON"

// ContainNamespace moves the calling (locked) thread into a new mount
// namespace where every cgroup file system, /sys and /proc/sys are
// read-only; the caller keeps it (open /proc/thread-self/ns/mnt) for the
// commands it forks later (Contain). Mounts the host makes later reach it
// (slave propagation), none made in it reach the host. It needs
// CAP_SYS_ADMIN (root).
func ContainNamespace() error {
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("mount propagation: %w", err)
	}
	// Every cgroup and sysfs mount read-only, wherever it is mounted
	// (a chroot's too). A proc mount's sys and sysrq-trigger are not
	// mounts of their own: each is bound onto itself, then made read-only
	// (core_pattern, modprobe and friends would have the kernel run a
	// program of root's choosing outside any cgroup; sysrq-trigger
	// reboots or crashes the machine).
	points, procs, err := kernelMounts()
	if err != nil {
		return err
	}
	for _, p := range procs {
		for _, q := range []string{p + "/sys", p + "/sysrq-trigger"} {
			if err := unix.Mount(q, q, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				if errors.Is(err, syscall.ENOENT) {
					continue
				}
				return fmt.Errorf("bind %s: %w", q, err)
			}
			points = append(points, q)
		}
	}
	for _, p := range points {
		if err := readOnlyTree(p); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyTree makes the mount at p, and every mount under it,
// read-only.
func readOnlyTree(p string) error {
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &ro)
	if err == syscall.ENOSYS { // before Linux 5.12: that mount alone
		err = unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("read-only %s: %w", p, err)
	}
	return nil
}

// kernelMounts lists the mount points of cgroup file systems (v1 and v2)
// and sysfs, and apart those of proc, in the calling thread's mount
// namespace.
func kernelMounts() (points, procs []string, err error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
		pre, post, ok := bytes.Cut(sc.Bytes(), []byte(" - "))
		fields, typ := bytes.Fields(pre), bytes.Fields(post)
		if !ok || len(fields) < 5 || len(typ) < 1 {
			continue
		}
		switch p := unescapeOctal(string(fields[4])); string(typ[0]) {
		case "cgroup", "cgroup2", "sysfs":
			points = append(points, p)
		case "proc":
			procs = append(procs, p)
		}
	}
	return points, procs, sc.Err()
}

// unescapeOctal undoes mountinfo's \NNN escapes (of space, tab, newline
// and backslash).
func unescapeOctal(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b = append(b, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// ContainRuleset makes the containment's Landlock ruleset: write access
// to files handled, and allowed everywhere under /. The caller keeps the
// descriptor for every Contain.
func ContainRuleset() (int, error) {
	if _, err := ABI(); err != nil {
		return -1, err
	}
	attr := unix.LandlockRulesetAttr{Access_fs: fsWriteFile}
	r0, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock: create ruleset: %w", errno)
	}
	ruleset := int(r0)
	if err := addRule(ruleset, rule{path: "/", access: fsWriteFile}, fsWriteFile); err != nil {
		syscall.Close(ruleset)
		return -1, fmt.Errorf("landlock: %w", err)
	}
	syscall.CloseOnExec(ruleset)
	return ruleset, nil
}

// Contain fences the calling (locked) OS thread, which must then fork
// the command and die, as Fence's caller does: into the mount namespace
// open as mntns, without ContainDrops in its bounding set, and, with a
// ruleset (>= 0), in a Landlock domain of its own. The thread's working
// directory becomes the namespace's /: the command must change into its
// directory by path. The thread can no longer clone3 (ContainFilter): it
// must start the command with clone, and move it into its cgroup itself.
func Contain(mntns, ruleset int) error {
	// setns into a mount namespace needs a file system context
	// (root, cwd) of the thread's own; Go's threads share the process's.
	if err := syscall.Unshare(syscall.CLONE_FS); err != nil {
		return fmt.Errorf("unshare file system context: %w", err)
	}
	if err := unix.Setns(mntns, syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("join the containment's mount namespace: %w", err)
	}
	if err := dropBounding(ContainDrops); err != nil {
		return err
	}
	if caps, drop := ContainInheritable(); drop {
		if err := unix.Capset(&caps.Header, &caps.Data[0]); err != nil {
			return fmt.Errorf("drop capabilities from the inheritable set: %w", err)
		}
	}
	if ruleset >= 0 {
		if _, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
			return fmt.Errorf("landlock: restrict: %w", errno)
		}
	}
	return containNoClone3()
}

// Caps is the calling thread's capability sets, as capget and capset
// take them (version 3: capabilities 0-31, then 32-63).
type Caps struct {
	Header unix.CapUserHeader
	Data   [2]unix.CapUserData
}

// ContainInheritable returns the calling thread's capabilities with
// ContainDrops taken out of its inheritable set, and whether it held any
// of them there. Run by root, an exec gives a program every capability
// of the bounding set and of the inheritable set: a host started with
// inheritable ones (setpriv --inh-caps, or container runtimes that set
// them) would give them back to its commands past the bounding set. The
// kernel takes them out of the ambient set with them.
func ContainInheritable() (caps Caps, drop bool) {
	caps.Header.Version = unix.LINUX_CAPABILITY_VERSION_3
	if err := unix.Capget(&caps.Header, &caps.Data[0]); err != nil {
		return caps, false // none to keep: capset fails the same way
	}
	for i := range caps.Data {
		mask := uint32(uint64(ContainDrops) >> (32 * i))
		drop = drop || caps.Data[i].Inheritable&mask != 0
		caps.Data[i].Inheritable &^= mask
	}
	return caps, drop
}

// dropBounding takes the capabilities in drop out of this thread's
// bounding set (those the kernel knows).
func dropBounding(drop uint64) error {
	const prCapbsetDrop = 24
	for c := uintptr(0); c < 64; c++ {
		if drop&(1<<c) == 0 {
			continue
		}
		if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, c, 0, 0, 0, 0); errno != 0 && errno != syscall.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
	}
	return nil
}
