//go:build unix && !linux

package proc

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

type sandboxSetup struct {
	status SandboxStatus
	tmp    string
}

func errNoSandbox(s Sandbox) error {
	return errors.New("proc: the " + string(s.Mode) + " sandbox needs Linux (Landlock); on " + runtime.GOOS + " offstage cannot fence a command: run with the sandbox off")
}

func prepareSandbox(cfg Config) (*sandboxSetup, error) {
	if !cfg.Sandbox.On() {
		return nil, nil
	}
	if err := cfg.Sandbox.Validate(); err != nil {
		return nil, err
	}
	return nil, errNoSandbox(cfg.Sandbox)
}

// CheckSandbox says what s enforces on this host: off, or an error.
func CheckSandbox(s Sandbox) (SandboxStatus, error) {
	if !s.On() {
		return SandboxStatus{Mode: SandboxOff}, nil
	}
	if err := s.Validate(); err != nil {
		return SandboxStatus{}, err
	}
	return SandboxStatus{}, errNoSandbox(s)
}

func (sb *sandboxSetup) apply(cmd *exec.Cmd, traced, defaultShell bool) error { return nil }
func (sb *sandboxSetup) start(cmd *exec.Cmd) error                            { return cmd.Start() }
func (sb *sandboxSetup) remove()                                              {}
func (sb *sandboxSetup) terminal(name string)                                 {}
func (sb *sandboxSetup) release(empty bool)                                   {}

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
