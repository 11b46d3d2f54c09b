package contain

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Containment by cgroup v2 (see "Containment" in the package doc): one
// cgroup per command, made under a directory of this host's own, in the
// cgroup the host runs in. Plain file I/O on cgroupfs: the few files used
// (cgroup.procs, cgroup.kill, cgroup.events) are one line each, and a
// library would add a dependency for less than this file.

// containmentEnv forces a containment: "marks" (the fallback, for tests and
// for hosts whose cgroup should not be touched) or "cgroup" (fail the
// first Start when no writable cgroup v2 is found, instead of falling
// back). Empty or unset: detect.
const containmentEnv = "OFFSTAGE_CONTAINMENT"

// cgroupHost is where this host's cgroups live.
type cgroupHost struct {
	base    string // the cgroup this host runs in
	dir     string // base/offstage-NS-PID-START: one cgroup per command under it
	hasKill bool   // cgroup.kill exists (Linux 5.14 and later)

	limitOnce sync.Once
	ctl       [3]limitCtl // where each controller's limits go; set by limitOnce
	// memoryOn is set once the memory controller may be enabled in dir's
	// cgroup.subtree_control: only then do its cgroups have memory.peak.
	memoryOn atomic.Bool

	spares spares // empty cgroups kept for the next commands (spare_linux.go)
}

// contained is the containment this host uses, decided once, at the first
// Start or Containment call. Package state, like hostID: it describes the
// OS process.
var contained struct {
	once sync.Once
	info Info
	host *cgroupHost // nil unless Mode is "cgroup"
}

func containment() (Info, *cgroupHost) {
	contained.once.Do(func() {
		contained.info, contained.host = detectContainment(os.Getenv(containmentEnv))
	})
	return contained.info, contained.host
}

func detectContainment(force string) (Info, *cgroupHost) {
	switch force {
	case "marks":
		return marksInfo(Info{Mode: ModeMarks, Reason: containmentEnv + "=marks"}), nil
	case "", "cgroup":
	default:
		err := fmt.Errorf("proc: %s=%q: want cgroup, marks or nothing", containmentEnv, force)
		return Info{Mode: ModeMarks, Reason: err.Error(), Err: err}, nil
	}
	h, err := newCgroupHost()
	if err != nil {
		info := Info{Mode: ModeMarks, Reason: err.Error()}
		if force == "cgroup" {
			info.Err = fmt.Errorf("proc: %s=cgroup, but %w", containmentEnv, err)
		}
		return marksInfo(info), nil
	}
	return Info{Mode: ModeCgroup, Dir: h.dir, Reason: "cgroup v2 at " + h.base + " is writable"}, h
}

// marksInfo decides whether marks are set before the shell runs (see
// markTraced) and says so in info.
func marksInfo(info Info) Info {
	if err := detectTrace(); err != nil {
		info.Reason += "; marks set after the exec (ptrace: " + err.Error() + "), a command forking at once may pass on the host's mark"
		return info
	}
	markTraced = true
	info.Reason += "; marks set before the shell runs (ptrace)"
	return info
}

// newCgroupHost finds the cgroup this process runs in on the cgroup v2
// hierarchy (its own subtree: delegated to a user by systemd, a
// container's root, the root of the unified mount of a hybrid host),
// makes this host's directory there, sweeps the directories of hosts that
// are gone, and proves that a process can be started into a cgroup of
// it.
func newCgroupHost() (*cgroupHost, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("no cgroup information: %w", err)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("no mount information: %w", err)
	}
	base, err := findCgroupDir(self, mountinfo)
	if err != nil {
		return nil, err
	}
	name, err := hostDirName(os.Getpid())
	if err != nil {
		return nil, err
	}
	h := &cgroupHost{base: base, dir: base + "/" + name}
	if err := syscall.Mkdir(h.dir, 0o755); err != nil {
		if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EROFS) {
			return nil, fmt.Errorf("cgroup v2 at %s is not writable (not delegated to this user; systemd delegates a cgroup with Delegate=yes, or systemd-run --user --scope -p Delegate=yes): %w", base, err)
		}
		return nil, fmt.Errorf("cgroup v2 at %s is not writable: %w", base, err)
	}
	if _, err := os.Stat(h.dir + "/cgroup.kill"); err == nil {
		h.hasKill = true
	}
	if err := h.probe(); err != nil {
		syscall.Rmdir(h.dir)
		return nil, fmt.Errorf("cannot start a process into a cgroup under %s: %w", base, err)
	}
	// A host that moved into a leaf took along what shared its cgroup,
	// the program that starts the next host included: that host's base is
	// then the leaf, and the directories of hosts gone are beside it.
	for dir := base; ; dir = dir[:strings.LastIndexByte(dir, '/')] {
		sweepStale(dir, name)
		sweepLeaves(dir)
		if !strings.HasPrefix(dir[strings.LastIndexByte(dir, '/')+1:], hostLeafPrefix) {
			break
		}
	}
	for _, dir := range V1Bases() {
		sweepStale(dir, name)
	}
	return h, nil
}

// findCgroupDir returns the directory of this process's cgroup v2, from
// its line "0::PATH" in /proc/self/cgroup and a cgroup2 mount whose root
// holds PATH.
func findCgroupDir(self, mountinfo []byte) (string, error) {
	var path string
	found := false
	for line := range strings.SplitSeq(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path, found = p, true
			break
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup)")
	}
	if !strings.HasPrefix(path, "/") || strings.HasSuffix(path, " (deleted)") {
		return "", fmt.Errorf("this process's cgroup v2 %q is not a path", path)
	}
	mounted := false
	for line := range strings.SplitSeq(string(mountinfo), "\n") {
		// id parent major:minor root mountpoint options [optional…] - fstype source super-options
		pre, post, ok := strings.Cut(line, " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		f := strings.Fields(pre)
		if len(f) < 5 {
			continue
		}
		mounted = true
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		rel, ok := strings.CutPrefix(path, root)
		if root == "/" {
			rel, ok = path, true
		}
		if !ok || rel != "" && !strings.HasPrefix(rel, "/") {
			continue // this mount does not show our cgroup
		}
		dir := strings.TrimSuffix(point, "/") + strings.TrimSuffix(rel, "/")
		if dir == "" {
			dir = "/"
		}
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	if !mounted {
		return "", fmt.Errorf("cgroup v2 is not mounted (this process is in %s)", path)
	}
	return "", fmt.Errorf("no cgroup v2 mount shows this process's cgroup %s", path)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hostDirPrefix starts the name of every host's directory.
const hostDirPrefix = "offstage-"

// hostDirName names a host's directory: offstage-NS-PID-START, its pid
// namespace, its pid and its start time, so that a later host (in the
// same pid namespace) can tell whether it is still alive, pid reuse
// included.
func hostDirName(pid int) (string, error) {
	ns, err := pidNamespace()
	if err != nil {
		return "", err
	}
	start, ok := startTime(pid)
	if !ok {
		return "", errors.New("cannot read this process's start time")
	}
	return hostDirPrefix + ns + "-" + strconv.Itoa(pid) + "-" + start, nil
}

func pidNamespace() (string, error) {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", fmt.Errorf("cannot read the pid namespace: %w", err)
	}
	ns := strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	if _, err := strconv.ParseUint(ns, 10, 64); err != nil {
		return "", fmt.Errorf("unexpected pid namespace %q", link)
	}
	return ns, nil
}

// startTime returns field 22 of /proc/PID/stat, the process's start time
// since boot in clock ticks.
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return "", false
	}
	return string(f[19]), true
}

// probeArg, as the keeper's variable, makes the re-executed binary exit
// at once: the probe that proves a process can be cloned into a cgroup.
const probeArg = "probe"

// probe starts this binary into a fresh cgroup of the host's and waits for
// it: the kernel may lack clone3's CLONE_INTO_CGROUP (before 5.7), or a
// policy may forbid it, which no file's mode tells.
func (h *cgroupHost) probe() error {
	cg, err := h.newCgroup(Limits{})
	if err != nil {
		return err
	}
	defer cg.remove()
	defer cg.closeDir()
	pid, err := syscall.ForkExec("/proc/self/exe", []string{"offstage-probe"}, &syscall.ProcAttr{
		Dir: "/",
		Env: []string{keeperEnv + "=" + probeArg},
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.fd},
	})
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.ETXTBSY):
		return nil // the clone worked: the exec, in the cgroup, failed
	case err != nil:
		return fmt.Errorf("clone3 into a cgroup: %w", err)
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return nil
		}
	}
}

// cgroupSeq numbers this host's cgroups.
var cgroupSeq atomic.Uint64

// cgroup is one command's cgroup.
type cgroup struct {
	dir     string
	fd      int // the open directory, for clone3, until the command started; -1 then
	hasKill bool
	host    *cgroupHost // whose spare it may become; nil for another host's
	// v1 are the command's cgroups in v1 hierarchies, for the limits the
	// v2 hierarchy cannot take (see limits_linux.go).
	v1       []string
	memLimit int64  // its memory limit, 0 if none
	memV1    string // its v1 memory cgroup, when the memory limit is there
	pidsMax  int    // its pids limit, 0 if none
	pidsV1   string // its v1 pids cgroup, when the pids limit is there
	limited  bool   // a limit was written to it
	memAcct  bool   // it has the memory controller's files
	// cpuBase is the CPU time of the commands it held before (a spare).
	cpuBase time.Duration

	// released is set when the cgroup went to the spares: from then on it
	// is the next command's, and this one's methods see it empty. Its
	// methods that read or signal hold mu for reading, so none is halfway
	// through when the next command gets it.
	mu       sync.RWMutex
	released bool
	// killed is set once cgroup.kill was written: such a cgroup is never
	// a spare (the kernel went on killing what was cloned into one).
	killed atomic.Bool

	// ends are the files read when the command ends (endFiles), kept
	// open from the first such read until the cgroup is removed: a
	// cgroup kept as a spare serves many short commands, and opening a
	// cgroupfs file costs five times reading it again. They belong to
	// the goroutine that ends the command (and to the spares' list once
	// the cgroup is a spare): reads by others (Usage, Processes) open
	// the files by their path. endsGone: closed for good (removed, or
	// handed on as a spare); reads then go by path.
	ends     [len(endFiles)]keptFile
	endsGone bool
	// endUsage is the cgroup's usage_usec as its command ended (read
	// once, by finalUsage); endRead says it was read.
	endUsage time.Duration
	endRead  bool
}

// The files of a cgroup read as its command ends, by index in ends.
const (
	endEvents = iota // cgroup.events: populated
	endCPU           // cpu.stat: usage_usec
	endStat          // cgroup.stat: nr_descendants, nr_dying_descendants
)

var endFiles = [...]string{endEvents: "cgroup.events", endCPU: "cpu.stat", endStat: "cgroup.stat"}

// keptFile is a descriptor kept open; ok says it is.
type keptFile struct {
	fd int
	ok bool
}

// readEnd reads the end file i (endEvents…) into buf, through its kept
// descriptor, opened at the first read; nil if it cannot be read.
func (c *cgroup) readEnd(i int, buf []byte) []byte {
	f := &c.ends[i]
	if c.endsGone {
		return readSmall(c.dir + "/" + endFiles[i])
	}
	if !f.ok {
		fd, err := syscall.Open(c.dir+"/"+endFiles[i], syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		f.fd, f.ok = fd, true
	}
	for {
		n, err := syscall.Pread(f.fd, buf, 0)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil
		case n == len(buf): // more than buf holds: read it whole
			return readSmall(c.dir + "/" + endFiles[i])
		}
		return buf[:n]
	}
}

// closeEnds closes the end files for good: later reads go by path.
func (c *cgroup) closeEnds() {
	for i := range c.ends {
		if c.ends[i].ok {
			syscall.Close(c.ends[i].fd)
		}
	}
	c.ends, c.endsGone = [len(endFiles)]keptFile{}, true
}

// hold makes sure the cgroup is still the command's until unhold; false
// if it is not (it went to the spares), and then there is nothing to undo.
func (c *cgroup) hold() bool {
	c.mu.RLock()
	if c.released {
		c.mu.RUnlock()
		return false
	}
	return true
}

func (c *cgroup) unhold() { c.mu.RUnlock() }

func (h *cgroupHost) newCgroup(l Limits) (*cgroup, error) {
	if l.IsZero() {
		if c := h.takeSpare(); c != nil {
			return c, nil
		}
	}
	seq := strconv.FormatUint(cgroupSeq.Add(1), 10)
	dir := h.dir + "/" + seq
	if err := syscall.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("proc: make cgroup: %w", err)
	}
	c := &cgroup{dir: dir, fd: -1, hasKill: h.hasKill, host: h}
	if err := c.limit(h, l, seq); err != nil {
		c.remove()
		return nil, err
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		c.remove()
		return nil, fmt.Errorf("proc: open cgroup: %w", err)
	}
	c.fd = fd
	return c, nil
}

// newTaskCgroup returns a cgroup for a command, limited by l, or nil in
// marks mode (where limits are an error).
func newTaskCgroup(l Limits) (*cgroup, error) {
	info, h := containment()
	if info.Err != nil {
		return nil, info.Err
	}
	if h == nil {
		if !l.IsZero() {
			return nil, CheckLimits(l)
		}
		return nil, nil
	}
	return h.newCgroup(l)
}

// attach makes cmd's process start in the cgroup (CLONE_INTO_CGROUP): no
// instruction of it runs outside, so nothing it forks is ever outside.
func (c *cgroup) attach(sys *syscall.SysProcAttr) {
	sys.UseCgroupFD, sys.CgroupFD = true, c.fd
}

func (c *cgroup) closeDir() {
	if c.fd >= 0 {
		syscall.Close(c.fd)
		c.fd = -1
	}
}

// pids returns the processes in the cgroup and in the cgroups below it (a
// host that runs as a task nests its own there), from their cgroup.procs:
// the kernel's own lists, whose cost grows with the task, not the
// machine.
func (c *cgroup) pids() []int {
	if !c.hold() {
		return nil
	}
	defer c.unhold()
	return appendPids(nil, c.dir)
}

func appendPids(pids []int, dir string) []int {
	for line := range bytes.SplitSeq(readSmall(dir+"/cgroup.procs"), []byte{'\n'}) {
		if pid, err := strconv.Atoi(string(line)); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	if nested, _ := eventValue(readSmall(dir+"/cgroup.stat"), "nr_descendants"); nested > 0 {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				pids = appendPids(pids, dir+"/"+e.Name())
			}
		}
	}
	return pids
}

// populated says whether any live process is in the cgroup or below it
// (an exited leader not yet reaped is not), from cgroup.events: one read.
func (c *cgroup) populated() bool {
	if !c.hold() {
		return false
	}
	defer c.unhold()
	var buf [256]byte
	v, ok := eventValue(c.readEnd(endEvents, buf[:]), "populated")
	return !ok || v != 0
}

// readSmall reads a cgroupfs file with plain system calls (half the cost
// of os.ReadFile, which matters on every command's exit); nil if it
// cannot be read.
func readSmall(path string) []byte {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	var stack [512]byte
	b := stack[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, make([]byte, cap(b))...)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		if err == syscall.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return b
		}
		b = b[:len(b)+n]
	}
}

// count returns how many processes the cgroup holds, not counting skip.
func (c *cgroup) count(skip int) int {
	n := 0
	for _, pid := range c.pids() {
		if pid != skip {
			n++
		}
	}
	return n
}

// signal sends sig to every process of the cgroup and says how many it
// reached. Each is opened as a pidfd, then the list read again: a pid
// still listed after its pidfd was opened names a member, so a pid reused
// by a process outside is never signalled.
func (c *cgroup) signal(sig syscall.Signal) int {
	if !c.hold() {
		return 0
	}
	defer c.unhold()
	pids := appendPids(nil, c.dir)
	if len(pids) == 0 {
		return 0
	}
	fds := make(map[int]int, len(pids))
	for _, pid := range pids {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			fds[pid] = fd
		}
	}
	n := 0
	for _, pid := range appendPids(nil, c.dir) {
		if fd, ok := fds[pid]; ok && unix.PidfdSendSignal(fd, sig, nil, 0) == nil {
			n++
		}
	}
	for _, fd := range fds {
		syscall.Close(fd)
	}
	return n
}

// kill sends SIGKILL to every process of the cgroup and its descendants
// at once (cgroup.kill), or, before Linux 5.14, to each process listed.
func (c *cgroup) kill() {
	if !c.hasKill || !c.writeKill() {
		c.signal(syscall.SIGKILL)
	}
}

// writeKill writes cgroup.kill; true if done, or if there is nothing to
// kill (the cgroup went to the spares).
func (c *cgroup) writeKill() bool {
	if !c.hold() {
		return true
	}
	defer c.unhold()
	c.killed.Store(true)
	return os.WriteFile(c.dir+"/cgroup.kill", []byte("1"), 0) == nil
}

// waitEmpty waits until no live process is left in the cgroup (or its
// descendants), woken by the kernel's notification of a change to
// cgroup.events, never by a timer; false if deadline came first.
func (c *cgroup) waitEmpty(deadline time.Time) bool {
	if !c.hold() {
		return true
	}
	c.unhold() // the spares get it only from the goroutine that waits here
	fd, err := syscall.Open(c.dir+"/cgroup.events", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return c.count(0) == 0
	}
	defer syscall.Close(fd)
	var buf [256]byte
	for {
		n, err := syscall.Pread(fd, buf[:], 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return c.count(0) == 0
		}
		if populated, ok := eventValue(buf[:n], "populated"); ok && populated == 0 {
			return true
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		// kernfs wakes a poller with POLLPRI when the file changes.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(min(wait.Milliseconds()+1, 1<<30))); err != nil && err != unix.EINTR {
			return c.count(0) == 0
		}
	}
}

// eventValue reads "key value" from a cgroup's flat keyed file.
//
// A plain loop, not bytes.SplitSeq: the iterator's closure took b to the
// heap, and with it the callers' buffers on their stacks (an allocation
// a start, each of 1 KiB).
func eventValue(b []byte, key string) (int64, bool) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte{' '})
		if ok && string(k) == key {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// remove removes the cgroup, and any a nested host left in it, and its v1
// cgroups; it fails (EBUSY) while a process is still inside. The keeper
// and the next host's sweep remove what is left.
func (c *cgroup) remove() error {
	c.closeEnds()
	err := removeTree(c.dir)
	if err1 := c.removeV1(); err == nil {
		err = err1
	}
	return err
}

func removeTree(dir string) error {
	err := rmdirSettled(dir)
	if err == nil || errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if !errors.Is(err, syscall.EBUSY) && !errors.Is(err, syscall.ENOTEMPTY) {
		return err
	}
	entries, rerr := os.ReadDir(dir)
	if rerr != nil {
		return err
	}
	found := false
	for _, e := range entries {
		if e.IsDir() {
			found = true
			removeTree(dir + "/" + e.Name())
		}
	}
	if !found {
		return err // busy with processes, not children
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}

// rmdirSettled removes an empty cgroup. Right after its last process
// exited the kernel may still refuse, EBUSY, while it takes the cgroup
// down (runc retries the same way): a cgroup without a live process is
// tried again for up to about 300ms before the refusal stands.
func rmdirSettled(dir string) error {
	wait := 5 * time.Millisecond
	for {
		err := syscall.Rmdir(dir)
		if !errors.Is(err, syscall.EBUSY) || wait > 160*time.Millisecond {
			return err
		}
		if !settling(dir) {
			return err // a process is inside (or a child cgroup): no waiting helps
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// settling says whether an empty cgroup that refused rmdir may be taken
// down yet: v2 says so in cgroup.events; a v1 cgroup, which has no such
// file, when its cgroup.procs lists nobody.
func settling(dir string) bool {
	if b := readSmall(dir + "/cgroup.events"); b != nil {
		v, ok := eventValue(b, "populated")
		return ok && v == 0
	}
	procs := readSmall(dir + "/cgroup.procs")
	return procs != nil && len(bytes.TrimSpace(procs)) == 0
}

// endCgroups ends every process in the cgroups under dir (a host's
// directory): SIGTERM, up to grace to go, then cgroup.kill until deadline;
// then it removes them and dir. The keeper calls it when its host is gone,
// and a host for the directories of hosts found gone.
func endCgroups(dir string, grace, deadline time.Duration) error {
	start := time.Now()
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	_, statErr := os.Stat(dir + "/cgroup.kill")
	var cgs []*cgroup
	for _, e := range entries {
		if e.IsDir() {
			cgs = append(cgs, &cgroup{dir: dir + "/" + e.Name(), fd: -1, hasKill: statErr == nil})
		}
	}
	if grace > 0 {
		for _, c := range cgs {
			c.signal(syscall.SIGTERM)
		}
		for _, c := range cgs {
			c.waitEmpty(start.Add(grace))
		}
	}
	var firstErr error
	for _, c := range cgs {
		c.kill()
		if !c.waitEmpty(start.Add(deadline)) && firstErr == nil {
			firstErr = errSurvivors{c.count(0)}
		}
		if err := c.remove(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("remove %s: %w", c.dir, err)
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) && firstErr == nil {
		firstErr = fmt.Errorf("remove %s: %w", dir, err)
	}
	return firstErr
}

// staleDeadline bounds how long a host spends on the cgroups of hosts
// that are gone.
const staleDeadline = 2 * time.Second

// sweepStale ends and removes the directories in base of hosts of this pid
// namespace that are gone (killed with their keeper, or whose keeper
// could not finish). Directories of live hosts, of other namespaces, and
// anything not named by a host are left alone.
func sweepStale(base, self string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	ns, _ := pidNamespace()
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, hostDirPrefix+ns+"-")
		if !ok || !e.IsDir() || name == self {
			continue
		}
		pidStr, start, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 {
			continue
		}
		if now, alive := startTime(pid); alive && now == start {
			continue // its host lives
		}
		endCgroups(base+"/"+name, 0, staleDeadline)
	}
}

// usage reads the cgroup's CPU time (cpu.stat, kept by the kernel
// without any controller) and memory: memory.current and memory.peak
// with the memory controller, the v1 memory cgroup's usage and maximum
// when its memory limit is there, else the sum of its processes'
// resident sets.
func (c *cgroup) usage() (cpu time.Duration, mem, peak int64) {
	if !c.hold() {
		return 0, 0, 0
	}
	defer c.unhold()
	if us, ok := eventValue(readSmall(c.dir+"/cpu.stat"), "usage_usec"); ok {
		cpu = time.Duration(us)*time.Microsecond - c.cpuBase
	}
	if b := readSmall(c.dir + "/memory.current"); b != nil {
		mem, _ = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		peak, _ = strconv.ParseInt(string(bytes.TrimSpace(readSmall(c.dir+"/memory.peak"))), 10, 64)
		return cpu, mem, peak
	}
	if c.memV1 != "" { // a memory limit on a hybrid host: its v1 cgroup counts
		mem, _ = strconv.ParseInt(string(bytes.TrimSpace(readSmall(c.memV1+"/memory.usage_in_bytes"))), 10, 64)
		peak, _ = strconv.ParseInt(string(bytes.TrimSpace(readSmall(c.memV1+"/memory.max_usage_in_bytes"))), 10, 64)
		return cpu, mem, peak
	}
	page := int64(os.Getpagesize())
	for _, pid := range appendPids(nil, c.dir) {
		// statm: size resident shared …, in pages.
		f := bytes.Fields(readSmall("/proc/" + strconv.Itoa(pid) + "/statm"))
		if len(f) > 1 {
			n, _ := strconv.ParseInt(string(f[1]), 10, 64)
			mem += n * page
		}
	}
	return cpu, mem, 0
}
