package proc_test

// The helpers behind TestProtectHost (Linux only); helper() names them on
// every system.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
)

// hostSecret is in the environment of the host TestProtectHost starts.
const hostSecret = "HOST_SECRET_FOR_TEST=hunter2-" + "do-not-leak"

// protectedHost is the helper behind TestProtectHost: a host (with
// hostSecret in its environment) that, if protect, calls ProtectHost,
// then runs probe-parent as its command and prints its output.
func protectedHost(protect bool) int {
	if protect {
		if err := environ.ProtectHost(); err != nil {
			fmt.Println("ProtectHost:", err)
			return 1
		}
	}
	env := append(os.Environ(), helperEnv+"=1")
	p, err := proc.Start(context.Background(), proc.Config{Command: helperCommand("probe-parent"), Env: env})
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	exit, _ := p.Wait(context.Background())
	os.Stdout.Write(p.Read(proc.Combined, 0, 1<<20).Data)
	if exit.Err() != nil {
		fmt.Println("probe:", exit.Err())
		return 1
	}
	return 0
}

// probeParent reads its parent's /proc/PID/environ and opens its
// /proc/PID/mem, saying for each "read" (and whether the secret was
// there) or the error.
func probeParent() int {
	dir := "/proc/" + strconv.Itoa(os.Getppid())
	if b, err := os.ReadFile(dir + "/environ"); err != nil {
		fmt.Println("environ:", errors.Unwrap(err))
	} else {
		fmt.Println("environ: read, secret", strings.Contains(string(b), hostSecret))
	}
	if f, err := os.Open(dir + "/mem"); err != nil {
		fmt.Println("mem:", errors.Unwrap(err))
	} else {
		f.Close()
		fmt.Println("mem: opened")
	}
	fmt.Println("own environment has the secret:", strings.Contains(strings.Join(os.Environ(), "\n"), "HOST_SECRET"))
	return 0
}
