// Package contain keeps everything a command starts with the command,
// for package proc: a cgroup or a mark per command (Task), the keeper
// that ends a host's commands when the host dies, the lifeline, the root
// fence, spare cgroups, and the resource limits. This is the kernel
// detail behind proc's guarantees; proc's doc says what they are.
//
// # Containment
//
// Everything a command starts belongs to it: not only its process group
// but every descendant, whatever it does with sessions, groups or signal
// dispositions (setsid, a daemon's double fork, nohup, trap ” TERM HUP
// IO). Stop, the end of Start's context, and the leader's exit end all of
// them, and Wait returns only once none is left (Exit.Contained.Leftovers counts
// what the leader left behind; Exit.Contained.Survivors, which should be zero, what
// outlived every SIGKILL). Processes counts them while the command runs.
// A program that wants to keep a server running runs it in the
// foreground of its own Process instead of daemonizing it.
//
// A host contains its commands in one of two ways on Linux, decided once,
// at its first Start (Containment says which, and why; offstage logs it at
// start-up and shows it in "offstage version -v"):
//
//   - ModeCgroup, wherever a cgroup v2 is writable: a cgroup per command,
//     which can also cap its memory, processes and CPU (see Resource
//     limits).
//   - ModeMarks, the fallback: a mark per command, on every process.
//
// OFFSTAGE_CONTAINMENT=marks forces the fallback (CI runs the tests in
// both modes); OFFSTAGE_CONTAINMENT=cgroup makes Start fail, with the
// reason, rather than fall back. macOS and other Unix systems have a third,
// ModeGroup (below).
//
// # Containment by cgroup
//
// Where it is found: the host's own cgroup on the v2 hierarchy, read from
// its "0::PATH" line in /proc/self/cgroup and the cgroup2 mount that shows
// PATH (/proc/self/mountinfo). Detected, never assumed: the host makes its
// directory there (offstage-PIDNS-PID-STARTTIME), and proves that a
// process can be started into a cgroup of it by starting one (this binary
// re-executed, which exits at once). On a pure v2 desktop that is the
// user's scope under user@UID.service, which systemd delegates to the
// user; in a container with a cgroup namespace, its root (when mounted
// writable); on a hybrid host such as our CI machines, the root of the
// unified mount, /sys/fs/cgroup/unified, writable to root. A cgroup owned
// by someone else (an ssh session's scope, a container's read-only mount)
// fails the mkdir, and the host uses the marks.
//
// Each command gets a cgroup of its own under the host's directory, and is
// started into it by clone3 (CLONE_INTO_CGROUP, SysProcAttr.UseCgroupFD):
// no instruction of it runs outside, so nothing it forks ever is. Its
// members are the kernel's list (cgroup.procs), whose cost grows with the
// task, not the machine. Stop sends SIGTERM to the group and to each
// member (each opened as a pidfd, then the list read again, so that a pid
// reused by a process outside is never signalled); the grace ends as soon
// as cgroup.events says the cgroup is empty (poll wakes on its change,
// nothing polls on a timer), then cgroup.kill kills every member at once.
// The leader's exit reads the list: empty, nothing to do; otherwise
// cgroup.kill and the same wait. The cgroup is removed once the leader is
// reaped, or kept for the next command when nothing in it can tell one
// command from the next (no limit, no memory accounting, no nested
// cgroup, no process outlived the leader, never a cgroup.kill): at most
// four are kept, for five seconds without a command, and a kept cgroup's
// CPU time so far is subtracted for the next. Making and removing one was
// a fifth of what a short command cost beyond os/exec. A kept cgroup also
// keeps open the three files read at a command's end (cgroup.events,
// cpu.stat, cgroup.stat; opening a cgroupfs file costs five times
// reading it again, and those opens were a third of what a command cost
// beyond os/exec), closed when it is removed. When the host dies, its keeper (below) ends what is left in its
// cgroups (SIGTERM, up to 300 ms, cgroup.kill) and removes them and the
// host's directory; a host killed with its keeper leaves them to the next
// host started in the same cgroup (and pid namespace), which ends and
// removes the directories of hosts no longer alive (pid and start time).
// A host that runs as another offstage's task nests its directory in that
// task's cgroup, and goes with it: cgroup.kill takes the whole subtree.
//
// What it guarantees: no process started by a command leaves its cgroup
// unless it can write to the cgroup.procs of a cgroup outside (it is the
// kernel's rule), so resetting rlimits, clearing the environment and
// renaming itself change nothing. A cgroup whose processes outlived
// every SIGKILL (stuck in the kernel) is left for the keeper to remove.
//
// Commands run by root. Root may write any file, its own pids.max and
// the root cgroup's cgroup.procs among them. So a host running as root
// fences each command without a sandbox (a sandbox fences more) between
// its fork and its exec, in the child of a fork of its own (amd64), or
// forks it from a fenced thread (other architectures, and a start traced
// for v1 limits): in a mount namespace, made once per host and shared by
// its commands, where every cgroup file system, /sys and /proc/sys are
// read-only (EROFS), and nothing else changes; without, in its bounding
// set, CAP_SYS_ADMIN (remount, mount, setns back), CAP_SYS_PTRACE
// (another process's /proc/PID/root or memory) and those that change
// the kernel (CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT, CAP_BPF,
// CAP_PERFMON), and CAP_SYS_NICE and CAP_SYS_RESOURCE (a real-time
// priority, which no CPU limit bounds, or a real-time limit raised to
// take one); and, from Linux 5.13, in a Landlock domain that allows
// every file access but refuses any mount, even in a user namespace of
// the command's own (where it would be root again and could mount a
// cgroup file system of its own cgroup namespace). What it costs such a
// command: no mount, unshare -m, nsenter, ip netns, modprobe, sysctl -w,
// perf or bpftrace, no ptrace of a process it did not start, no writes
// under /sys, no real-time priority (chrt) or negative nice; a host that runs as its task contains its own commands by
// marks (cgroups are read-only there). ContainmentInfo.Root says what
// holds on the host. What stays open: a root command can still ask a
// daemon running outside to start a process for it (systemd-run, cron,
// at, sshd, a container runtime's socket), or write a file one of them
// reads; only a sandbox fences that. In ModeMarks, and for a host that
// is not root, there is no such fence: OFFSTAGE_CONTAINMENT=marks is how
// a root user who needs those capabilities turns it off. A user that is
// not root in a delegated cgroup owns its task's cgroup files and can
// lift its own limits there; the fence does not cover it yet.
//
// Usage reports a running command's CPU time (the cgroup's cpu.stat,
// kept without any controller) and memory (memory.current and
// memory.peak where the memory controller is on, else the sum of its
// processes' resident sets); Ports the TCP ports its processes listen on
// (/proc/net/tcp and tcp6, matched to their socket descriptors). In
// ModeMarks, Usage sums the marked processes' /proc/PID/stat (their CPU
// time and that of the children they reaped, their resident sets), and
// Ports looks at the marked processes. Where there is no memory.peak,
// the peak is the highest Usage saw; an Exit's CPU and MemoryPeak add
// the leader's resource usage as it was reaped.
//
// cgroupfs is used with plain file I/O (mkdir, rmdir, a line written to
// cgroup.kill, cgroup.procs and cgroup.events read): a handful of one-line
// files, which a library (containerd/cgroups) would wrap in a dependency.
// The limits (below) add one file per controller and version, and two
// counters read; that library's v1 and v2 managers would also bring their
// own idea of where cgroups live (a systemd or a fixed path), where this
// package finds the host's own cgroup in each hierarchy.
//
// # Containment by marks
//
// How a process is known to belong to a command: every command gets a
// mark, a number unique on this host (the magic 0x5eed, a random host id,
// a sequence number). It is set as the soft RLIMIT_RTTIME limit of the
// shell before its first instruction runs, and as OFFSTAGE_MARK in its
// environment. Resource limits are inherited through fork and exec, kept
// across setsid, setpgid and setuid programs, and not touched by what
// daemons do to their environment and their argv (redis, PostgreSQL and
// nginx overwrite both to set their process title). RLIMIT_RTTIME bounds
// only the CPU time of a real-time scheduled process between blocking
// calls; a mark is more than 10^18 microseconds, so the limit it sets can
// never be reached.
//
// Before its first instruction: the shell is started traced
// (PTRACE_TRACEME right before its exec, SysProcAttr.Ptrace), so the
// kernel stops it at the exec; the host sets the mark and detaches. A
// shell that forks at once (a subshell that clears its environment with
// env -i) can thus never pass on anything but its command's mark. Where
// ptrace is refused (Yama's ptrace_scope 3, a seccomp policy, a host under
// strace -f; found by a probe when the containment is decided, and said in
// Containment) the mark is set right after the exec, as it was before
// this: the host process carries a host mark, which a shell that forks
// before its own mark is set passes on, and which tells a scan to read
// that process's environment for the command's mark (env -i defeats that).
// A setuid program given as Config.Shell would run without its privileges
// while traced; the shell's own children are never traced.
//
// Finding a command's processes is a scan of /proc (a prlimit call per
// process, about 1 µs), never a guess from a command line or a bare pid:
// each process is opened as a pidfd and checked again before it is
// signalled, so a pid reused by an unrelated process is never hit.
//
// Ending them: Stop sends SIGTERM to the group and to every marked
// process, and SIGKILL to both after the grace period; a leader that
// exits early does not cut the grace short for the rest. SIGKILL rounds
// repeat until a scan finds none, which also catches what a dying process
// forked. The leader's exit is observed without reaping it (waitid with
// WNOWAIT), so its pid proves, through /proc/loadavg's last allocated pid,
// that a command that forked nothing has nothing left: such a command
// costs no scan at all.
//
// What it guarantees, and its limits: a process that both resets its
// RLIMIT_RTTIME and removes OFFSTAGE_MARK from its environment escapes
// (audio programs that ask rtkit for real-time scheduling set the limit;
// none of them also scrub the environment); one that only resets the
// limit survives its leader's exit (which looks at limits) but not a stop
// or the host's death (which read environments too). So does one that
// changes its user to one we cannot signal (sudo): it is reported in
// Exit.Contained.Survivors, not waited for forever. The host's own soft RTTIME
// limit is its host mark (as inert for it as for its commands), and
// processes the embedding program starts by other means inherit it: they
// are never matched, since they carry no command's mark in their
// environment. A host that itself runs as a task of another offstage
// marks its commands with its own marks, and its keeper (which sheds the
// outer mark) ends them when the outer offstage kills that host.
//
// # Resource limits
//
// Config.Limits caps the memory (Limits.Memory), the number of processes
// (Limits.Pids, threads included) and the CPU time (Limits.CPUs, over
// 100 ms periods) of a command with everything it starts, enforced by the
// kernel in its cgroup: a fork past the process limit fails (EAGAIN), a
// task past its memory is reclaimed from, then the kernel kills one of its
// processes (the largest). Defaults: none. Limits need ModeCgroup; in
// ModeMarks and ModeGroup, or where a controller is missing, asking for
// one fails Start, and CheckLimits says so beforehand (offstage calls it
// at start-up): a limit is never silently not applied.
//
// Where each limit is written, decided per controller at the first limit
// asked for, detected, never assumed:
//
//   - cgroup v2, when the host's cgroup has the controller (pure v2
//     hosts where it is delegated: a service or scope with Delegate=yes,
//     a container's root gets what its runtime gives): the host enables it
//     in its cgroup's and its own directory's cgroup.subtree_control, and
//     writes memory.max, pids.max or cpu.max in the command's cgroup. The
//     no-internal-process rule forbids the first while the cgroup holds
//     processes, so then the host first moves itself, and every other
//     process there (its keeper, the program that started it), into a
//     leaf beside its directory, offstage-host-NS-PID-START, as
//     systemd-run and crun do: a program embedding proc is moved, at its
//     first limit, from then on. A controller the host's cgroup does not
//     have cannot be had there: only its parent's cgroup.subtree_control
//     gives it, which is not ours to write. LimitControllers says which
//     of these stands in the way.
//   - cgroup v1, on hybrid hosts (ours), whose v2 hierarchy has none of
//     the three: the command also gets a cgroup of its own, named as its
//     v2 one, under the host's cgroup in each v1 hierarchy it needs
//     (memory.limit_in_bytes; pids.max; cpu.cfs_period_us and
//     cpu.cfs_quota_us). clone3 starts a process into a v2 cgroup only, so
//     such a command is started traced, as in ModeMarks: the kernel stops
//     the shell at its exec, before its first instruction; the host writes
//     its pid into its v1 cgroups' cgroup.procs and lets it go. Everything
//     it forks is inside. What is not: the exec's own first pages (its
//     image and stack, charged before the move to the host's memory
//     cgroup, as v1 moves no charges). Where ptrace is refused, a v1 limit
//     cannot be enforced, and says so.
//
// A task the kernel killed for its memory limit reports it:
// Exit.Contained.MemoryKills, from oom_kill in memory.events (v2) or
// memory.oom_control (v1), read before the cgroup is removed; Exit.Err
// then says "killed: it reached its memory limit of 2 GiB" for a leader
// killed so, and adds the count to any other failure. A shell that goes
// on and exits 0 after losing a process that way succeeds, with
// MemoryKills set. Swap is not limited: on a host with swap, a task may
// use swap past its memory limit before it is killed.
//
// The v1 cgroups go with the command's v2 one (when its leader is reaped),
// with the host's directories when its keeper ends them, and with the
// sweep of a later host, as the v2 ones do (see below).
//
// # When the host dies
//
// A keeper process, one per host, started by the first Start. It is this
// same binary re-executed (an init function in this package takes over
// when it finds the keeper's variable in its environment, so embedding
// programs need no call of their own). It sits in a session of its own,
// ignores the terminal's signals and SIGTERM, and blocks reading a pipe
// whose only write end the host holds; when the host exits for any
// reason, SIGKILL included, the read returns and the keeper ends every
// process in the host's cgroups, or carrying one of the host's marks:
// SIGTERM, up to 300 ms to go, then SIGKILL until none is left. Measured
// here: 213 processes of seven kinds of escape gone 0.35 s after the
// host's SIGKILL (marks), 221 of eleven 0.4 s after (cgroups, under the
// race detector). It costs about 1 MiB of memory of its own (measured
// with the offstage binary; the rest of its resident set is the
// executable's pages, shared with the host), and no goroutine or CPU while
// the host lives. The lifeline described in
// lifeline.go still kills a group at once through the kernel, before the
// keeper even wakes. Where /proc/self/exe cannot be executed no keeper
// starts and the lifeline alone covers the host's death.
//
// Why cgroups first, and marks rather than the other alternatives:
//   - A child subreaper (PR_SET_CHILD_SUBREAPER) on the host makes
//     daemonized orphans its children, but not which command's: an orphan
//     arrives without its lineage. It also makes the host reap orphans of
//     anything an embedding program starts, and it does nothing once the
//     host is dead, when orphans go to init.
//   - A supervisor per command (the keeper re-executed, or a wrapper
//     shell that sets the subreaper bit) knows its own orphans, but costs
//     an exec per command: the spawn budget (1.25x raw os/exec) does not
//     hold it.
//   - The keeper as the parent of every shell (spawning them for the host
//     and passing their pipes over a socket) would be a subreaper of them
//     all, but still could not tell one command's orphans from another's,
//     and puts a round trip and a second process between the host and
//     every command.
//   - The environment alone (the marker is kept as a second net) is
//     cleared by env -i and sudo, and overwritten by daemons that set
//     their process title.
//   - Setting the command's mark on the host itself around the fork
//     (rlimits are per process) would mark whatever another goroutine of
//     the embedding program forks meanwhile as the command's, and kill it
//     with the task: hence ptrace, which stops the one child.
//   - cgroup v2 is exact and atomic, the kernel's own answer, used where
//     it is writable; stock containers with a read-only /sys/fs/cgroup,
//     and ssh sessions of users, do not give it.
//   - A PID namespace per command dies with its init, but needs
//     unprivileged user namespaces (refused by Docker's default seccomp
//     profile and by Ubuntu's AppArmor policy) and changes the uids and
//     pids a command sees.
//   - ptrace of every command's whole life follows every fork, but stops
//     each one, and leaves the command unable to use a debugger or strace.
//
// macOS and other Unix systems have no cgroups, no prlimit of another
// process and no /proc: there (ModeGroup), a command is its process group
// (signalled as a group, killed when its leader exits, and on the host's
// death through the lifeline, which the same system calls arm but this
// project does not verify), and processes that leave the group are not
// contained.
package contain
