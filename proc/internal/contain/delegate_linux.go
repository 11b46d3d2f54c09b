package contain

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
// moves itself, and every other process there (its keeper, the program
// or shell that started it), into a leaf of its own beside its directory,
// offstage-host-NS-PID-START, then enables the controllers. It does so only
// when a limit needs a controller that is delegated but not enabled.

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

// leaveBase moves the processes in base into the host's leaf, so that
// base may enable controllers for its children: the host first (what it
// forks from then on starts in the leaf), then the rest — its keeper and
// other children, and whatever else is there: the program or shell that
// started it, as Docker-in-Docker's entry point moves every process of its
// cgroup. Moving another user's process is refused by the kernel; then it
// says which. Once done, the host stays in its leaf: the leaf is removed by
// the next host's sweep once empty.
func (h *cgroupHost) leaveBase() error {
	self := os.Getpid()
	name := h.dir[strings.LastIndexByte(h.dir, '/')+1:]
	leaf := h.base + "/" + hostLeafPrefix + strings.TrimPrefix(name, hostDirPrefix)
	if err := syscall.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("a cgroup holding its processes cannot be made: %w", err)
	}
	pids := append([]int{self}, slices.DeleteFunc(appendPidsOnly(nil, h.base), func(pid int) bool { return pid == self })...)
	var stuck []int
	var firstErr error
	for _, pid := range pids {
		err := os.WriteFile(leaf+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0)
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			stuck = append(stuck, pid)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("it holds processes that cannot be moved out of it (%s: %v), and a cgroup v2 that holds processes cannot give controllers to its children: start offstage in a cgroup of its own (exec it as the service's command, or under systemd-run --user --scope -p Delegate=yes)", describePids(stuck), firstErr)
	}
	return nil
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
