package tools

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/sandbox"
)

// Escalate asks the user whether command may run once outside the
// sandbox (bash with sandbox: false), on behalf of owner ("" for the
// top-level caller). It returns nil if the user allows it, and otherwise
// an error whose text tells the model why not (a rejection, no one to
// ask). It may block until the user answers or ctx ends.
type Escalate func(ctx context.Context, owner, command string) error

// fenceText says, for the model, what the sandbox of cfg lets commands
// do; "" when it is off. Writable places name the command's own
// temporary directory as $TMPDIR, which is one per command.
func fenceText(s sandbox.Policy, st sandbox.Status) string {
	if !s.On() {
		return ""
	}
	where := make([]string, 0, len(st.Writable))
	for _, w := range st.Writable {
		if strings.HasPrefix(w, "$TMPDIR") {
			w = "$TMPDIR"
		}
		where = append(where, w)
	}
	net := "the network is off (no connections, no DNS; 127.0.0.1 inside a command reaches only what that command started)"
	if s.Network {
		net = "the network is on"
	}
	text := fmt.Sprintf("Commands run in a sandbox (%s): they can read what the user can, but write only under %s; %s.", s.Mode, strings.Join(where, ", "), net)
	if len(st.NotEnforced) > 0 {
		text += " Not enforced on this host: " + strings.Join(st.NotEnforced, "; ") + "."
	}
	return text
}

// refusal matches what a refused write or a cut network prints: EACCES
// and EPERM on a path, and the network errors of a namespace without one.
var (
	deniedLine = regexp.MustCompile(`(?i)permission denied|operation not permitted|read-only file system`)
	pathIn     = regexp.MustCompile(`(?:^|[\s'"‘“(=:])(/[^\s'"’”):]+)`)
	// progPrefix is the program that says it ("/bin/sh: 1: ", "touch: "),
	// not a path it was refused.
	progPrefix  = regexp.MustCompile(`^[^\s:]+: (?:line )?(?:\d+: )?`)
	networkLine = regexp.MustCompile(`(?i)network is unreachable|temporary failure in name resolution|could not resolve|name or service not known|no address associated with hostname|name resolution|getaddrinfo|dial tcp.*(permission denied|network is unreachable)|connect: permission denied|unable to access '\S+':`)
)

// sandboxNote says, for a sandboxed command that failed, that the
// sandbox refused it and how to go on: a path outside its writable
// places, or the network while it is off. "" when its output shows
// neither.
func sandboxNote(st sandbox.Status, output string, escalate bool, advice Advice) string {
	if st.Mode == "" || st.Mode == sandbox.Off {
		return ""
	}
	var outside []string
	var network bool
	for line := range strings.SplitSeq(output, "\n") {
		if !st.Network && networkLine.MatchString(line) {
			network = true
			continue
		}
		if !deniedLine.MatchString(line) {
			continue
		}
		line = progPrefix.ReplaceAllString(line, "")
		for _, m := range pathIn.FindAllStringSubmatch(line, -1) {
			if p := filepath.Clean(m[1]); !writable(st, p) && hostMayWrite(p) && len(outside) < 3 {
				outside = append(outside, p)
			}
		}
	}
	how := "Do not retry it as it is."
	if escalate {
		how += " If the command really needs it, run it again with sandbox: false, which asks the user to let this one command run outside the sandbox; or ask the user to widen the sandbox."
	} else {
		how += " Running outside the sandbox is not allowed here; if the command really needs it, tell the user, who can widen the sandbox" + parens(advice.Widen) + " or turn it off."
	}
	switch {
	case len(outside) > 0:
		return fmt.Sprintf("The sandbox (%s) refused this: %s is outside the places it may write (%s). Write under those instead (temporary files under $TMPDIR). %s",
			st.Mode, strings.Join(outside, ", "), strings.Join(st.Writable, ", "), how)
	case network:
		return fmt.Sprintf("The sandbox (%s) has the network off, so the connection or name lookup failed: nothing outside this command can be reached. %s", st.Mode, how)
	}
	return ""
}

// hostMayWrite says whether offstage itself may write path (or create
// it, in its directory): if not, the user's own permissions refused it,
// not the sandbox.
func hostMayWrite(path string) bool {
	const wOK = 2
	if syscall.Access(path, wOK) == nil {
		return true
	}
	return syscall.Access(filepath.Dir(path), wOK) == nil
}

// writable says whether the sandbox lets path be written.
func writable(st sandbox.Status, path string) bool {
	for _, w := range st.Writable {
		if rel, err := filepath.Rel(w, path); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return true
		}
	}
	for _, d := range []string{"/dev/null", "/dev/tty", "/dev/pts/", "/dev/zero", "/proc/"} {
		if path == strings.TrimSuffix(d, "/") || strings.HasPrefix(path, d) {
			return true // not the fence's doing
		}
	}
	return false
}

// fenceNow says what the Set's sandbox enforces on this host, for the
// model ("" when off). A sandbox that cannot hold is told as such: Start
// refuses each command with the reason.
func (s *Set) fenceNow() string {
	sb := s.cfg.Process.Sandbox
	if !sb.On() {
		return ""
	}
	st, err := sandbox.Check(sb)
	if err != nil {
		return fmt.Sprintf("Commands are to run in a sandbox (%s), but it cannot hold on this host, so every command fails: %v", sb.Mode, err)
	}
	return fenceText(sb, st)
}

// escalationText says whether and how a command may run outside the
// sandbox.
// Advice is what the model is told a user can do about a refusal, in the
// words of the program around the tools: its flags or its settings. The
// library names none of its own; an empty field leaves the advice general
// ("tell the user, who can widen the sandbox").
type Advice struct {
	// Escalation says how the user lets the model run a command outside
	// the sandbox (offstage's: "--sandbox-escalation allow").
	Escalation string
	// Widen says how the user widens the sandbox (offstage's:
	// "--sandbox-write DIR, --sandbox-network on").
	Widen string
	// KeepEnv says how the user lets commands see a variable the
	// environment policy withholds (offstage's: "offstage --env-keep NAME").
	KeepEnv string
}

// parens returns " (s)", or "" for no s.
func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func escalationText(allowed bool) string {
	if allowed {
		return "If a command really needs more, pass `sandbox: false` to ask the user to let that one command run outside the sandbox; never to get around a refusal you can work around."
	}
	return "Running a command outside the sandbox (`sandbox: false`) is not allowed here."
}

// bestEffortNote says what a best-effort sandbox did not enforce for a
// command; "" when it enforced all its mode needs.
func bestEffortNote(st sandbox.Status) string {
	if len(st.NotEnforced) == 0 {
		return ""
	}
	return "its sandbox (" + string(st.Mode) + ", best effort) did not enforce " + strings.Join(st.NotEnforced, "; ")
}

// sandboxOf is p's sandbox; off for no process.
func sandboxOf(p *proc.Process) sandbox.Status {
	if p == nil {
		return sandbox.Status{Mode: sandbox.Off}
	}
	return p.Sandbox()
}
