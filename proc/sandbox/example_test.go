package sandbox_test

import (
	"fmt"

	"github.com/offstage/offstage/proc/sandbox"
)

// A policy from a flag's value; off is the zero value.
func ExampleParseMode() {
	m, err := sandbox.ParseMode("workspace-write")
	if err != nil {
		panic(err)
	}
	p := sandbox.Policy{Mode: m, Workspace: "/src/app"}
	fmt.Println(p.On(), sandbox.Policy{}.On())
	// Output:
	// true false
}
