package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/offstage/offstage/internal/text"
	"github.com/offstage/offstage/proc/internal/contain"
)

// startError says why cmd.Start failed. The kernel reports a working
// directory that does not exist the way it reports a missing shell
// ("fork/exec /bin/sh: no such file or directory"), so a failure with
// Config.Dir set looks at the directory first.
func startError(cfg Config, err error) error {
	if cfg.Dir != "" {
		st, serr := os.Stat(cfg.Dir)
		var pe *os.PathError
		switch {
		case errors.As(serr, &pe):
			return fmt.Errorf("proc: working directory %s: %w", cfg.Dir, pe.Err)
		case serr == nil && !st.IsDir():
			return fmt.Errorf("proc: working directory %s: %w", cfg.Dir, syscall.ENOTDIR)
		}
	}
	// The command is quoted cut short: one the kernel refused for its
	// length (E2BIG) would be handed back whole.
	if len(cfg.Args) > 0 {
		return fmt.Errorf("proc: start %q: %w", text.Clip(cfg.Args[0], 200), err)
	}
	return fmt.Errorf("proc: start %q: %w", text.Clip(cfg.Command, 200), err)
}

// streams are the descriptors Start makes for a process, as exec.Cmd's
// childStdin/childStdout do: ours, kept, and the child's copies, closed
// once it has them. With Config.TTY, one terminal is the child's stdin,
// stdout and stderr, and its master is both our output and our input.
// Without Config.SeparateStreams, one pipe is the child's stdout and
// stderr.
type streams struct {
	out, err *os.File // read ends of stdout and stderr; err is nil on a terminal and for one pipe
	stdin    *os.File // our end of the child's input; nil without Config.Stdin or TTY
	lifeR    *os.File // the lifeline's read end, the child's
	lifeW    *os.File // the lifeline's write end, ours

	childIn, childOut, childErr *os.File // the child's ends; childIn nil: /dev/null

	ours, child []*os.File     // everything opened, for close and closeChild
	pairs       [2][4]*os.File // ours and child's first backing arrays

	// inline: out and err are not the poller's, for serve (serveInline
	// took a blocking wait for it).
	inline bool
}

// openStreams opens the pipes (or the terminal) and the lifeline for a
// process started with cfg; with inline, the pipes' read ends for serve.
// On error, what it opened is closed.
func openStreams(cfg Config, inline bool) (*streams, error) {
	s := &streams{inline: inline}
	s.ours, s.child = s.pairs[0][:0], s.pairs[1][:0] // four pairs at most
	var err error
	if cfg.TTY {
		var tty *os.File
		if s.out, tty, err = openTTY(cfg.TTYCols, cfg.TTYRows); err != nil {
			return s, err
		}
		s.keep(s.out, tty)
		s.stdin, s.childIn, s.childOut, s.childErr = s.out, tty, tty, tty
	} else {
		if s.out, s.childOut, err = contain.Pipe(!inline, false); err != nil {
			return s, err
		}
		s.keep(s.out, s.childOut)
		// One pipe for both keeps the order they were written in: two
		// pipes read by two goroutines cannot.
		s.childErr = s.childOut
		if cfg.SeparateStreams {
			if s.err, s.childErr, err = contain.Pipe(!inline, false); err != nil {
				return s, err
			}
			s.keep(s.err, s.childErr)
		}
		if cfg.Stdin {
			if s.childIn, s.stdin, err = contain.Pipe(false, true); err != nil {
				return s, err
			}
			s.keep(s.stdin, s.childIn)
		}
	}
	if s.lifeR, s.lifeW, err = contain.Pipe(false, false); err != nil {
		return s, err
	}
	s.keep(s.lifeW, s.lifeR)
	return s, nil
}

// keep records a pair: our end and the child's.
func (s *streams) keep(ours, child *os.File) {
	s.ours, s.child = append(s.ours, ours), append(s.child, child)
}

// attach gives the child its ends. An unset end stays a nil interface,
// which exec.Cmd connects to /dev/null (as does the root fence's own
// fork, in the child: each command has a /dev/null of its own, whose
// flags it cannot change for another).
func (s *streams) attach(cmd *exec.Cmd) {
	if s.childIn != nil {
		cmd.Stdin = s.childIn
	}
	cmd.Stdout, cmd.Stderr = s.childOut, s.childErr
}

// closeChild closes the child's copies once it has started.
func (s *streams) closeChild() {
	for _, f := range s.child {
		f.Close()
	}
	s.child = nil
}

// close closes everything, after a failed start.
func (s *streams) close() {
	s.closeChild()
	for _, f := range s.ours {
		f.Close()
	}
	s.ours = nil
}
