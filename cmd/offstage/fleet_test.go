package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/offstage/offstage/internal/pgtest"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/tools"
)

// instance is one offstage mcp --http of a fleet.
type instance struct {
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	stderr strings.Builder
	done   chan struct{}
}

func (in *instance) log() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stderr.String()
}

const fleetToken = "fleet-test-token"

// startInstance runs offstage mcp --http on a free port with the journal.
func startInstance(t *testing.T, dbURL string, args ...string) *instance {
	t.Helper()
	return startInstanceEnv(t, []string{"OFFSTAGE_JOURNAL_URL=" + dbURL}, args...)
}

// startInstanceEnv runs offstage mcp --http on a free port with env.
func startInstanceEnv(t *testing.T, env []string, args ...string) *instance {
	t.Helper()
	cmd, _ := offstage(t, append([]string{"OFFSTAGE_MCP_TOKEN=" + fleetToken}, env...),
		append([]string{"mcp", "--http", "127.0.0.1:0"}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		defer close(in.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			in.mu.Lock()
			in.stderr.WriteString(line + "\n")
			in.mu.Unlock()
			if addr, ok := strings.CutPrefix(line, "offstage mcp: listening on "); ok {
				listening <- addr
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		<-in.done
	})
	select {
	case in.url = <-listening:
	case <-in.done:
		t.Fatalf("offstage mcp exited:\n%s", in.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("offstage mcp did not listen:\n%s", in.log())
	}
	return in
}

type bearer struct{}

func (bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+fleetToken)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session on an instance.
func (in *instance) connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	transport := &mcp.StreamableClientTransport{Endpoint: in.url, HTTPClient: &http.Client{Transport: bearer{}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fleet-test"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\n%s", in.url, err, in.log())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func bash(t *testing.T, cs *mcp.ClientSession, args map[string]any) tools.BashOutput {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "bash", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("bash %v = %+v, %v", args, res, err)
	}
	var out tools.BashOutput
	json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &out)
	return out
}

func openFleet(t *testing.T, url string) *journal.DB {
	t.Helper()
	s, err := journal.OpenPostgres(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAFleetOrphansADeadInstanceOnce: three offstage mcp --http share a
// PostgreSQL journal; one is SIGKILLed with tasks running; within its
// lease one of the others marks its tasks orphaned, exactly once, and
// both keep serving.
func TestAFleetOrphansADeadInstanceOnce(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	const lease = 3 * time.Second
	var fleet []*instance
	var sessions []*mcp.ClientSession
	for range 3 {
		in := startInstance(t, db, "--lease", lease.String())
		fleet = append(fleet, in)
		cs := in.connect(t)
		sessions = append(sessions, cs)
		for range 2 {
			bash(t, cs, map[string]any{"command": "sleep 100", "run_in_background": true})
		}
	}
	s := openFleet(t, db)
	deadline := time.Now().Add(20 * time.Second)
	for {
		running, _ := s.Tasks(t.Context(), journal.TaskFilter{State: "running"})
		if len(running) == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks running in the journal, want 6", len(running))
		}
		time.Sleep(50 * time.Millisecond)
	}
	killed := time.Now()
	fleet[0].cmd.Process.Signal(syscall.SIGKILL)
	// Wait for the orphaning itself, up to ten leases: how soon it comes
	// (within the lease and a renewal, lease/6, on an idle machine) is
	// logged, not asserted; a 5 s bound failed under -race on a busy one.
	var orphaned []journal.Task
	for time.Since(killed) < 10*lease {
		orphaned, _ = s.Tasks(t.Context(), journal.TaskFilter{State: journal.Orphaned})
		if len(orphaned) == 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(killed)
	if len(orphaned) != 2 {
		t.Fatalf("%d tasks orphaned %s after the SIGKILL, want the dead instance's 2", len(orphaned), took)
	}
	t.Logf("the dead instance's tasks were orphaned %s after its SIGKILL (lease %s)", took.Round(10*time.Millisecond), lease)
	for _, o := range orphaned {
		if n := countEvents(t, s, o, "orphaned"); n != 1 {
			t.Errorf("%s/%s orphaned %d times", o.Session, o.ID, n)
		}
	}
	// The instance that orphaned them says so once it has committed: a
	// moment after the journal shows it (a run under load read the log first).
	said := 0
	for wait := time.Now().Add(10 * time.Second); said == 0 && time.Now().Before(wait); time.Sleep(50 * time.Millisecond) {
		said = 0
		for _, in := range fleet[1:] {
			said += strings.Count(in.log(), "tasks of an offstage that is gone marked orphaned")
		}
	}
	if said != 1 {
		t.Errorf("%d instances say they orphaned the tasks, want 1:\n%s\n%s", said, fleet[1].log(), fleet[2].log())
	}
	// The others keep serving.
	for i, cs := range sessions[1:] {
		out := bash(t, cs, map[string]any{"command": fmt.Sprintf("echo still serving %d", i)})
		if out.Status != "completed" || !strings.Contains(out.Output, "still serving") {
			t.Errorf("instance %d after the SIGKILL: %+v", i+1, out)
		}
	}
	// offstage tasks shows the whole fleet with its instances.
	cmd, _ := offstage(t, []string{"OFFSTAGE_JOURNAL_URL=" + db}, "tasks", "--json", "--state", "orphaned")
	out, err := cmd.Output()
	if err != nil || strings.Count(string(out), "\n") != 2 || !strings.Contains(string(out), `"host":`) {
		t.Errorf("offstage tasks --state orphaned: %v\n%s", err, out)
	}
}

// TestTheDatabaseGoingAwayLosesNothing: PostgreSQL stops for 10 s under a
// running instance: the session goes on, the instance says so once, and
// when the database returns the journal catches up, in order, with
// nothing lost and nothing twice.
func TestTheDatabaseGoingAwayLosesNothing(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	in := startInstance(t, db)
	cs := in.connect(t)
	bash(t, cs, map[string]any{"command": "echo before"})
	srv.Stop()
	start := time.Now()
	var during []string
	for i := 0; time.Since(start) < 10*time.Second; i++ {
		out := bash(t, cs, map[string]any{"command": fmt.Sprintf("echo during %d", i)})
		if out.Status != "completed" {
			t.Fatalf("a command while the database is down: %+v", out)
		}
		during = append(during, out.TaskID)
		time.Sleep(500 * time.Millisecond)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	bash(t, cs, map[string]any{"command": "echo after"})
	s := openFleet(t, db)
	want := len(during) + 2
	deadline := time.Now().Add(30 * time.Second)
	var tasks []journal.Task
	for time.Now().Before(deadline) {
		tasks, _ = s.Tasks(t.Context(), journal.TaskFilter{State: "completed"})
		if len(tasks) >= want {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(tasks) != want {
		t.Fatalf("%d completed tasks in the journal, want %d:\n%s", len(tasks), want, in.log())
	}
	for _, x := range tasks {
		for _, ev := range []string{"spawned", "started", "finished", "delivered"} {
			if n := countEvents(t, s, x, ev); n != 1 {
				t.Errorf("%s %s recorded %d times", x.ID, ev, n)
			}
		}
	}
	log := in.log()
	if strings.Count(log, "the journal cannot write") != 1 || !strings.Contains(log, "the journal writes again; 0 records were dropped") {
		t.Errorf("the instance's reports:\n%s", log)
	}
	if strings.Contains(log, "offstage@") && strings.Contains(log, "password") {
		t.Errorf("credentials in the log:\n%s", log)
	}
}

func countEvents(t *testing.T, s *journal.DB, x journal.Task, event string) int {
	t.Helper()
	evs, err := s.TaskEvents(t.Context(), x.Session, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Event == event {
			n++
		}
	}
	return n
}

// TestJournalCredentialsStayOut: the shared journal's URL and password
// reach neither a shell's environment nor the instance's log.
func TestJournalCredentialsStayOut(t *testing.T) {
	srv := pgtest.Start(t)
	db := strings.Replace(srv.NewDatabase(t), "offstage@", "offstage:s3cret-pw@", 1) // trust auth takes any password
	in := startInstance(t, db)
	cs := in.connect(t)
	out := bash(t, cs, map[string]any{"command": "env"})
	if strings.Contains(out.Output, "s3cret-pw") || strings.Contains(out.Output, "OFFSTAGE_JOURNAL_URL") {
		t.Errorf("a shell sees the journal's credentials:\n%s", out.Output)
	}
	cs.Close()
	in.cmd.Process.Signal(syscall.SIGTERM)
	in.cmd.Wait()
	<-in.done
	if strings.Contains(in.log(), "s3cret-pw") {
		t.Errorf("the log has the password:\n%s", in.log())
	}
	// A bad address is reported without the password either.
	bad := strings.Replace(db, ":"+srv.Port()+"/", ":1/", 1) // nothing listens on port 1
	cmd, _ := offstage(t, []string{"OFFSTAGE_JOURNAL_URL=" + bad}, "tasks")
	msg, _ := cmd.CombinedOutput()
	if strings.Contains(string(msg), "s3cret-pw") || !strings.Contains(string(msg), "cannot be reached") {
		t.Errorf("a bad address: %s", msg)
	}
}
