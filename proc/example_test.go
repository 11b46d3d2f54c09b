package proc_test

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/offstage/offstage/proc"
)

// Run a command to its end and read what it wrote.
func Example() {
	ctx := context.Background()
	p, err := proc.Start(ctx, proc.Config{Command: "echo hello; echo oops >&2; exit 3"})
	if err != nil {
		panic(err)
	}
	defer p.Stop(0) // a no-op once it has exited
	exit, err := p.Wait(ctx)
	if err != nil {
		panic(err) // ctx ended before the command did
	}
	fmt.Print(proc.Clean(p.Read(proc.Combined, 0, 0).Data))
	fmt.Println(exit.Code, exit.Err())
	// Output:
	// hello
	// oops
	// 3 exit status 3
}

// Start a server, wait for the line that says it is ready, and stop it
// with everything it started.
func ExampleProcess_WaitLine() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := proc.Start(ctx, proc.Config{Command: "echo starting; sleep 0.1; echo listening on :8080; sleep 300"})
	if err != nil {
		panic(err)
	}
	m, err := p.WaitLine(ctx, 0, regexp.MustCompile(`listening on :(\d+)`))
	if err != nil {
		panic(err)
	}
	fmt.Println("ready:", m.Line)
	p.Stop(time.Second) // SIGTERM to all it started, SIGKILL after a second
	exit, _ := p.Wait(ctx)
	fmt.Println("stopped:", exit.Stopped)
	// Output:
	// ready: listening on :8080
	// stopped: true
}
