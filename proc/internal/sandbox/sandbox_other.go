//go:build unix && !linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// A sandbox needs Landlock and network namespaces, which only Linux has.
// macOS's sandbox-exec could hold a fence, but it is deprecated and this
// project cannot test it: a sandboxed mode is refused rather than
// pretended.

type Setup struct {
	status Status
	tmp    string
}

func errNoSandbox(s Policy) error {
	return errors.New("proc: the " + string(s.Mode) + " sandbox needs Linux (Landlock); on " + runtime.GOOS + " offstage cannot fence a command: run with the sandbox off")
}

// Prepare refuses a sandbox that is on: there is none here.
func Prepare(s Policy, dir string) (*Setup, error) {
	if !s.On() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return nil, errNoSandbox(s)
}

// Check says what s enforces on this host: off, or an error.
func Check(s Policy) (Status, error) {
	if !s.On() {
		return Status{Mode: Off}, nil
	}
	if err := s.Validate(); err != nil {
		return Status{}, err
	}
	return Status{}, errNoSandbox(s)
}

func (sb *Setup) Apply(cmd *exec.Cmd, traced, markOnly, defaultShell bool) error { return nil }

// Open does nothing: there is no gate.
func (sb *Setup) Open() {}

// Forked is false: there is no forker.
func (sb *Setup) Forked() bool              { return false }
func (sb *Setup) Start(cmd *exec.Cmd) error { return cmd.Start() }
func (sb *Setup) Remove()                   {}
func (sb *Setup) Terminal(name string)      {}
func (sb *Setup) Release(empty bool)        {}

// KeepInheritedToSelf marks every descriptor this process holds past
// stdin, stdout and stderr close-on-exec (see the Linux doc).
func KeepInheritedToSelf() {
	entries, err := os.ReadDir("/dev/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}
