package environ

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// HideWithheld overwrites with NUL bytes, in this process's initial
// environment block (the memory /proc/self/environ shows, which another
// process of the same user, or root's commands when the host is root,
// may read), the value of every variable p withholds. The names stay,
// each with an empty value. A program calls it once, after reading its
// configuration: os.Getenv and os.Environ read Go's own copy of the
// environment, made at start-up, so the program's own use of the keys
// (its provider clients) is unchanged, and so is what the policy passes
// to its commands. What it changes: C code's getenv (cgo) reads the block
// itself and finds those values empty, and a process started with the
// environment as the kernel holds it (none of proc's) would not get them.
//
// It returns the names it overwrote. Safe for concurrent use, and to call
// again (it finds nothing more to do).
func HideWithheld(p Policy) ([]string, error) {
	start, end, err := envBounds()
	if err != nil {
		return nil, err
	}
	// process_vm_readv and _writev on itself, not /proc/self/mem: a host
	// that made itself not dumpable (offstage does, to keep its commands
	// out) cannot open its own mem file, which is then root's.
	block := make([]byte, end-start)
	if err := selfMemory(unix.ProcessVMReadv, block, start); err != nil {
		return nil, fmt.Errorf("proc: read the environment block: %w", err)
	}
	var names []string
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		at := off
		off += len(kv) + 1
		name, value, ok := bytes.Cut(kv, []byte{'='})
		if !ok || len(value) == 0 || !p.Withholds(string(name), string(value)) {
			continue
		}
		if err := selfMemory(unix.ProcessVMWritev, make([]byte, len(value)), start+int64(at+len(name)+1)); err != nil {
			return names, fmt.Errorf("proc: overwrite %s in the environment block: %w", name, err)
		}
		names = append(names, string(name))
	}
	return names, nil
}

// selfMemory copies between b and this process's memory at addr, with op
// (process_vm_readv or process_vm_writev).
func selfMemory(op func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error), b []byte, addr int64) error {
	if len(b) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	n, err := op(os.Getpid(), local, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}, 0)
	switch {
	case err != nil:
		return err
	case n != len(b):
		return fmt.Errorf("copied %d bytes of %d", n, len(b))
	}
	return nil
}

// envBounds reads where the initial environment block lies: fields 50
// and 51 of /proc/self/stat, env_start and env_end (Linux 3.5 and later).
func envBounds() (start, end int64, err error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("proc: find the environment block: %w", err)
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 49 {
		return 0, 0, fmt.Errorf("proc: find the environment block: /proc/self/stat has %d fields, want 51", len(f)+2)
	}
	// f[0] is field 3 (the state).
	start, err1 := strconv.ParseInt(string(f[47]), 10, 64)
	end, err2 := strconv.ParseInt(string(f[48]), 10, 64)
	if err1 != nil || err2 != nil || start <= 0 || end < start || end-start > 64<<20 {
		return 0, 0, fmt.Errorf("proc: find the environment block: unexpected bounds %q %q in /proc/self/stat", f[47], f[48])
	}
	return start, end, nil
}
