package proc

import (
	"fmt"
	"os"
	"strings"

	"github.com/creack/pty"

	"github.com/offstage/offstage/proc/internal/contain"
)

// openTTY opens a pseudo-terminal of the given size: master is ours
// (read for output, written for input), tty the child's.
func openTTY(cols, rows uint16) (master, tty *os.File, err error) {
	master, tty, err = pty.Open()
	if err != nil {
		return nil, nil, fmt.Errorf("proc: open a terminal: %w", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		master.Close()
		tty.Close()
		return nil, nil, fmt.Errorf("proc: size the terminal: %w", err)
	}
	if master, err = contain.Pollable(master); err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("proc: open a terminal: %w", err)
	}
	return master, tty, nil
}

// withTERM sets TERM for our terminal. A TERM inherited from the host
// describes the host's terminal, not this one, and is replaced; one the
// caller put in Config.Env (explicit) is kept.
func withTERM(env []string, explicit bool) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "TERM=") {
			if explicit {
				return env
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "TERM=xterm-256color")
}

// closeAll closes the files that are not nil.
func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}
