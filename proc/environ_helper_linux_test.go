package proc_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/environ"
)

// hideHelper is the child of TestHideWithheldClearsTheEnvironmentBlock
// (Linux; elsewhere HideWithheld does nothing).
func hideHelper(args []string) int {
	if len(args) > 0 && args[0] == "nodump" {
		// As offstage does (proc.Protect): its /proc/self/mem is root's then.
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	names, err := environ.HideWithheld(environ.Policy{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	again, _ := environ.HideWithheld(environ.Policy{})
	fmt.Printf("hidden: %v, again: %v\n", names, again)
	fmt.Println("getenv:", os.Getenv("OPENAI_API_KEY"))
	// Not dumpable, /proc/self/environ is root's: to look, dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		fmt.Println(err)
		return 1
	}
	self, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("self:", strings.ReplaceAll(string(self), "\x00", " "))
	// A command of the host's, unsandboxed, reading its host's block: as
	// the same user it may (as root, whatever the host's protections).
	p, err := proc.Start(context.Background(), proc.Config{Command: `tr '\0' ' ' </proc/$PPID/environ`})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	e, err := p.Wait(context.Background())
	out := p.Read(proc.Combined, 0, 1<<20)
	fmt.Printf("command: %s (exit %v %v)\n", out.Data, e.Code, err)
	return 0
}
