package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Delegated controllers (see "Resource limits" in the package doc). On a
// pure cgroup v2 host a user's or a container's cgroup is handed the
// controllers in its cgroup.controllers (systemd's Delegate=yes), but the
// host's directory under it gets them only once that cgroup enables them
// in its own cgroup.subtree_control, and cgroup v2's no-internal-process
// rule lets no cgroup that holds processes do so. The host's process sits
// in that cgroup. So, as systemd-run, runc and crun do, the host first
// moves itself (and its keeper and its other children there) into a leaf
// of its own beside its directory, offstage-host-NS-PID-START, then
// enables the controllers. It does so only when a limit needs a controller
// that is delegated but not enabled, and only when every process in that
// cgroup is its own: another program's processes are never moved.

// hostLeafPrefix starts the name of the leaf a host moved itself into,
// beside its directory (offstage-host-NS-PID-START). sweepStale never
// matches it as a host's directory (a pid namespace is a number).
const hostLeafPrefix = hostDirPrefix + "host-"

// enable makes controller ctl available in the host's directory: it
// enables it in the cgroup the host runs in (base), moving the host into
// its leaf first if base holds processes. It says why it cannot.
func (h *cgroupHost) enable(ctl string) error {
	given := strings.Fields(string(readSmall(h.base + "/cgroup.controllers")))
	if !slices.Contains(given, ctl) {
		return fmt.Errorf("the cgroup v2 at %s was not given the %s controller (its cgroup.controllers lists %q; its parent delegates controllers in its cgroup.subtree_control, as systemd's Delegate=yes does)", h.base, ctl, strings.Join(given, " "))
	}
	err := writeSubtree(h.base, ctl)
	if errors.Is(err, syscall.EBUSY) {
		if merr := h.leaveBase(); merr != nil {
			return fmt.Errorf("the cgroup v2 at %s has the %s controller, but %w", h.base, ctl, merr)
		}
		err = writeSubtree(h.base, ctl)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("the cgroup v2 at %s has the %s controller, but it is not delegated to this user (its cgroup.subtree_control is not writable: %v)", h.base, ctl, err)
	default:
		return fmt.Errorf("the cgroup v2 at %s has the %s controller, but enabling it in its cgroup.subtree_control failed: %w", h.base, ctl, err)
	}
}

func writeSubtree(dir, ctl string) error {
	err := os.WriteFile(dir+"/cgroup.subtree_control", []byte("+"+ctl), 0)
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// leaveBase moves the host's processes out of base into the host's leaf,
// so that base may enable controllers for its children. Its processes are
// the host itself and its children (the keeper, a probe, whatever else the
// program started); if base holds any other, nothing is moved. Once done,
// the host stays in its leaf: it is removed by the next host's sweep once
// empty.
func (h *cgroupHost) leaveBase() error {
	self := os.Getpid()
	var own, foreign []int
	for _, pid := range appendPidsOnly(nil, h.base) {
		if pid == self || parentPid(pid) == self {
			own = append(own, pid)
		} else {
			foreign = append(foreign, pid)
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("it holds processes other than this host's (%s), and a cgroup v2 that holds processes cannot give controllers to its children: start offstage in a cgroup of its own (exec it as the service's command, or under systemd-run --user --scope -p Delegate=yes)", describePids(foreign))
	}
	name := h.dir[strings.LastIndexByte(h.dir, '/')+1:]
	leaf := h.base + "/" + hostLeafPrefix + strings.TrimPrefix(name, hostDirPrefix)
	if err := syscall.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("a cgroup holding its processes cannot be made: %w", err)
	}
	// The host first, so that what it forks from now on starts in the leaf.
	slices.SortFunc(own, func(a, b int) int { return boolInt(b == self) - boolInt(a == self) })
	for _, pid := range own {
		err := os.WriteFile(leaf+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0)
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("moving this host's process %d into %s failed: %w", pid, leaf, err)
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendPidsOnly appends the processes listed in dir's cgroup.procs, not
// those of the cgroups below it.
func appendPidsOnly(pids []int, dir string) []int {
	for line := range bytes.SplitSeq(readSmall(dir+"/cgroup.procs"), []byte{'\n'}) {
		if pid, err := strconv.Atoi(string(line)); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parentPid returns the parent of pid (field 4 of /proc/PID/stat), 0 if
// it cannot be read.
func parentPid(pid int) int {
	b := readSmall("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	return ppid
}

// describePids names up to a few processes: "812 sh, 813 sleep".
func describePids(pids []int) string {
	var parts []string
	for i, pid := range pids {
		if i == 3 {
			parts = append(parts, "and "+strconv.Itoa(len(pids)-i)+" more")
			break
		}
		comm := strings.TrimSpace(string(readSmall("/proc/" + strconv.Itoa(pid) + "/comm")))
		parts = append(parts, strings.TrimSpace(strconv.Itoa(pid)+" "+comm))
	}
	return strings.Join(parts, ", ")
}

// sweepLeaves removes the leaves in base of hosts of this pid namespace
// that are gone, once empty. What is still in one (a program's own child
// that outlived it) is not offstage's to end, so such a leaf stays.
func sweepLeaves(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	ns, _ := pidNamespace()
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), hostLeafPrefix+ns+"-")
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, start, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if now, alive := startTime(pid); alive && now == start {
			continue
		}
		syscall.Rmdir(base + "/" + e.Name()) // EBUSY while a process is in it
	}
}
