package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/offstage/offstage/internal/chanctx"
	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/resource"
)

// usageError is a mistake in how offstage was called or configured: exit
// code 2 and one sentence, no stack trace.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// errHelp means help was printed: exit 0.
var errHelp = errors.New("help printed")

// errInterrupted means the user's Ctrl-C ended a one-shot run before it
// was done: exit 130, as a shell reports a command SIGINT ended, so a
// script does not take an interrupted run for a success.
var errInterrupted = errors.New("interrupted")

// exitCode prints err, if any, and returns the exit code: 0 success, 1
// runtime failure, 2 usage or configuration error.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	var es exitStatus
	var ss stopSignal
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &es):
		return int(es) // a served command: the supervisor printed why
	case errors.As(err, &ss):
		fmt.Fprintln(stderr, "offstage:", err)
		return 128 + int(ss.sig)
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "offstage:", ue.msg)
		return 2
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(stderr, "offstage: interrupted")
		return 130
	default:
		fmt.Fprintln(stderr, "offstage:", err)
		return 1
	}
}

const mainUsage = `offstage runs LLM agents whose background work is done right: shells
and sub-agents that keep running while the conversation goes on, whose
results come back exactly once, that never leak a process.

Usage:
  offstage demo               a ten-second tour with a scripted model (no key, no network)
  offstage run [prompt]       talk to a model: one answer for a prompt, or a conversation
  offstage serve              a supervisor that hosts the sessions of run, mcp and acp, so their work outlives the terminal
  offstage mcp                serve background shells (and sub-agents) to any MCP client
  offstage acp                be an agent for editors that speak ACP (Zed and others), on stdio
  offstage agents             list the sub-agent profiles found, and the files skipped
  offstage sessions           the live sessions offstage serve hosts (offstage sessions close ID ends one)
  offstage tasks              what ran, from the journal (offstage tasks show ID for one)
  offstage dashboard          a live web page of the journal's tasks (offstage mcp --http serves it at /ui)
  offstage version            print the version (-v: how shells are contained, which limits hold)

Run "offstage COMMAND --help" for a command's flags and examples.
`

// run is the whole program: it parses args and runs the command.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return usagef("no command given; try \"offstage demo\"")
	}
	switch args[0] {
	case "demo":
		return demoCommand(ctx, args[1:], stdout, stderr)
	case "run":
		return runCommand(ctx, args[1:], stdin, stdout, stderr)
	case "mcp":
		return mcpCommand(ctx, args[1:], stdin, stdout, stderr)
	case "acp":
		return acpCommand(ctx, args[1:], stdin, stdout, stderr)
	case "serve":
		return serveCommand(ctx, args[1:], stdout, stderr)
	case "agents":
		return agentsCommand(ctx, args[1:], stdout, stderr)
	case "sessions":
		return sessionsCommand(ctx, args[1:], stdout, stderr)
	case "tasks":
		return tasksCommand(ctx, args[1:], stdout, stderr)
	case "dashboard":
		return dashboardCommand(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "offstage", version())
		if len(args) > 1 && (args[1] == "-v" || args[1] == "--verbose") {
			fmt.Fprintln(stdout, proc.Containment())
			for _, c := range resource.Controllers() {
				fmt.Fprintln(stdout, c)
			}
			fmt.Fprintln(stdout, sandboxSupport())
		}
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, mainUsage)
		return nil
	}
	if near := text.Nearest(args[0], commands); near != "" {
		return usagef("unknown command %q; did you mean %s? (offstage help lists the commands)", args[0], near)
	}
	return usagef("unknown command %q; the commands are %s (offstage help says what each does)", args[0], strings.Join(commands, ", "))
}

// commands are the CLI's commands, as mainUsage lists them.
var commands = []string{"demo", "run", "serve", "mcp", "acp", "agents", "sessions", "tasks", "dashboard", "version", "help"}

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown build)"
	}
	return versionOf(info)
}

// versionOf is the module's version as "go install …@vX" records it, or,
// for a build from a checkout, "devel" and the commit (with "+dirty" when
// the tree had changes), then the Go version.
func versionOf(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; len(rev) >= 12 {
			v += " " + rev[:12]
			if settings["vcs.modified"] == "true" {
				v += "+dirty"
			}
		}
	}
	return v + " (" + info.GoVersion + ")"
}

// parse parses flags that may come before or after positional arguments
// ("run 'a prompt' --json"), printing usage and examples for --help.
func parse(fs *flag.FlagSet, args []string, usage, examples string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stdout, "%s\n\nFlags:\n", usage)
				var flags strings.Builder
				shown(fs, &flags).PrintDefaults()
				// The flag package writes -name; the docs and the errors
				// say --name, which it takes too.
				io.WriteString(stdout, flagLine.ReplaceAllString(flags.String(), "  --"))
				fmt.Fprintf(stdout, "\nExamples:\n%s", examples)
				return nil, errHelp
			}
			msg := err.Error()
			if rest, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
				name := strings.TrimLeft(rest, "-")
				msg = "unknown flag --" + name
				var names []string
				shown(fs, io.Discard).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
				if near := text.Nearest(name, names); near != "" {
					msg += "; did you mean --" + near + "?"
				}
			}
			msg = badValue(fs, msg)
			return nil, usagef("%s; see \"offstage %s --help\"", msg, fs.Name())
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// shown is fs without its flags' old names, for --help: it lists each
// flag under its name only.
func shown(fs *flag.FlagSet, w io.Writer) *flag.FlagSet {
	out := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	out.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		// A retired name, and a flag with no usage (taken only to say why
		// the command refuses it), are not shown.
		if _, old := f.Value.(*oldName); !old && f.Usage != "" {
			out.Var(f.Value, f.Name, f.Usage)
			out.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	return out
}

// oldName is a flag's retired name: it still sets the flag it stands
// for, --help leaves it out, and used records that it was given, for the
// command to say which name to use.
type oldName struct {
	flag.Value // the flag's own
	used       bool
}

func (o *oldName) Set(v string) error {
	o.used = true
	return o.Value.Set(v)
}

func (o *oldName) String() string {
	if o == nil || o.Value == nil { // the flag package's zero value
		return ""
	}
	return o.Value.String()
}

// flagLine is the start of a flag's line in PrintDefaults' output.
var flagLine = regexp.MustCompile(`(?m)^  -`)

// badValuePattern is how package flag reports a value Set refused.
var badValuePattern = regexp.MustCompile(`^invalid value (".*") for flag -(\S+): parse error$`)

// badValue says what a duration or number flag wants instead of the flag
// package's bare "parse error"; other messages it returns as they are.
func badValue(fs *flag.FlagSet, msg string) string {
	m := badValuePattern.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	g, ok := fs.Lookup(m[2]).Value.(flag.Getter)
	if !ok {
		return msg
	}
	switch g.Get().(type) {
	case time.Duration:
		return fmt.Sprintf("--%s %s is not a duration: give one with a unit, such as 30s, 5m or 1h30m", m[2], m[1])
	case int, int64, uint, uint64:
		return fmt.Sprintf("--%s %s is not a whole number", m[2], m[1])
	}
	return msg
}

// cancelOnInterrupt returns a context that Ctrl-C cancels, and a function
// to release it.
func cancelOnInterrupt(ctx context.Context) (context.Context, func()) {
	sigs, stopSigs := interrupts()
	ctx, cancel := chanctx.CancelOn(ctx, sigs)
	return ctx, func() { cancel(); stopSigs() }
}

// workDir resolves --dir: the current directory when empty, else an
// existing directory.
func workDir(dir string) (string, error) {
	if dir == "" {
		return os.Getwd()
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", usagef("--dir %q is not a directory", dir)
	}
	return dir, nil
}

// interrupts returns a channel of Ctrl-C presses and a function to stop
// listening.
func interrupts() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt)
	return ch, func() { signal.Stop(ch) }
}
