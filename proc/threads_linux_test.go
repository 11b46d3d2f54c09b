package proc_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
)

// TestManyCommandsFewThreads: waiting for a running command holds no OS
// thread of its own past the first few (issue 35: a thousand running
// commands held a thousand threads, each blocked in waitid); their ends
// are still seen, those that end at once and those stopped later.
func TestManyCommandsFewThreads(t *testing.T) {
	const n = 150
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ps []*proc.Process
	defer func() {
		for _, p := range ps {
			p.Stop(0)
			p.Wait(ctx)
		}
	}()
	for range n {
		p, err := proc.Start(ctx, proc.Config{Command: "sleep 1000"})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	quick := mustStart(t, proc.Config{Command: "exit 3"})
	if e := mustWait(t, quick); e.Code != 3 {
		t.Errorf("a command that ended at once, past the first waits: %+v", e)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) > n/2 {
		t.Errorf("with %d commands running, %d threads", n, len(tasks))
	}
	for _, p := range ps {
		p.Stop(0)
	}
	for _, p := range ps {
		if e, err := p.Wait(ctx); err != nil || e.Signal == 0 {
			t.Fatalf("a stopped command: %+v, %v", e, err)
		}
	}
	ps = nil
}
