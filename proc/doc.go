// Package proc runs one shell command as a supervised OS process: in its
// own process group, signalled with everything it started (daemons
// included), always reaped, its output captured in bounded memory, and
// killed with all it started if the host dies. SpawnShell runs one as a
// task (shell:N) of a task.Table.
//
//	p, err := proc.Start(ctx, proc.Config{Command: "make test", Dir: repo})
//	if err != nil { … }
//	chunk := p.Read(proc.Combined, 0, 64<<10) // output so far, from cursor 0
//	fmt.Print(proc.Clean(chunk.Data))       // safe for a model
//	next := chunk.Next                      // read on from here later
//	exit, _ := p.Wait(ctx)
//	fmt.Println(exit.Code, exit.Err())
//
// # Lifecycle
//
// Start runs Config.Command through Config.Shell (/bin/sh -c) in a new
// process group whose id is the shell's pid, and returns at once. The
// child's environment is the host's (or Config.Env) without what looks
// like a secret (see Environment and secrets).
//
// Stop, or the end of Start's context, sends SIGTERM to the whole group
// and every process the command started, and SIGKILL to them after the
// grace period. As soon as the leader exits by itself, whatever it left
// running, in its group or not, is killed with SIGKILL (see
// Containment). On Linux the exit is observed without reaping (waitid
// with WNOWAIT), so the group is killed while the leader's zombie still
// holds the group id: a signal can never reach a group whose id was
// reused. Elsewhere the leader is reaped first and the group killed
// microseconds later.
//
// Wait returns once the leader is reaped, what it left is gone, and the
// output captured. It cannot hang on pipes held by processes out of reach
// (see Limits under Containment): they get Config.WaitDelay after the
// leader's exit, then our ends are closed.
//
// A process we stopped reports Exit.Stopped; one killed by a signal we did
// not send reports the signal and not Stopped; Exit.Err tells the two
// apart from a clean exit. As a task, the first is canceled (or timed_out,
// by the task's timeout), the second failed.
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
// How a process is known to belong to a command: every command gets a
// mark, a number unique on this host (the magic 0x5eed, a random host id,
// a sequence number). It is set as the soft RLIMIT_RTTIME limit of the
// shell right after it is exec'd, and as OFFSTAGE_MARK in its
// environment. Resource limits are inherited through fork and exec, kept
// across setsid, setpgid and setuid programs, and not touched by what
// daemons do to their environment and their argv (redis, PostgreSQL and
// nginx overwrite both to set their process title). RLIMIT_RTTIME bounds
// only the CPU time of a real-time scheduled process between blocking
// calls; a mark is more than 10^18 microseconds, so the limit it sets can
// never be reached. The host process carries a mark of its own, its host
// mark, from its first Start: a shell that forks before its own mark is
// set (the host's goroutine may be descheduled between the exec and the
// prlimit) passes the host mark on, which tells a scan to read that
// process's environment for the command's mark and to give it that mark.
// Finding a command's processes is a scan of /proc (a prlimit call per
// process, about 1 µs), never a guess from a command line or a bare pid: each process is opened as a pidfd and checked again before it is
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
// When the host dies: a keeper process, one per host, started by the
// first Start. It is this same binary re-executed (an init function in
// this package takes over when it finds the keeper's variable in its
// environment, so embedding programs need no call of their own). It sits
// in a session of its own, ignores the terminal's signals and SIGTERM,
// and blocks reading a pipe whose only write end the host holds; when the
// host exits for any reason, SIGKILL included, the read returns and the
// keeper ends every process carrying one of the host's marks: SIGTERM, up
// to 300 ms to go, then SIGKILL until none is left. Measured here: 213
// processes of seven kinds of escape gone 0.35 s after the host's
// SIGKILL. It costs about 1 MiB of memory of its own (measured with the
// offstage binary; the rest of its resident set is the executable's
// pages, shared with the host), and no goroutine or CPU while the host
// lives (Keeper reports it). The lifeline described in lifeline.go still kills
// a group at once through the kernel, before the keeper even wakes.
//
// Why this and not the alternatives:
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
//   - cgroup v2 (one cgroup per command, cgroup.kill) is exact and
//     atomic, but needs a delegated, writable hierarchy, which stock
//     containers and this project's CI machines (cgroup v1) do not give;
//     it could be added on top where it exists, and is not, because it
//     could not be verified here.
//   - A PID namespace per command dies with its init, but needs
//     unprivileged user namespaces (refused by Docker's default seccomp
//     profile and by Ubuntu's AppArmor policy) and changes the uids and
//     pids a command sees.
//   - ptrace of every command follows every fork, but stops each one,
//     and leaves the command unable to use a debugger or strace.
//
// Limits: a process that both resets its RLIMIT_RTTIME and removes
// OFFSTAGE_MARK from its environment escapes (audio programs that ask
// rtkit for real-time scheduling set the limit; none of them also scrub
// the environment). So does one that changes its user to one we cannot
// signal (sudo): it is reported in Exit.Survivors, not waited for
// forever. The host's own soft RTTIME limit is its host mark (as inert
// for it as for its commands), and processes the embedding program starts
// by other means inherit it: they are never matched, since they carry no
// command's mark in their environment. A host that
// itself runs as a task of another offstage marks its commands with its
// own marks, and its keeper (which sheds the outer mark) ends them when
// the outer offstage kills that host. Where /proc/self/exe cannot be
// executed no keeper starts (Keeper says why) and the lifeline alone
// covers the host's death.
//
// macOS and other Unix systems have no prlimit of another process and no
// /proc: there, a command is its process group (signalled as a group,
// killed when its leader exits, and on the host's death through the
// lifeline, which the same system calls arm but this project does not
// verify), and processes that leave the group are not contained.
//
// # Environment and secrets
//
// A command sees the host's environment (or Config.Env) filtered by
// Config.EnvPolicy. By default it withholds every variable whose name
// contains KEY, SECRET, TOKEN, PASSWORD, PASSWD or CREDENTIAL (any case),
// OFFSTAGE_JOURNAL_URL, and every variable whose value holds a URL with
// a password (DATABASE_URL=postgres://app:pw@db/app; a URL without one
// is passed: it is an address, and commands need it). Names are the
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
// Stdout and stderr are read from two pipes by two goroutines and stored
// interleaved in the order they were received (writes to the two streams
// microseconds apart may be stored swapped: two pipes carry no common
// clock), and each stream separately. Memory holds a head (Config.HeadBytes,
// 64 KiB) and a ring of the tail (Config.TailBytes, 1 MiB) of the combined
// output, and a ring of each stream (Config.StreamBytes, 256 KiB); nothing
// grows with the output. An optional log file (Config.LogPath) keeps the
// combined output up to Config.LogMaxBytes (64 MiB), then stops and ends
// with a line saying how much it left out. A write that fails (a full
// disk) stops it the same way, the log staying a prefix of the output: the
// closing line says where and why (on a full disk, output is given back to
// make room for it), Config.OnLogError is told once as it happens, and
// Process.Log and Exit.LogErr (a *LogError) say where logging stopped.
//
// Reads never block. Read returns the output since a cursor (a byte offset
// from the first byte) and the cursor to continue from; bytes the ring no
// longer holds are read back from the log, when there is one and it holds
// them (the log is the combined output from its first byte, so cursors
// mean the same in both), and otherwise counted in Chunk.Skipped, never
// silently dropped.
// TailLines returns the last lines. Raw bytes are returned as written;
// Clean strips ANSI escapes, applies carriage returns and makes invalid
// UTF-8 safe for a model, and FilterLines keeps lines matching a regular
// expression.
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
// between checks and ends with the process. A shell task (SpawnShell)
// tells its owner with a task notice of kind NoticeWaitingForInput, which
// also ends a task.View.Wait on it at once.
//
// ShellOptions.NotifyOn watches a shell's output: matching lines become
// notices of kind NoticeWatch, batched (the first match waits
// ShellOptions.WatchBatch, 1s, for company), rate-limited (one notice per
// WatchEvery, 10s), capped (WatchLines, 20, per notice, saying how many
// more matched; WatchNotices, 20, per task, the last one saying the watch
// ended). Like WaitLine, a watch looks at output through the ring and
// then the log: without a log, output faster than the watch can read
// (gigabytes a second) passes partly unseen, and a notice says how many
// bytes, whether or not a line matched: once on its own, then with the
// next notice, and the rest when the output ends. How fast a watch reads
// depends on the pattern more than on the lines: a pattern such as
// `ERROR|panic:` runs the regexp package's NFA over every byte, about
// 15 MB/s on a loaded 2-core machine (BenchmarkCaptureWatchLog), so a
// command printing faster than that, beyond the 1 MiB ring, starts to pass
// a watch without a log by.
//
// With Config.TTY the command runs on a pseudo-terminal of its own
// (creack/pty): a new session with the terminal as controlling tty, so
// the containment above is unchanged.
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
// ordered before the leader is marked exited. Input serialises writers and
// can be abandoned through its context.
package proc
