package main

import (
	"errors"
	"flag"
	"math"
	"strconv"

	"github.com/offstage/offstage/proc/resource"
)

// limitFlags are --task-memory, --task-pids and --task-cpus, on run, mcp
// and acp: the shells' limits (resource.Limits), over the user's config file.
// Each is nil unless given; 0 sets none, whatever the file says.
type limitFlags struct {
	memory *int64
	pids   *int
	cpus   *float64
}

func (f *limitFlags) register(fs *flag.FlagSet) {
	fs.Func("task-memory", "cap each shell's memory, with everything it starts, at `SIZE` (512M, 2G); the kernel kills what goes past it (default: none; 0: none)", func(s string) error {
		n, err := resource.ParseSize(s)
		if err != nil {
			return errors.New("not a size: give a number of bytes with K, M, G or T, such as 512M or 2G")
		}
		f.memory = &n
		return nil
	})
	fs.Func("task-pids", "cap how many processes each shell may have at once, at `N`; a fork past it fails (default: none; 0: none)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("not a number of processes: give a whole number, such as 256")
		}
		f.pids = &n
		return nil
	})
	fs.Func("task-cpus", "cap each shell's CPU time at `N` CPUs' worth (1.5: one and a half) (default: none; 0: none)", func(s string) error {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
			return errors.New("not a number of CPUs: give one such as 2 or 1.5")
		}
		f.cpus = &n
		return nil
	})
}

// limits returns the shells' limits: the user's config file's (file),
// then the flags; a usage error if they are invalid, or if this host
// cannot enforce them (then offstage does not start: a limit the user
// asked for must not silently not hold).
func (f limitFlags) limits(file resource.Limits) (resource.Limits, error) {
	l := file
	if f.memory != nil {
		l.Memory = *f.memory
	}
	if f.pids != nil {
		l.Pids = *f.pids
	}
	if f.cpus != nil {
		l.CPUs = *f.cpus
	}
	if err := l.Validate(); err != nil {
		return l, usagef("--task-*: %v", trimProc(err))
	}
	// resource.Check validates too; Validate first names the flags for a
	// value wrong anywhere, resource.Check says what this host lacks.
	if err := resource.Check(l); err != nil {
		return l, usagef("cannot limit the shells: %v", trimProc(err))
	}
	return l, nil
}

// trimProc drops the "proc: " that package proc's errors start with.
func trimProc(err error) string {
	s := err.Error()
	if len(s) > 6 && s[:6] == "proc: " {
		return s[6:]
	}
	return s
}
