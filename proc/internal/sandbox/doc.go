// Package sandbox fences a command for package proc (Config.Sandbox):
// Prepare plans a Policy on this host (what holds, Status), Apply and
// Start fence the command, from a fenced thread of the host or through
// the step (package step, the binary re-executed), and Release gives back
// its temporary directory and keeps its network namespace for the next
// command. This is the kernel detail behind proc's sandbox; proc's doc
// says what it promises.
//
// # Sandbox
//
// Config.Sandbox fences a command and everything it starts, daemons
// included; nothing inside can lift it. Modes: sandbox.ReadOnly reads what
// the host can and writes nothing but the command's own temporary
// directory (made for it, named by $TMPDIR, removed after it);
// sandbox.WorkspaceWrite also writes under Policy.Workspace (default
// Config.Dir) and the directories of Policy.Write. Device files such as
// /dev/null and the command's own terminal stay writable; of /dev
// nothing else is readable (a terminal read takes the keystrokes meant
// for another shell). Policy.Network off (the default) cuts the
// network, UDP and DNS included.
//
// What holds it, each by the kernel:
//
//   - Landlock (package proc/internal/sandbox/step, over the raw system
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
//     ENOSYS (programs fall back). The same filter refuses prlimit64
//     that sets another process's limits (reading them, and setting its
//     own, stay): a command lowered its forker's descriptors, or its
//     supervisor's CPU time, and broke every session. On amd64 and arm64
//     (and their 32-bit ABIs); elsewhere a gap the status states.
//   - A session of its own with no controlling terminal (a terminal of
//     its own with Config.TTY), and no descriptor but its own.
//
// How: all of these belong to a thread (Landlock's domain, credentials,
// no_new_privs, the namespaces), and what a thread forks or execs
// inherits them. Go cannot run code between fork and exec, so Start
// fences a thread before the fork, in one of three ways.
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
// A host that is not root, through its forker: its namespaces must be
// made inside a user namespace, where it keeps its uid and gid (files
// of other users show as nobody), and which a process with threads
// cannot make for itself. So the host starts, once, at its first such
// command, the step (below) as its forker: this binary re-executed in a
// user namespace of its own, with the capabilities there to make the
// namespaces and mounts, in a session of its own, not dumpable, with
// GOMAXPROCS=1. For each command the host sends it, over a unix socket,
// the command's path, arguments, environment, directory, group or
// session, descriptors (stdio, the gate, the lifeline, the pinned
// writable places: SCM_RIGHTS) and its rules; the forker fences a
// thread of its own exactly as a root host does (network namespace,
// mount and IPC namespaces, then step.Fence) and forks the shell from
// it with CLONE_PARENT, waits until that thread has ended, and answers
// with the pid. It makes the next command's thread as soon as it has
// answered, with what does not depend on the command done (its network
// namespace entered, every mount read-only), so that a start waits only
// for the writable places, Landlock and the fork; a request of another
// policy gives that thread up. The shell is the host's child: the host waits for it,
// its status and resource usage, and kills its group as for any
// command. It starts behind the gate, which the host opens only once
// it has moved it into its cgroup (clone3, which CLONE_INTO_CGROUP
// needs, refuses CLONE_PARENT with the exit signal Go always gives) and
// set its mark (the start is not traced: ptrace requests come from the
// thread that forked, which is the forker's). The forker exits at
// the end of its socket, that is, with its host however it ends; one
// that is gone (below Landlock ABI 6 a command of the same user can
// kill it) is replaced at the next start. Its threads, made when the Go
// runtime decides, often after a command's fork, are known to the
// containment (contain.Helper): in ModeMarks a pid made after a leader
// otherwise makes its end scan every process of the machine. It keeps
// the network namespace of a command that left nothing (an empty
// cgroup; in ModeMarks no pid made after its leader but its own
// threads) and no socket in it, for the next, as a root host does,
// told so with the next request (the thread prepared meanwhile has its
// namespace already: an empty one serves the command after next).
// Descriptors past the lifeline it
// marks close-on-exec when it starts; the command's own, 0 to 10, are
// each set or closed at its fork. A failing exec would leave a zombie
// of the host that no one reaps (CLONE_PARENT, and Go reaps only its
// own child), so the forker checks that the directory can be entered
// before it forks; /bin/sh itself is found.
//
// Otherwise through a step: the command starts as this binary
// re-executed (as the keeper is; the init function of a small package
// that proc imports, proc/internal/sandbox/step, takes over when it finds
// OFFSTAGE_PROC_SANDBOX, early in the binary's initialization: only the
// packages it needs, and those the Go runtime orders before it, are
// initialized in the step, which must be free of side effects as the
// keeper's are), cloned into the namespaces it needs; it brings up
// loopback, makes its mounts, fences its thread, marks every descriptor
// past the lifeline close-on-exec, and execs the shell from that thread.
// A host that is not root takes this way for a command not run by the
// default shell, or a start traced for more than its mark (cgroup v1
// limits); its namespaces are then made inside a user namespace of the
// command's own. The step maps its ids itself,
// once it has exec'd: a host that called ProtectHost is not dumpable,
// nor is its child until it execs, and the /proc files where a parent
// would write the child's map then belong to root.
//
// Each way the shell keeps its pid, group, cgroup (it was cloned into
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
// sandbox.Status.Enforced names the layer of each. A sandbox whose mode
// needs a rule this host lacks (no Landlock; an ABI below 3 without
// read-only mounts; the network off with neither
// a namespace nor Landlock's UDP rules) fails Start with an error that
// says what is missing, unless Policy.BestEffort: then it starts with
// what holds and Process.Sandbox lists what does not (NotEnforced).
// Signals without ABI 6, and modes and owners without read-only mounts,
// are not a refusal but a gap the status always states (Gaps), as is a
// writable place that holds the home directory. sandbox.Check tells a
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
// new thread, the gate). Through the forker about the same, and a round
// trip to it (as nobody on the project's machine, ModeMarks, under
// load: the network namespace 0.65 ms where none is kept, the mounts
// 0.25, Landlock and the rest of the fence 0.5, the fork and exec 0.5;
// the first two now before the request). Through the step, a few
// milliseconds more: the start of a second copy of a large Go binary
// (its runtime sets up every interface table and initializes packages
// before the step's hook runs) and new namespaces each time (6 to 7.5
// times an unsandboxed start as nobody): half in the host (the clone of
// a child into a new user namespace is not a vfork, so the kernel copies
// the host's page tables, to tear them down at the exec), half in the
// step (the Go runtime's start, its page faults, its mounts).
package sandbox
