package proc_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc"
)

// escapeHelper tries, as a command run by root, every way out of its
// cgroup and its limits that TestRootCommandStaysContained knows, prints
// one line per way ("NAME: ok" where it worked), then leaves a process
// of its own behind in a new session (sleep SLEEP) and exits.
func escapeHelper(args []string) int {
	if args[0] == "userns" { // in a user, mount and cgroup namespace of its own
		return mountOwnCgroup()
	}
	report := func(name string, err error) {
		if err == nil {
			fmt.Println(name + ": ok")
		} else {
			fmt.Printf("%s: %v\n", name, err)
		}
	}
	for _, m := range ownCgroups() {
		if _, err := os.Stat(m.dir + "/pids.max"); err == nil {
			report("pids.max "+m.dir, os.WriteFile(m.dir+"/pids.max", []byte("max"), 0))
		}
		report("remount "+m.point, unix.Mount("", m.point, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
		report("root cgroup.procs "+m.point, os.WriteFile(m.point+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0))
		report("through /proc/1/root "+m.point, os.WriteFile("/proc/1/root"+m.point+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0))
		if _, err := os.Stat(m.point + "/cgroup.controllers"); err == nil { // v2
			report("clone3 into the root cgroup "+m.point, cloneInto(m.point))
		}
	}
	report("setns into pid 1's mount namespace", setnsInit())
	report("sysrq-trigger", os.WriteFile("/proc/sysrq-trigger", []byte("h"), 0)) // h: the help, in the kernel's log
	cmd := exec.Command(os.Args[0], "escape", "userns")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Printf("user namespace: %v %s\n", err, out)
	} else {
		fmt.Print(string(out))
	}
	sleeper := exec.Command("sleep", args[0])
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	report("escapee", sleeper.Start())
	return 0
}

// setnsInit tries to move this thread into pid 1's mount namespace.
func setnsInit() error {
	runtime.LockOSThread() // never unlocked: the thread goes with the helper
	if err := syscall.Unshare(syscall.CLONE_FS); err != nil {
		return err
	}
	fd, err := syscall.Open("/proc/1/ns/mnt", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return unix.Setns(fd, syscall.CLONE_NEWNS)
}

// mountOwnCgroup mounts, in its own namespaces, the cgroup file system
// that holds its pids controller, and lifts the limit at its root.
func mountOwnCgroup() int {
	dir, err := os.MkdirTemp("", "escape")
	if err != nil {
		fmt.Println("own cgroup mount:", err)
		return 0
	}
	defer os.Remove(dir)
	err = syscall.Mount("none", dir, "cgroup", 0, "pids")
	if err != nil {
		err = syscall.Mount("none", dir, "cgroup2", 0, "")
	}
	if err != nil {
		fmt.Println("own cgroup mount:", err)
		return 0
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	if err := os.WriteFile(dir+"/pids.max", []byte("max"), 0); err != nil {
		fmt.Println("own cgroup mount, pids.max:", err)
		return 0
	}
	fmt.Println("own cgroup mount, pids.max: ok")
	return 0
}

// cgroupMount is one hierarchy this process is in: where it is mounted,
// and this process's cgroup directory there.
type cgroupMount struct{ point, dir string }

// ownCgroups lists this process's cgroups, one per hierarchy mounted.
func ownCgroups() []cgroupMount {
	self, _ := os.ReadFile("/proc/self/cgroup")
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, _ := strings.Cut(sc.Text(), " - ")
		fields, typ := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(typ) < 3 || fields[3] != "/" {
			continue
		}
		for line := range strings.Lines(string(self)) {
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) != 3 {
				continue
			}
			v2 := parts[1] == ""
			if v2 && typ[0] == "cgroup2" || !v2 && typ[0] == "cgroup" && hasOption(typ[2], parts[1]) {
				out = append(out, cgroupMount{point: fields[4], dir: filepath.Join(fields[4], parts[2])})
			}
		}
	}
	return out
}

// hasOption says whether the super options opts name every controller
// in ctls (comma-separated, as /proc/self/cgroup lists them).
func hasOption(opts, ctls string) bool {
	for _, c := range strings.Split(ctls, ",") {
		found := false
		for _, o := range strings.Split(opts, ",") {
			found = found || o == c
		}
		if !found {
			return false
		}
	}
	return true
}

// sandboxedABI is the helper sandboxed-abi: N COMMAND.
func sandboxedABI(args []string) int {
	n, _ := strconv.Atoi(args[0])
	proc.SandboxABI(n)
	return helper(append([]string{"sandboxed"}, args[1:]...))
}

// cloneInto starts /bin/true by clone3 into the cgroup v2 directory dir,
// opened read-only (CLONE_INTO_CGROUP: the kernel checks the right to
// write its cgroup.procs, not the mount), and waits for it.
func cloneInto(dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	return cmd.Run()
}

// okOr is "ok" for no error, else the error's text.
func okOr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// procHostHelper mounts a proc file system at dir (a chroot's, say; in
// the private mount namespace the test gave it), then, as a host, runs a
// root command that opens dir/sys/kernel/core_pattern and
// dir/sysrq-trigger for writing, and prints what it said.
func procHostHelper(dir string) int {
	if err := syscall.Mount("proc", dir, "proc", 0, ""); err != nil {
		fmt.Println("mount proc:", err)
		return 1
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	line := fmt.Sprintf("for f in %[1]s/sys/kernel/core_pattern %[1]s/sysrq-trigger; do (: >>$f) 2>/dev/null && echo \"$f: writable\" || echo \"$f: refused\"; done", dir)
	fmt.Print(runTail(line))
	return 0
}

// capsHostHelper, as a host, runs a root command that prints its
// capability sets (forked from the fenced thread with "thread").
func capsHostHelper(args []string) int {
	if len(args) > 0 && args[0] == "thread" {
		proc.OwnFork(false)
	}
	fmt.Print(runTail("grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status"))
	return 0
}

// laterMountsHelper, in the private mount namespace the test gave it
// (shared below / with "shared"), starts a root command (the fence is
// made), then mounts a tmpfs with a file at dir/ws and a proc at
// dir/proc, and runs a root command that reads the file and opens the
// proc's core_pattern for writing; it prints what that said.
func laterMountsHelper(dir, mode string) int {
	if mode == "shared" {
		if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SHARED, ""); err != nil {
			fmt.Println("make shared:", err)
			return 1
		}
	}
	runTail("true")
	for _, d := range []string{dir + "/ws", dir + "/proc"} {
		os.MkdirAll(d, 0o755)
	}
	if err := syscall.Mount("tmpfs", dir+"/ws", "tmpfs", 0, ""); err != nil {
		fmt.Println("mount tmpfs:", err)
		return 1
	}
	defer syscall.Unmount(dir+"/ws", syscall.MNT_DETACH)
	os.WriteFile(dir+"/ws/marker", []byte("mounted later\n"), 0o644)
	if err := syscall.Mount("proc", dir+"/proc", "proc", 0, ""); err != nil {
		fmt.Println("mount proc:", err)
		return 1
	}
	defer syscall.Unmount(dir+"/proc", syscall.MNT_DETACH)
	fmt.Print(runTail(fmt.Sprintf("cat %[1]s/ws/marker; (: >>%[1]s/proc/sys/kernel/core_pattern) 2>/dev/null && echo core_pattern: writable || echo core_pattern: refused", dir)))
	return 0
}
