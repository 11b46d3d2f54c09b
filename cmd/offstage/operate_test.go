package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
)

// counting prints numbered lines, one every 50 ms, until stopped.
const counting = `i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.05; done`

// operated is a fleet under test: the instance that runs the task, and
// the environment a command runs with as if on another machine.
type operated struct {
	owner     *instance
	cs        *mcp.ClientSession
	store     *journal.DB
	elsewhere []string // the journal, another state directory
}

// runningShell starts the counting shell on the owner through MCP and
// returns its SESSION/ID once the journal records it running.
func (o *operated) runningShell(t *testing.T) (string, journal.Task) {
	t.Helper()
	out := bash(t, o.cs, map[string]any{"command": counting, "run_in_background": true})
	deadline := time.Now().Add(20 * time.Second)
	for {
		ts, _ := o.store.Tasks(t.Context(), journal.TaskFilter{State: journal.Running})
		for _, x := range ts {
			if x.ID == out.TaskID && x.LogPath != "" {
				return x.Session + "/" + x.ID, x
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not running in the journal:\n%s", out.TaskID, o.owner.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// follower runs offstage tasks follow and hands its stdout lines over
// as they come.
type follower struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr strings.Builder
	done   chan struct{}
}

func follow(t *testing.T, env []string, args ...string) *follower {
	t.Helper()
	cmd, _ := offstage(t, env, append([]string{"tasks", "follow"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &follower{cmd: cmd, lines: make(chan string, 10000), done: make(chan struct{})}
	cmd.Stderr = &f.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(f.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill(); <-f.done })
	return f
}

// next returns the follower's next line, failing after 10 s.
func (f *follower) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-f.lines:
		if !ok {
			t.Fatalf("offstage tasks follow ended early: %s", f.stderr.String())
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("no line from offstage tasks follow in 10 s")
	}
	return ""
}

// testCancelAndFollow: a follower on another machine prints the owner's
// task's lines in order, live; offstage tasks cancel from a third stops
// the task within 2 s of its request (as the journal records them); the
// owner's MCP client sees it canceled by an operator, with the reason;
// the follower ends with the task; once the owner is killed, following
// says where the log is, and prints it from there.
func testCancelAndFollow(t *testing.T, o *operated, ownerGone func()) {
	name, x := o.runningShell(t)
	f := follow(t, o.elsewhere, name, "--since", "0")
	for i := 1; i <= 5; i++ { // from its start, in order
		if l := f.next(t); l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d followed = %q", i, l)
		}
	}
	// Live: lines the task prints after the follower started.
	var printed int64
	before := countLines(t, x.LogPath)
	for n := 6; ; n++ {
		l := f.next(t)
		if l != fmt.Sprintf("line %d", n) {
			t.Fatalf("line %d followed = %q", n, l)
		}
		if int64(n) > before+3 {
			printed = int64(n)
			break
		}
	}
	cancel, _ := offstage(t, o.elsewhere, "tasks", "cancel", name, "--reason", "runaway test loop")
	out, err := cancel.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "canceled") || !strings.Contains(string(out), "runaway test loop") {
		t.Fatalf("offstage tasks cancel %s: %v\n%s\nowner:\n%s", name, err, out, o.owner.log())
	}
	req, err := o.store.CancelRequest(t.Context(), x.Session, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := o.store.Task(t.Context(), x.Session, x.ID)
	took := done.Finished.Sub(req.Requested)
	t.Logf("canceled %s after its request (handled after %s)", took.Round(time.Millisecond), req.Handled.Sub(req.Requested).Round(time.Millisecond))
	if took > 2*time.Second || done.State != journal.Canceled || !strings.Contains(req.By, "offstage tasks cancel") {
		t.Errorf("the task %s %s after the request by %q, want canceled within 2 s", done.State, took, req.By)
	}
	// The follower ends with the task, having printed every line in order.
	n := printed
	for l := range f.lines {
		n++
		if l != fmt.Sprintf("line %d", n) {
			t.Fatalf("line %d followed = %q", n, l)
		}
	}
	<-f.done
	if strings.Contains(f.stderr.String(), "cannot be reached") {
		t.Errorf("the follower did not reach the owner: %s", f.stderr.String())
	}
	if !strings.Contains(f.stderr.String(), "canceled: stopped by an operator") {
		t.Errorf("the follower's end: %q", f.stderr.String())
	}
	// The owner's model is told who stopped it.
	res, err := o.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "task_wait", Arguments: map[string]any{"task_ids": []string{x.ID}, "timeout_seconds": 10}})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, `"status":"canceled"`) || !strings.Contains(text, "stopped by an operator") || !strings.Contains(text, "runaway test loop") {
		t.Errorf("the owner's client sees: %s", text)
	}
	if !strings.Contains(text, `"ended_by":"operator"`) {
		t.Errorf("the owner's client is not told an operator ended it (issue 38): %s", text)
	}
	// The record says who stopped it, and why.
	show, _ := offstage(t, o.elsewhere, "tasks", "show", name, "--json")
	if out, err := show.Output(); err != nil || !strings.Contains(string(out), `"cancel_request":{"by":"`) || !strings.Contains(string(out), `"reason":"runaway test loop"`) || !strings.Contains(string(out), `"outcome":"canceled"`) ||
		!strings.Contains(string(out), `"ended_by":"operator"`) || !strings.Contains(string(out), `runaway test loop"`) {
		t.Errorf("offstage tasks show: %v\n%s", err, out)
	}
	// Cancelling it again says it ended, and succeeds (issue 37 item 15:
	// it exited 1).
	again, _ := offstage(t, o.elsewhere, "tasks", "cancel", name)
	if out, err := again.CombinedOutput(); err != nil || !strings.Contains(string(out), "had already ended (canceled)") ||
		strings.Contains(string(out), "cannot be used") || strings.Contains(string(out), "--no-journal") {
		t.Errorf("cancelling an ended task: %v\n%s; want it said as it is, not as the journal's trouble", err, out)
	}
	// A reason is bounded as the dashboard bounds it.
	long, _ := offstage(t, o.elsewhere, "tasks", "cancel", name, "--reason", strings.Repeat("r", 501))
	if out, err := long.CombinedOutput(); exitOf(t, err) != 2 || !strings.Contains(string(out), "at most 500") {
		t.Errorf("a 501-byte reason: %v\n%s", err, out)
	}
	// Once the owner is gone, the log is read where it was written.
	ownerGone()
	g := follow(t, o.elsewhere, name, "--lines", "2")
	var got []string
	for l := range g.lines {
		got = append(got, l)
	}
	<-g.done
	if len(got) != 2 || !strings.Contains(g.stderr.String(), "is gone") || !strings.Contains(g.stderr.String(), x.LogPath) {
		t.Errorf("following after the owner died: %q\n%s", got, g.stderr.String())
	}
}

func countLines(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(strings.Count(string(b), "\n"))
}

// TestCancelAndFollowAcrossAFleet: two instances on a PostgreSQL
// journal; the commands run as if from a third machine.
func TestCancelAndFollowAcrossAFleet(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	a := startInstance(t, db, "--lease", "2s")
	startInstance(t, db, "--lease", "2s") // B, which orphans A's work
	o := &operated{owner: a, cs: a.connect(t), store: openFleet(t, db),
		elsewhere: []string{"OFFSTAGE_JOURNAL_URL=" + db, "XDG_STATE_HOME=" + t.TempDir()}}
	testCancelAndFollow(t, o, func() {
		a.cmd.Process.Signal(syscall.SIGKILL)
		a.cmd.Wait()
		// A is gone once its lease runs out.
		ss, _ := o.store.Sessions(t.Context(), 0)
		p, err := o.store.PeerOf(t.Context(), ss[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if wait := time.Until(p.Lease); wait > 0 {
			time.Sleep(wait + 100*time.Millisecond)
		}
	})
}

// TestCancelAndFollowOnOneMachine: the same with the SQLite journal of
// one state directory, which every command shares.
func TestCancelAndFollowOnOneMachine(t *testing.T) {
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state}
	a := startInstanceEnv(t, env)
	cs := a.connect(t)
	store, err := journal.OpenSQLiteReadOnly(filepath.Join(state, "offstage", "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := &operated{owner: a, cs: cs, store: store, elsewhere: env}
	var left journal.Task
	var cut *follower
	testCancelAndFollow(t, o, func() {
		var name string
		name, left = o.runningShell(t)
		cut = follow(t, env, name, "--since", "0")
		cut.next(t) // following through the owner
		a.cmd.Process.Signal(syscall.SIGKILL)
		a.cmd.Wait()
	})
	// The follower cut off from the owner goes on from the log, where it
	// stopped, and ends: the owner is gone.
	n := 1
	for l := range cut.lines {
		n++
		if l != fmt.Sprintf("line %d", n) {
			t.Fatalf("line %d followed = %q\n%s", n, l, cut.stderr.String())
		}
	}
	<-cut.done
	if !strings.Contains(cut.stderr.String(), "is gone") {
		t.Errorf("the follower of a task whose owner died: %s", cut.stderr.String())
	}
	t.Cleanup(func() {
		if journal.Same(left.PID, left.PIDStart) {
			syscall.Kill(-left.PID, syscall.SIGKILL)
		}
	})
	// A task whose offstage is gone cannot be stopped by it, and says so.
	cancel, _ := offstage(t, env, "tasks", "cancel", left.Session+"/"+left.ID)
	if out, err := cancel.CombinedOutput(); err == nil || !strings.Contains(string(out), "the offstage that ran the task is gone") {
		t.Errorf("cancelling a task of a dead offstage: %v\n%s", err, out)
	}
}
