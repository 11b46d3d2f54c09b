// Package proc runs one shell command as a supervised OS process, as
// os/exec runs one program: in its own process group, signalled with
// everything it started (daemons included), always reaped, its output
// captured in bounded memory, and killed with all it started if the host
// dies. It knows nothing of tasks or models: package tools runs a command
// as a task of a task.Table (tools.SpawnShell).
//
// # Quick start
//
//	p, err := proc.Start(ctx, proc.Config{Command: "make test", Dir: repo})
//	if err != nil { … }
//	defer p.Stop(0)                      // a no-op once it has exited
//	exit, err := p.Wait(ctx)             // reaped, and its output captured
//	chunk := p.Read(proc.Combined, 0, 0) // all the output memory holds
//	fmt.Print(proc.Clean(chunk.Data))    // text safe for a model
//	fmt.Println(exit.Code, exit.Err())
//
// Output can be read while the command runs: Read from a cursor (a byte
// offset) returns the cursor to read on from; WaitOutput waits for output
// past a cursor, so following the output needs no polling (see its
// example); WaitLine and ScanLines wait for lines that match a pattern.
// Input and CloseInput write to a command started with Config.Stdin or
// Config.TTY.
//
// # Your main, and the keeper
//
// On Linux the first Start re-executes your program's own binary
// (/proc/self/exe) as the host's keeper (and, where a cgroup is writable,
// once before that as a probe that exits at once): a small process
// (about 1 MiB of memory of its own) in a session of its own, named
// offstage-keeper,
// whose one job is to end whatever your commands left running when your
// process dies, SIGKILL included (see "When the host dies"). No call is
// needed: an init function of this package finds the keeper's variable
// (OFFSTAGE_PROC_KEEPER) in the environment and takes over before main
// runs. What that means for your program:
//
//   - main, TestMain, and the init functions of the packages that import
//     proc (your main package among them) never run in the keeper. Init
//     functions of packages initialized before proc do: keep them free
//     of side effects (files, sockets, output, goroutines that matter),
//     as init functions should be.
//   - /proc/self/exe must be executable. A binary on a noexec mount, or
//     in a sandbox that forbids exec, gets no keeper; its commands are
//     then contained while it lives, and on its death by the lifeline
//     (their process group) alone.
//   - ps shows one more process of your binary per process that calls
//     Start; it leaves once its work is done after yours has exited.
//   - OFFSTAGE_PROC_KEEPER is set by proc, for the keeper alone; a
//     program started with it set becomes a keeper.
//
// A program whose process holds secrets (API keys) that its commands
// must not read calls ProtectHost early in main (see "Environment and
// secrets").
//
// # Lifecycle
//
// Start starts the command and returns at once; the Process is the
// caller's. There is nothing to close: a Process's goroutines and
// descriptors are released once it has exited and been reaped, which
// Done's closing says, and its output stays readable as long as it is
// referenced. So every command must end: by itself, by Stop, or by the
// end of the context given to Start; until then it holds three or four
// goroutines and its pipes. Stop and a context's end send SIGTERM to
// everything the command started and SIGKILL after the grace
// (Config.Grace); Stop returns at once, Wait waits.
//
// Start runs Config.Command through Config.Shell (/bin/sh -c), or the
// program and arguments of Config.Args, in a new process group whose id
// is the shell's pid. The child's environment is
// the host's (or Config.Env) without what looks like a secret (see
// Environment and secrets).
//
// As soon as the leader exits by itself, whatever it left running, in its
// group or not, is killed with SIGKILL (see Containment). On Linux the
// exit is observed without reaping (waitid with WNOWAIT), so the group is
// killed while the leader's zombie still holds the group id: a signal can
// never reach a group whose id was reused. Elsewhere the leader is reaped
// first and the group killed microseconds later.
//
// Wait returns once the leader is reaped, what it left is gone, and the
// output captured. It cannot hang on pipes held by processes out of reach
// (see Limits under Containment): they get Config.WaitDelay after the
// leader's exit, then our ends are closed.
//
// A process we stopped reports Exit.Stopped, and Exit.Cause says why:
// ErrStopped after Stop, context.Cause of Start's context when it ended.
// One killed by a signal we did not send reports the signal and not
// Stopped. Exit.Err tells both apart from a clean exit: it returns an
// *ExitError, which unwraps to the cause. As a shell task
// (tools.SpawnShell), the first is canceled (or timed_out, by the task's
// timeout), the second failed.
//
// # Concurrency properties
//
// All methods of Process are safe for concurrent use. Each process has
// three goroutines (two readers and a reaper), and a fourth that watches
// for prompts unless Config.PromptAfter is negative; the first three end by
// the time Done is closed, the watcher as soon as it sees Done closed (the
// keeper is a process, and costs the host no goroutine, only the descriptor
// of its pipe); Start's context is watched with context.AfterFunc, which is
// released then too. Signals are sent under the process's lock so they are
// ordered before the leader is marked exited. Input and CloseInput take
// turns through a one-slot semaphore, so writes are never interleaved, and
// a caller that waits its turn (behind a write to a command that stopped
// reading) gives up when its own context ends. Reads never block;
// WaitOutput, WaitLine and ScanLines block until output arrives, the
// process is done, or their context ends.
//
// The sections below say how: containment, the keeper, secrets, output,
// and prompts, with the designs that were rejected and why.
//
// # Containment
//
// Everything a command starts belongs to it: not only its process group
// but every descendant, whatever it does with sessions, groups or signal
// dispositions (setsid, a daemon's double fork, nohup, trap ” TERM HUP
// IO). Stop, the end of Start's context, and the leader's exit end all of
// them, and Wait returns only once none is left (Exit.Leftovers counts
// what the leader left behind; Exit.Survivors, which should be zero, what
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
// a fifth of what a short command cost beyond os/exec. When the host dies, its keeper (below) ends what is left in its
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
// forks each command without a sandbox from a fenced thread (a sandbox
// fences more): in a mount namespace, made once per host and shared by
// its commands, where every cgroup file system, /sys and /proc/sys are
// read-only (EROFS), and nothing else changes; without, in its bounding
// set, CAP_SYS_ADMIN (remount, mount, setns back), CAP_SYS_PTRACE
// (another process's /proc/PID/root or memory) and those that change
// the kernel (CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT, CAP_BPF,
// CAP_PERFMON); and, from Linux 5.13, in a Landlock domain that allows
// every file access but refuses any mount, even in a user namespace of
// the command's own (where it would be root again and could mount a
// cgroup file system of its own cgroup namespace). What it costs such a
// command: no mount, unshare -m, nsenter, ip netns, modprobe, sysctl -w,
// perf or bpftrace, no ptrace of a process it did not start, no writes
// under /sys; a host that runs as its task contains its own commands by
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
// Exit.Survivors, not waited for forever. The host's own soft RTTIME
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
// Exit.MemoryKills, from oom_kill in memory.events (v2) or
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
//
// # Environment and secrets
//
// A command sees the host's environment (or Config.Env) filtered by
// Config.EnvPolicy. By default it withholds every variable whose name
// contains KEY, SECRET, TOKEN, PASSWORD, PASSWD or CREDENTIAL (any case)
// or has PASS, COOKIE, PRIVATE or DSN as a part between underscores,
// OFFSTAGE_JOURNAL_URL, every variable whose value holds a URL with a
// password (DATABASE_URL=postgres://app:pw@db/app; a URL without one is
// passed: it is an address, and commands need it), and every value that
// sets a password as connection strings do ("password=…"). Names are the
// only signal a filter has, and a URL's password is a secret whatever
// the variable is called, so both are looked at; EnvPolicy.Keep and
// Drop correct the rule, by name or pattern. EnvPolicy.Withheld lists the
// names withheld (never the values), so a program that finds itself
// logged out (gh, npm) can be explained to whoever runs it.
//
// Filtering a child's environment does not hide the host's: a child can
// read its parent's /proc/PID/environ and /proc/PID/mem, which hold the
// keys the host was started with and the ones it holds in memory. Call
// ProtectHost once, early in main, to make the host not dumpable
// (ssh-agent does the same): its /proc files then belong to root, its
// environment and memory cannot be read nor ptrace attached by processes
// of the same user, and no core dump is written. Unsetting the variables
// instead (os.Unsetenv) does not help: /proc/PID/environ shows the block
// the process was started with, and the memory holds the values anyway.
// What stays reachable: a child running as root (or with
// CAP_SYS_PTRACE) reads any process's memory, so a host run as root
// cannot hide anything from its commands; /proc/PID/cmdline is readable
// by everyone, so secrets never belong in arguments; and files the user
// can read (a ~/.netrc, a shell's rc file exporting the key) stay
// readable. The keeper and every command start dumpable again (exec
// resets the flag), and nothing in this package needs to read the host's
// own /proc files. A host that is itself a command of another offstage
// host (OFFSTAGE_MARK is in its environment) is left dumpable: the outer
// host finds a command that left its group by the mark in its
// environment, and must still be able to read it; and such a host holds
// nothing the outer host's commands could not reach anyway, since they
// started it (and could have started it under strace).
//
// # Output
//
// Stdout and stderr are one pipe, as on a terminal, so the output is
// stored in the order it was written: a model reading a failure sees the
// line that caused it before the error. With Config.SeparateStreams they
// are two pipes read by two goroutines, stored each separately and
// interleaved in the order received (writes microseconds apart may be
// stored swapped: two pipes carry no common clock). Memory holds a head (Config.HeadBytes,
// 64 KiB) and a ring of the tail (Config.TailBytes, 1 MiB) of the combined
// output, and a ring of each stream (Config.StreamBytes, 256 KiB); nothing
// grows with the output. An optional log file (Config.LogPath) keeps the
// combined output up to Config.LogMaxBytes (64 MiB), then stops and ends
// with a line saying how much it left out. A write that fails (a full
// disk) stops it the same way, the log staying a prefix of the output: the
// closing line says where and why (on a full disk, output is given back to
// make room for it), Config.OnLogError is told once as it happens, and
// Process.Log and Exit.LogErr (a *LogError) say where logging stopped.
// A log also stops, the same way, before it would leave its file system
// less free space than Config.LogReserveBytes (1% of it, between 1 MiB
// and 256 MiB): what shares the disk (offstage's journal) keeps room to
// record, where a chatty command used to fill the disk for both.
//
// With Config.Stdout, stdout is also copied to a writer as it is captured
// (acpserver speaks MCP to an editor's server that way, over its stdin and
// stdout): a writer that blocks holds the child back, as a pipe would.
//
// Reads never block. Read returns the output since a cursor (a byte offset
// from the first byte) and the cursor to continue from; bytes the ring no
// longer holds are read back from the log, when there is one and it holds
// them (the log is the combined output from its first byte, so cursors
// mean the same in both), and otherwise counted in Chunk.Skipped, never
// silently dropped.
// TailLines returns the last lines. WaitOutput waits for output past a
// cursor, woken as it arrives. Raw bytes are returned as written; Clean
// strips ANSI escapes, applies carriage returns and makes invalid UTF-8
// safe for a model.
//
// # Programs that talk back
//
// WaitLine waits for a line matching a regular expression, woken by the
// output as it arrives (capture closes a channel under the lock that
// writes the output), never by polling.
//
// A process seems to wait for input when its output has stopped for
// Config.PromptAfter (4s) on an unfinished last line that LooksLikePrompt:
// ending in "?", ":", ">" or a choice such as "[y/N]", or mentioning a
// password or passphrase (the rule and its false positives are documented
// there). WaitingForInput reports it until output resumes, and
// Config.OnPrompt is called once per stall. A timer that follows the last
// output does the watching, one goroutine per process, which sleeps
// between checks and ends with the process. A shell task
// (tools.SpawnShell) tells its owner with a task notice, which also ends
// a task.View.Wait on it at once.
//
// A process with an input (Config.Stdin or Config.TTY) is also seen from
// the kernel, on Linux: when its output has been quiet for PromptAfter and
// its last line is no question, each quiet period (the same timer) looks
// at its processes (the cgroup's list or the marked ones) for one asleep
// (state S) in read or readv (/proc/PID/syscall; the numbers of the
// running GOARCH) on a descriptor that is the stdin pipe, or, on a
// terminal, the terminal (or /dev/tty) from the terminal's foreground
// process group (TIOCGPGRP on the master). Then it waits for input, marked
// with its unfinished last line or "(NAME is reading its input)": cat or
// read with no prompt, a pager (less), a REPL at its prompt (which is
// right). Known false positives: a program that reads its input only for
// optional keys while it works silently (a dev server's "press r to
// restart", ffmpeg's "q" when its progress is off): it is marked, once
// per quiet stall, though nobody needs to answer; the mark clears when
// output resumes or the read ends. Only each process's main thread is
// looked at. Not seen: a program that waits in poll or
// select rather than read (some editors; their screen usually ends on a
// prompt-like line or shows output), and commands without an input, whose
// stdin is /dev/null and cannot block. Where /proc/PID/syscall cannot be
// read (it needs ptrace access; the parent, same user, normally has it),
// or off Linux, the prompt-line rule alone applies, silently.
//
// WaitLine and ScanLines look at output through the ring and then the
// log: without a log, output faster than they can read (gigabytes a
// second) passes partly unseen, and they count the bytes they skipped.
// How fast they read depends on the pattern more than on the lines: a
// pattern such as `ERROR|panic:` runs the regexp package's NFA over every
// byte, about 15 MB/s on a loaded 2-core machine
// (BenchmarkCaptureWatchLog), so a command printing faster than that,
// beyond the 1 MiB ring, starts to pass a scan without a log by. (A shell
// task's notify_on watch, in package tools, is a ScanLines.)
//
// With Config.TTY the command runs on a pseudo-terminal of its own
// (creack/pty): a new session with the terminal as controlling tty, so
// the containment above is unchanged.
//
// # Sandbox
//
// Config.Sandbox fences a command and everything it starts, daemons
// included; nothing inside can lift it. Modes: SandboxReadOnly reads what
// the host can and writes nothing but the command's own temporary
// directory (made for it, named by $TMPDIR, removed after it);
// SandboxWorkspaceWrite also writes under Sandbox.Workspace (default
// Config.Dir) and the directories of Sandbox.Write. Device files such as
// /dev/null and the command's own terminal stay writable; of /dev
// nothing else is readable (a terminal read takes the keystrokes meant
// for another shell). Sandbox.Network off (the default) cuts the
// network, UDP and DNS included.
//
// What holds it, each by the kernel:
//
//   - Landlock (package proc/internal/sandboxstep, over the raw system
//     calls): writes only in the writable places, reads everywhere but
//     /dev; from ABI 6 no signal to a process outside the command's
//     domain (the host, other tasks), and no ptrace of one at any ABI.
//   - A mount namespace of its own where every mount is read-only but
//     bind mounts of the writable places: Landlock does not fence a
//     file's mode, owner or times (chmod, chown, touch -d), and a command
//     owns its user's files (root's command, every system file, which it
//     could make set-uid for every user). Only the top mount of a
//     writable place is made writable: one mounted under it stays
//     read-only (one the host keeps read-only must not become writable).
//     The writable places are pinned when first used (a descriptor of
//     each), and a start whose place's path names another directory by
//     then (a command moved it and left a link) is refused. /dev/pts
//     there is a devpts of the command's own: it makes terminals
//     (script, expect) but sees none of the user's. An IPC namespace of
//     its own: System V shared memory is not a file. A session keyring
//     of its own.
//   - With the network off, a network namespace of its own with loopback
//     alone (where none can be made, Landlock's TCP rules, ABI 4; UDP
//     from ABI 10).
//   - Capabilities: a command run by root keeps only those that let it
//     work on files it does not own and bind low ports (CAP_CHOWN,
//     CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_NET_BIND_SERVICE):
//     with CAP_MKNOD it could make a block device in the workspace and
//     write a disk through it, with CAP_NET_ADMIN join its network to the
//     host's, with CAP_SYS_ADMIN push keystrokes into the user's
//     terminal, with CAP_SETUID become another user (its keyrings, its
//     processes' limits). Others keep none. no_new_privs, so no set-uid
//     program lifts any of it.
//   - No set-id bits: a command owns what it makes and needs no
//     capability to make it set-uid; run by root it could leave a
//     set-uid root program for any user of the machine. A seccomp filter
//     refuses (EPERM) chmod, fchmod, fchmodat(2), mknod(at) with those
//     bits, and open, openat and creat that create a file with them;
//     openat2 and io_uring, which it cannot see into, are refused with
//     ENOSYS (programs fall back). On amd64 and arm64 (and their 32-bit
//     ABIs); elsewhere a gap the status states.
//   - A session of its own with no controlling terminal (a terminal of
//     its own with Config.TTY), and no descriptor but its own.
//
// How: all of these belong to a thread (Landlock's domain, credentials,
// no_new_privs, the namespaces), and what a thread forks or execs
// inherits them. Go cannot run code between fork and exec, so Start
// fences a thread before the fork, in one of two ways.
//
// As root, from a thread of the host: a goroutine locks itself to an OS
// thread of its own (never the main thread, which the runtime would park
// instead of ending), fences it, forks the shell from it, and exits
// still locked, which ends the thread: the host's other threads are
// never fenced. Until it ends, that thread is in the command's own
// domain, with its uid: the command could signal it (and so kill the
// host) or, in a dumpable host, read its memory. So the shell runs a
// line of its own first, which waits on a pipe that Start writes to once
// the thread is gone; nothing of the command runs before. A network
// namespace whose command left nothing in it (its cgroup empty when its
// leader exited; no socket left, TIME_WAIT included) is kept for the
// next command, as empty cgroups are: making one costs the kernel about
// a millisecond of CPU. Not this way: a start that is traced (cgroup v1
// limits: the tracing thread must write those cgroups, outside any
// fence), a command not run by the default shell (Config.Args, another
// Config.Shell: the gate is a line of sh), and a host holding a
// descriptor without close-on-exec that the shell would inherit
// (KeepInheritedToSelf prevents that; offstage calls it first thing).
//
// Otherwise through a step: the command starts as this binary
// re-executed (as the keeper is; the init function of a small package
// that proc imports, proc/internal/sandboxstep, takes over when it finds
// OFFSTAGE_PROC_SANDBOX, early in the binary's initialization: only the
// packages it needs, and those the Go runtime orders before it, are
// initialized in the step, which must be free of side effects as the
// keeper's are), cloned into the namespaces it needs; it brings up
// loopback, makes its mounts, fences its thread, marks every descriptor
// past the lifeline close-on-exec, and execs the shell from that thread.
// A host that is not root always takes this way: its namespaces are made
// inside a user namespace of the command's own, where it keeps its uid
// and gid (files of other users show as nobody), and which a process
// with threads cannot make for itself. The step maps its ids itself,
// once it has exec'd: a host that called ProtectHost is not dumpable,
// nor is its child until it execs, and the /proc files where a parent
// would write the child's map then belong to root.
//
// Either way the shell keeps its pid, group, cgroup (it was cloned into
// it), mark and terminal: containment and limits are unchanged. (The
// tests run as root; they run every fence both ways, and a host that is
// not root as nobody.)
//
// What this host gives is found at the first sandboxed Start, and cached:
// the Landlock ABI (the version query of landlock_create_ruleset), and
// whether a network namespace and read-only mounts can be made.
// Which layer holds what, per host: from Landlock ABI 1 (Linux 5.13)
// writes; below ABI 3 Landlock does not refuse truncate(2) by path, and
// the read-only mounts do (for a user that is not root, in a user
// namespace of the step's own); below ABI 2 renames and links across
// directories fail (EXDEV) even inside the writable places, a gap the
// status states; the network off by a network namespace at any ABI.
// SandboxStatus.Enforced names the layer of each. A sandbox whose mode
// needs a rule this host lacks (no Landlock; an ABI below 3 without
// read-only mounts; the network off with neither
// a namespace nor Landlock's UDP rules) fails Start with an error that
// says what is missing, unless Sandbox.BestEffort: then it starts with
// what holds and Process.Sandbox lists what does not (NotEnforced).
// Signals without ABI 6, and modes and owners without read-only mounts,
// are not a refusal but a gap the status always states (Gaps), as is a
// writable place that holds the home directory. CheckSandbox tells a
// program all this at start-up. Off Linux, a sandboxed mode fails Start:
// macOS's sandbox-exec is not used, as this project cannot test it.
//
// Known limits: a fenced command can still read whatever the user can
// outside /dev (the fence is about writes and the network), including
// /proc/PID/environ of the user's processes (ProtectHost hides the
// host's); abstract unix sockets are scoped with the network off (ABI 6);
// pathname unix sockets (an ssh agent, docker.sock) stay reachable; and
// it may lower the resource limits of the user's processes (prlimit),
// which no Landlock rule covers.
//
// What it costs (BenchmarkSpawnSandboxed, BenchmarkSpawnSandboxedStep,
// BenchmarkSpawnSandboxedPaired): from a thread of the host, about twice
// an unsandboxed start (the fence's system calls, the mount and IPC
// namespaces, the seccomp filter, the command's temporary directory, a
// new thread, the gate). Through the step, a few milliseconds more: the
// start of a second copy of a large Go binary (its runtime sets up every
// interface table and initializes packages before the step's hook runs)
// and new namespaces each time; as nobody on the project's machine, 6
// to 7.5 ms a command against 0.9 ms unsandboxed.
package proc
