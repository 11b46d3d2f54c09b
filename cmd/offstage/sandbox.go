package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/offstage/offstage/proc/sandbox"
	"github.com/offstage/offstage/tools"
)

// sandboxFlags are --sandbox, --sandbox-write, --sandbox-network,
// --sandbox-best-effort and --sandbox-escalation, on run, mcp and acp:
// the shells' sandbox (sandbox.Policy), over the user's config file.
type sandboxFlags struct {
	mode       *sandbox.Mode
	write      []string
	network    *bool
	bestEffort bool
	escalation string // "", ask, allow or deny
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.Func("sandbox", "run each shell in a sandbox: `MODE` off, read-only (writes only its own $TMPDIR) or workspace-write (also the working directory and --sandbox-write) (default: off, or the config file's)", func(s string) error {
		m, err := sandbox.ParseMode(s)
		if err != nil {
			return errors.New("give off, read-only or workspace-write")
		}
		f.mode = &m
		return nil
	})
	fs.Func("sandbox-write", "with --sandbox workspace-write, let shells also write under `DIR` (repeatable), such as Go's build cache ($(go env GOCACHE)) or npm's (~/.npm)", func(s string) error {
		abs, err := filepath.Abs(expandHome(s))
		if err != nil {
			return err
		}
		f.write = append(f.write, abs)
		return nil
	})
	fs.Func("sandbox-network", "`on` or off: whether sandboxed shells may use the network (default off)", func(s string) error {
		switch s {
		case "on":
			f.network = ptr(true)
		case "off":
			f.network = ptr(false)
		default:
			return errors.New("give on or off")
		}
		return nil
	})
	fs.BoolVar(&f.bestEffort, "sandbox-best-effort", false, "start the sandbox even where this host cannot enforce all of it; every result then says what was not enforced (default: refuse to start)")
	fs.Func("sandbox-escalation", "`allow`, ask or deny: whether the model may run one command outside the sandbox (bash with sandbox: false). ask (the default) asks the user (over ACP a permission request, in run a question in the conversation or on the terminal) and refuses where no one can be asked (mcp); allow runs it without asking (over ACP the user is still asked)", func(s string) error {
		switch s {
		case "allow", "ask", "deny":
			f.escalation = s
			return nil
		}
		return errors.New("give allow, ask or deny")
	})
}

func ptr[T any](v T) *T { return &v }

// expandHome turns a leading ~/ into the user's home directory.
func expandHome(s string) string {
	if rest, ok := strings.CutPrefix(s, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return s
}

// sandbox returns the shells' sandbox: the user's config file's (file),
// then the flags, checked against this host: a sandbox the user asked
// for that cannot hold stops offstage from starting (unless best effort),
// saying what is missing. Workspace is left to the session's directory.
func (f sandboxFlags) sandbox(file sandbox.Policy) (sandbox.Policy, error) {
	s := file
	s.Write = slices.Clip(s.Write)
	if f.mode != nil {
		s.Mode = *f.mode
	}
	s.Write = append(s.Write, f.write...)
	if f.network != nil {
		s.Network = *f.network
	}
	s.BestEffort = s.BestEffort || f.bestEffort
	if !s.On() {
		if len(f.write) > 0 || f.network != nil || f.bestEffort {
			return s, usagef("--sandbox-write, --sandbox-network and --sandbox-best-effort shape a sandbox: add --sandbox workspace-write (or read-only)")
		}
		return sandbox.Policy{}, nil
	}
	if s.Mode == sandbox.ReadOnly && len(s.Write) > 0 {
		return s, usagef("--sandbox read-only writes nowhere but each shell's $TMPDIR: use --sandbox workspace-write with --sandbox-write")
	}
	check := s
	if check.Workspace == "" {
		check.Workspace, _ = os.Getwd()
	}
	if _, err := sandbox.Check(check); err != nil {
		return s, usagef("cannot sandbox the shells: %v", trimProc(err))
	}
	return s, nil
}

// sandboxStatus says what the sandbox enforces here, for the start-up
// line ("" when off), with dir the shells' directory, or "" where each
// session has its own.
func sandboxStatus(s sandbox.Policy, dir string) string {
	if !s.On() {
		return ""
	}
	perSession := s.Workspace == "" && dir == ""
	if s.Workspace == "" {
		s.Workspace = dir
	}
	st, err := sandbox.Check(s)
	if err != nil {
		return err.Error()
	}
	if perSession && s.Mode == sandbox.WorkspaceWrite && len(st.Writable) > 1 {
		// sandbox.Check judged the current directory; the fence is each
		// session's own, and so is any warning about it.
		st.Writable[1] = "each session's directory"
		st.Gaps = slices.DeleteFunc(st.Gaps, func(g string) bool {
			return strings.HasPrefix(g, "the home directory") && strings.Contains(g, "(under "+s.Workspace+")")
		})
	}
	return st.String()
}

// escalate returns the tools' Escalate for a surface: nil (refused) with
// deny, or where no one can be asked and the flag does not allow it;
// with allow, a yes; in run on a terminal, a prompt there.
func (f sandboxFlags) escalate(terminal bool) tools.Escalate {
	switch {
	case f.escalation == "deny":
		return nil
	case f.escalation == "allow":
		return func(context.Context, string, string) error { return nil }
	case terminal:
		return askOnTerminal
	}
	return nil
}

// askOnTerminal asks on the controlling terminal (not stdin, which may be
// a prompt or a pipe) whether a command may run outside the sandbox.
func askOnTerminal(ctx context.Context, owner, command string) error {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no terminal to ask the user on (%v)", err)
	}
	who := "The model"
	if owner != "" {
		who = "Sub-agent " + owner
	}
	fmt.Fprintf(tty, "\noffstage: %s asks to run this command OUTSIDE the sandbox:\n%s\nAllow it once? [y/N] ", who, shownCommand(command))
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(tty).ReadString('\n')
		answer <- strings.ToLower(strings.TrimSpace(line))
	}()
	select {
	case a := <-answer:
		tty.Close()
		if a == "y" || a == "yes" {
			return nil
		}
		return errors.New("the user said no")
	case <-ctx.Done():
		tty.Close() // ends the read
		return ctx.Err()
	}
}

// shownCommand is a command as the user is asked about it: every line of
// it, indented, with control and direction characters written out
// (\x1b, \u202e) rather than acted on by the terminal, so that what is
// shown is what runs (an escape sequence could erase the dangerous half
// of a line from the screen). Past maxShown bytes the rest is not shown,
// and the question says how much that is.
func shownCommand(s string) string {
	const maxShown = 4000
	cut := 0
	if len(s) > maxShown {
		cut = len(s) - maxShown
		s = strings.ToValidUTF8(s[:maxShown], "")
	}
	var b strings.Builder
	b.WriteString("  ")
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString("\n  ")
		case r == '\t':
			b.WriteString("    ")
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0, r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0xfeff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	if cut > 0 {
		fmt.Fprintf(&b, "\n  … and %d more bytes not shown here (answering y allows them too)", cut)
	}
	return b.String()
}

// hasTTY says whether this process has a controlling terminal to ask on.
func hasTTY() bool {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	tty.Close()
	return true
}

// escalation is a request to run a command outside the sandbox, put to
// the user in the conversation of offstage run: the next line answers it.
type escalation struct {
	ctx            context.Context
	owner, command string
	reply          chan error // buffered: the answer never blocks
}

func (e escalation) question() string {
	who := "The model"
	if e.owner != "" {
		who = "Sub-agent " + e.owner
	}
	return fmt.Sprintf("offstage: %s asks to run this command OUTSIDE the sandbox:\n%s\nAllow it once? Answer y or n:", who, shownCommand(e.command))
}

func (e escalation) answer(line string) {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		e.reply <- nil
	default:
		e.reply <- errors.New("the user said no")
	}
}

// askInConversation is the Escalate of an interactive offstage run: the
// request goes to the conversation's loop, which asks and reads the
// answer from the input (one reader of the terminal, not two).
func askInConversation(asks chan<- escalation) tools.Escalate {
	return func(ctx context.Context, owner, command string) error {
		e := escalation{ctx: ctx, owner: owner, command: command, reply: make(chan error, 1)}
		select {
		case asks <- e:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-e.reply:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sandboxSupport says, for version -v, what a sandbox would hold on this
// host (workspace-write, the network off), or why it cannot.
func sandboxSupport() string {
	st, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite})
	if err != nil {
		return "sandbox: " + trimProc(err)
	}
	line := "sandbox: available; enforced by " + strings.Join(st.Enforced, ", ")
	if len(st.Gaps) > 0 {
		line += "; not covered: " + strings.Join(st.Gaps, "; ")
	}
	return line
}
