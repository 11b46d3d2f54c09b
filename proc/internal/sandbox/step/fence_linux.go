package step

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ABI returns the kernel's Landlock ABI version, or an error saying why
// there is none.
func ABI() (int, error) {
	v, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		if errno == syscall.ENOSYS || errno == syscall.EOPNOTSUPP {
			return 0, errors.New("this kernel has no Landlock, or it is not enabled at boot (lsm=landlock)")
		}
		return 0, fmt.Errorf("landlock: version query: %w", errno)
	}
	return int(v), nil
}

// Fence applies sp's capability and Landlock rules to the calling OS
// thread alone, and to whatever it forks or execs from then on. The
// caller has locked its goroutine to the thread (runtime.LockOSThread)
// and never unlocks it: the thread must start the command and die, or
// exec it. A thread's rules are its own (credentials, no_new_privs and
// the Landlock domain are per thread), so the process's other threads
// are untouched.
//
// Capabilities first: ambient ones (a user namespace's CAP_NET_ADMIN,
// for lo) must not reach the command; a user that is not root keeps none
// at all past this point (nor the inheritable bit Go set to raise them).
// Root keeps only what lets it work on files it does not own (rootKeeps):
// Landlock fences paths, and a capability such as CAP_MKNOD (a block
// device made in the workspace and written through), CAP_NET_ADMIN (a
// veth pair into the host's network namespace), CAP_SYS_MODULE or
// CAP_SYS_ADMIN (keystrokes pushed into the user's terminal with
// TIOCSTI) would walk around the fence.
//
// Then Landlock, downgraded quietly to the kernel's ABI: what that drops,
// package proc decided and reported before (planSandbox).
func Fence(sp Spec) error {
	const prCapAmbient, prCapAmbientClearAll = 47, 4
	syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	var keep uint64
	if syscall.Geteuid() == 0 {
		keep = rootKeeps
		if err := limitBounding(keep); err != nil {
			return err
		}
	}
	if err := setCapabilities(keep); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	// A session keyring of its own, empty: the host's (pam_keyinit makes
	// one per login, for Kerberos and AFS tokens, cached passphrases)
	// is not the command's to read or fill. A thread's, like the rest.
	const keyctlJoinSessionKeyring = 1
	if _, _, errno := syscall.RawSyscall(unix.SYS_KEYCTL, keyctlJoinSessionKeyring, 0, 0); errno != 0 && errno != syscall.ENOSYS {
		return fmt.Errorf("session keyring: %w", errno)
	}
	const prSetNoNewPrivs = 38
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("no_new_privs: %w", errno)
	}
	if err := noSetID(); err != nil {
		return err
	}
	abi, err := ABI()
	if err != nil {
		return err
	}
	if sp.ABI > 0 && sp.ABI < abi {
		abi = sp.ABI
	}
	if abi == 0 {
		return nil // nothing to enforce; proc said so unless best effort
	}
	if err := restrictThread(sp, abi); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// Landlock access rights, as the kernel numbers them.
const (
	fsExecute   = unix.LANDLOCK_ACCESS_FS_EXECUTE
	fsWriteFile = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	fsReadFile  = unix.LANDLOCK_ACCESS_FS_READ_FILE
	fsReadDir   = unix.LANDLOCK_ACCESS_FS_READ_DIR
	fsRefer     = unix.LANDLOCK_ACCESS_FS_REFER
	fsTruncate  = unix.LANDLOCK_ACCESS_FS_TRUNCATE
	fsIoctlDev  = unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// fsRead reads and runs; fsFile is what applies to a file that is
	// not a directory.
	fsRead = fsExecute | fsReadFile | fsReadDir
	fsFile = fsExecute | fsWriteFile | fsReadFile | fsTruncate | fsIoctlDev

	netTCP = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	netUDP = 1<<2 | 1<<3 // bind and connect/send UDP, ABI 10; no port rule: all closed

	scopeAbstract = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	scopeSignal   = unix.LANDLOCK_SCOPE_SIGNAL
)

// handledFS is every file system right the ABI can handle, up to ioctl
// on devices (ABI 5); later rights (ABI 9 fences pathname unix sockets)
// are not handled, so they stay allowed, as the package doc says.
func handledFS(abi int) uint64 {
	switch {
	case abi >= 5:
		return 1<<16 - 1
	case abi >= 3:
		return 1<<15 - 1
	case abi == 2:
		return 1<<14 - 1
	}
	return 1<<13 - 1
}

// sandboxDevices are the device files a fenced command may write (and
// control, for a terminal): writing to /dev/null is no escape.
var sandboxDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/random", "/dev/urandom"}

// rule is one path-beneath rule: access under path, or under the
// directory open as dirFD where it is set.
type rule struct {
	path     string
	dirFD    int // the directory, open already (never 0, stdin); 0: open path
	access   uint64
	optional bool // a path that is missing is left out
}

// rules are sp's path rules: read and run anywhere; read, write and
// control the device files and the command's own terminal; write the
// writable places. Of /dev/pts only the command's own terminal: the
// user's other terminals (and, for root, every user's) would let it read
// keystrokes meant for another shell or write onto its screen. A
// terminal the command makes itself (/dev/ptmx) is reached through its
// master (TIOCGPTPEER), not by its path.
func rules(sp Spec) []rule {
	const rw = (1<<16 - 1) &^ (fsRefer | fsIoctlDev) // every directory and file right but these two
	// Read and run everything but /dev, whose devices (terminals, input
	// devices, disks) are not files to read: reading a terminal takes the
	// keystrokes meant for its shell. Directories may be listed anywhere.
	r := []rule{{path: "/", access: fsReadDir}}
	if entries, err := os.ReadDir("/"); err == nil {
		for _, e := range entries {
			if e.Name() != "dev" {
				r = append(r, rule{path: "/" + e.Name(), access: fsRead, optional: true})
			}
		}
	} else {
		r = append(r, rule{path: "/", access: fsRead}) // cannot tell /dev apart: as before
	}
	r = append(r, rule{path: "/dev/shm", access: fsRead, optional: true})
	for _, d := range sandboxDevices {
		r = append(r, rule{path: d, access: fsFile &^ fsExecute, optional: true})
	}
	switch {
	case sp.Terminal != "":
		r = append(r, rule{path: sp.Terminal, access: fsFile &^ fsExecute})
	case sp.Mounts:
		// A devpts of its own (ReadOnlyMounts): all of it is the command's.
		r = append(r, rule{path: "/dev/pts", access: rw | fsIoctlDev, optional: true})
	}
	for i, d := range sp.Write {
		r = append(r, rule{path: d, dirFD: writeFD(sp, i), access: rw | fsRefer})
	}
	return r
}

// restrictThread builds sp's ruleset for the ABI and enforces it on the
// calling thread, with no_new_privs (which Landlock requires without
// CAP_SYS_ADMIN, and which keeps a set-uid program from lifting it).
func restrictThread(sp Spec, abi int) error {
	attr := unix.LandlockRulesetAttr{Access_fs: handledFS(abi)}
	if sp.NetTCP && abi >= 4 {
		attr.Access_net = netTCP
		if abi >= 10 {
			attr.Access_net |= netUDP
		}
	}
	if abi >= 6 {
		attr.Scoped = scopeSignal
		if sp.Abstract {
			attr.Scoped |= scopeAbstract
		}
	}
	r0, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return fmt.Errorf("create ruleset: %w", errno)
	}
	ruleset := int(r0)
	defer syscall.Close(ruleset)
	for _, r := range rules(sp) {
		if err := addRule(ruleset, r, attr.Access_fs); err != nil {
			return err
		}
	}
	const prSetNoNewPrivs = 38
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("no_new_privs: %w", errno)
	}
	if _, _, errno := syscall.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0); errno != 0 {
		if errno == syscall.E2BIG {
			return errors.New("this thread is already under the most Landlock rulesets the kernel stacks (16)")
		}
		return fmt.Errorf("restrict: %w", errno)
	}
	return nil
}

// writeFD is the descriptor of sp's writable place i, or 0 (none: by
// its path).
func writeFD(sp Spec, i int) int {
	if i < len(sp.WriteFDs) {
		return sp.WriteFDs[i]
	}
	return 0
}

// addRule adds r, its rights cut to what the ruleset handles, to the
// ruleset.
func addRule(ruleset int, r rule, handled uint64) error {
	fd := r.dirFD
	if fd == 0 {
		var err error
		fd, err = syscall.Open(r.path, unix.O_PATH|syscall.O_CLOEXEC, 0)
		if err != nil {
			if r.optional && (err == syscall.ENOENT || err == syscall.EACCES) {
				return nil
			}
			return fmt.Errorf("open %s: %w", r.path, err)
		}
		defer syscall.Close(fd)
	}
	access := r.access & handled
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err == nil && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		access &= fsFile // directory rights on a file are refused (EINVAL)
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, errno := syscall.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0); errno != 0 {
		return fmt.Errorf("rule for %s: %w", r.path, errno)
	}
	return nil
}

// rootKeeps are the capabilities a command run by root keeps in the
// sandbox: CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID and
// CAP_NET_BIND_SERVICE, so that it still works on a workspace owned by
// another user (a container's bind mount) and binds low ports on its
// loopback. Every other one, present or added to the kernel later, is
// dropped: CAP_SETUID and CAP_SETGID too, with which it became another
// user to read that user's kernel keyrings or lower the limits of that
// user's processes.
const rootKeeps = 1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<10

// limitBounding takes every capability but keep out of this thread's
// bounding set: what the thread starts never has them, even as root (an
// exec by root gets its bounding set). Without CAP_SETPCAP a drop fails;
// that is fine only where the capability was not there.
func limitBounding(keep uint64) error {
	const prCapbsetRead, prCapbsetDrop = 23, 24
	for c := uintptr(0); c < 64; c++ {
		in, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetRead, c, 0, 0, 0, 0)
		if errno != 0 {
			break // past the kernel's last capability
		}
		if keep&(1<<c) != 0 || in == 0 {
			continue
		}
		if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapbsetDrop, c, 0, 0, 0, 0); errno != 0 {
			return fmt.Errorf("drop capability %d from the bounding set: %w (root without CAP_SETPCAP cannot be fenced)", c, errno)
		}
	}
	return nil
}

// setCapabilities leaves this thread only keep, of what it has, in its
// effective and permitted sets, and nothing inheritable.
func setCapabilities(keep uint64) error {
	const linuxCapabilityVersion3 = 0x20080522
	hdr := struct {
		version uint32
		pid     int32
	}{linuxCapabilityVersion3, 0}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errno
	}
	for i := range data {
		k := uint32(keep >> (32 * i))
		data[i].effective &= k
		data[i].permitted &= k
		data[i].inheritable = 0
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return errno
	}
	return nil
}

// NewNetwork moves the calling (locked) thread into a network namespace
// of its own, with loopback up: what it starts has loopback alone. It
// needs CAP_SYS_ADMIN (root); elsewhere the step is cloned into a user
// namespace for it.
func NewNetwork() error {
	if err := syscall.Unshare(syscall.CLONE_NEWNET); err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	return loopbackUp()
}

// ReadOnlyMounts moves the calling (locked) thread into a mount namespace
// (and an IPC namespace) of its own where every mount is read-only but bind mounts of the write
// directories: Landlock fences writing files, not changing their mode,
// owner or times (chmod, chown, touch -d), and a command owns its user's
// files (root's: every system file, which it could make set-uid for
// every user). A read-only mount refuses those (EROFS). Mounts are made
// private first, so that nothing done here reaches the host's namespace.
// A mount under a writable place stays read-only (a tmpfs or a volume
// mounted inside the workspace is not written to). It needs
// CAP_SYS_ADMIN: root's, or that of a user namespace of the step's own. The thread's working directory stays on the mount it was
// on: the command must change into its directory by path.
//
// With terminals, /dev/pts becomes a devpts of the command's own: the
// terminals it makes (/dev/ptmx, openpty) are there, and the user's
// others (for root, every user's) are not, to read keystrokes meant for
// another shell or to write onto its screen.
func ReadOnlyMounts(write []string, writeFDs []int, terminals bool) error {
	if err := readOnlyAll(); err != nil {
		return err
	}
	return writablePlaces(write, writeFDs, terminals)
}

// readOnlyAll is ReadOnlyMounts's first half, the same for every
// command: mount and IPC namespaces of the thread's own, every mount
// read-only.
func readOnlyAll() error {
	// An IPC namespace too: System V shared memory, semaphores and
	// message queues are not files, and Landlock does not cover them; the
	// user's segments outside (a database's, X11's) stay out of reach.
	if err := syscall.Unshare(syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("mount and IPC namespaces: %w", err)
	}
	ro := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &ro); err != nil {
		return fmt.Errorf("read-only mounts: %w", err)
	}
	return nil
}

// writablePlaces is ReadOnlyMounts's second half, the command's own:
// its terminals, its writable places.
func writablePlaces(write []string, writeFDs []int, terminals bool) error {
	if terminals {
		if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
			return fmt.Errorf("terminals of its own (/dev/pts): %w", err)
		}
	}
	rw := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
	for i, d := range write {
		// The directory its path names now, checked to be the one pinned
		// (writeFDs[i]): a command may have moved a writable place nested
		// in another and left a link to elsewhere at its path. Bound from
		// the descriptor checked, so that it cannot change in between (a
		// bind's source must be a mount of this namespace, which the
		// pinned descriptor's is not).
		fd, err := syscall.Open(d, unix.O_PATH|unix.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("writable place %s: %w", d, err)
		}
		err = samePlace(d, fd, writeFDs, i)
		if err == nil {
			err = unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), d, "", unix.MS_BIND|unix.MS_REC, "")
		}
		syscall.Close(fd)
		if err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
		// Writable at its top mount alone: a mount under it stays
		// read-only, whatever it is outside; one the host keeps read-only
		// (a container's :ro volume) must not become writable here.
		if err := unix.MountSetattr(unix.AT_FDCWD, d, 0, &rw); err != nil {
			if err == syscall.EPERM {
				return fmt.Errorf("writable place %s is on a read-only mount: name a directory that is writable outside offstage", d)
			}
			return fmt.Errorf("writable %s: %w", d, err)
		}
	}
	return nil
}

// samePlace checks that fd, d opened now, is the directory pinned as
// writeFDs[i] (when there is one).
func samePlace(d string, fd int, writeFDs []int, i int) error {
	if i >= len(writeFDs) {
		return nil
	}
	var now, pinned syscall.Stat_t
	if err := syscall.Fstat(fd, &now); err != nil {
		return err
	}
	if err := syscall.Fstat(writeFDs[i], &pinned); err != nil {
		return err
	}
	if now.Dev != pinned.Dev || now.Ino != pinned.Ino {
		return fmt.Errorf("%s is no longer the directory it was when offstage first used it (moved, or a link left in its place, by a command that could write its parent); start offstage again to fence what is there now", d)
	}
	return nil
}
