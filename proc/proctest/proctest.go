// Package proctest helps tests of code that runs processes through proc
// see which processes are alive, by a marker of the test's own in their
// environment: a test gives its commands a variable no one else has, and
// asks afterwards which of them outlived what they should not have.
package proctest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Marked returns the pids of the live processes (zombies excluded) whose
// environment holds kv ("NAME=value") as one entry, read from /proc. On
// systems without /proc it returns nil.
func Marked(kv string) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/environ")
	want := []byte("\x00" + kv + "\x00")
	var pids []int
	for _, path := range paths {
		env, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(append([]byte{0}, env...), want) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Alive says whether pid is a process that runs (it exists and is not a
// zombie waiting to be reaped).
func Alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// Group returns the live processes (zombies excluded) of process group
// pgid, as "pid comm" strings, read from /proc. On systems without /proc
// it returns nil.
func Group(pgid int) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		s := string(b)
		// pid (comm) state ppid pgrp …; comm may hold spaces and parens.
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < 0 {
			continue
		}
		fields := strings.Fields(s[closing+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if g, _ := strconv.Atoi(fields[2]); g == pgid {
			out = append(out, strings.TrimSpace(s[:open])+" "+s[open+1:closing])
		}
	}
	return out
}
