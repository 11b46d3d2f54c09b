package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc/sandbox"
)

// serveState is a fresh state directory with a short path: the socket's
// path must fit sun_path (108 bytes), and t.TempDir's names do not.
func serveState(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "osv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// served is a running offstage serve for a test.
type served struct {
	cmd    *exec.Cmd
	mark   string
	state  string
	stderr *syncBuffer
	exited chan struct{} // closed when it has exited
}

// startServe starts offstage serve on state and waits until its socket
// answers. It is stopped (SIGTERM) at the end of the test if still up.
func startServe(t *testing.T, state string, args ...string) *served {
	t.Helper()
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, append([]string{"serve"}, args...)...)
	sv := &served{cmd: cmd, mark: mark, state: state, stderr: new(syncBuffer), exited: make(chan struct{})}
	cmd.Stderr = sv.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(sv.exited) }()
	t.Cleanup(func() {
		select {
		case <-sv.exited:
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			<-sv.exited
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := sv.ping(); err == nil {
			return sv
		}
		select {
		case <-sv.exited:
			t.Fatalf("offstage serve exited: %v\n%s", cmd.ProcessState, sv.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("offstage serve does not answer:\n%s", sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ask sends a header with face and decodes the one answer into v.
func (sv *served) ask(face string, v any) error {
	c, err := net.Dial("unix", socketPath(filepath.Join(sv.state, "offstage")))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(serveHeader{Face: face}); err != nil {
		return err
	}
	return json.NewDecoder(bufio.NewReader(c)).Decode(v)
}

func (sv *served) ping() (int, error) {
	var p struct{ PID int }
	err := sv.ask("ping", &p)
	return p.PID, err
}

// live is what the supervisor hosts now.
func (sv *served) live(t *testing.T) liveState {
	t.Helper()
	var st liveState
	if err := sv.ask("tasks", &st); err != nil {
		t.Fatalf("asking offstage serve for its sessions: %v", err)
	}
	return st
}

// liveACP is how many ACP sessions the supervisor keeps.
func (sv *served) liveACP(t *testing.T) int {
	t.Helper()
	return sv.live(t).ACP
}

// stop stops offstage serve with offstage serve stop, and waits for it.
func (sv *served) stop(t *testing.T) {
	t.Helper()
	if _, errOut, code, _ := runIn(t, sv.state, nil, "serve", "stop"); code != 0 {
		t.Fatalf("offstage serve stop: exit %d: %s", code, errOut)
	}
	sv.wait(t)
}

// wait waits for offstage serve to exit, at most 60 s.
func (sv *served) wait(t *testing.T) {
	t.Helper()
	select {
	case <-sv.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("offstage serve did not stop:\n%s", sv.stderr.String())
	}
}

// runIn runs offstage with args on state, stdin from in, and returns its
// output, stderr and exit code.
func runIn(t *testing.T, state string, in io.Reader, args ...string) (stdout, stderr string, code int, mark string) {
	t.Helper()
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), exitOf(t, err), mark
}

// journalTasks is offstage tasks --json on state: one record a line.
func journalTasks(t *testing.T, state string) []map[string]any {
	t.Helper()
	out, errOut, code, _ := runIn(t, state, nil, "tasks", "--json")
	if code != 0 {
		t.Fatalf("offstage tasks: exit %d: %s", code, errOut)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("offstage tasks --json line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// waitTask polls the journal until the task's record satisfies ok.
func waitTask(t *testing.T, state, id string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, r := range journalTasks(t, state) {
			if r["task_id"] == id && ok(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached the state wanted: %v", id, journalTasks(t, state))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServedOneShotRunLeavesItsShellAndAttachDeliversItOnce: a one-shot
// run served by offstage serve starts a background shell and exits; the
// shell goes on in the supervisor; run --attach receives its result in
// one turn, and a second attach does not get it again (issue 38 items
// 2, 3, 6).
func TestServedOneShotRunLeavesItsShellAndAttachDeliversItOnce(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	gate := filepath.Join(t.TempDir(), "go")
	start := `{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e ` + gate + ` ]; do sleep 0.05; done; echo shell-finished", "run_in_background": true}}]},
		{"text": "started it"}`
	first := writeScript(t, `{"turns": [`+start+`]}`)
	_, errOut, code, mark := runIn(t, state, nil, "run", "--wait", "0", "--script", first, "start it")
	if code != 0 {
		t.Fatalf("the one-shot run: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"is hosted by offstage serve", "detached from session", "its work goes on under offstage serve (1 running task)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the one-shot run does not say %q:\n%s", want, errOut)
		}
	}
	waitSurvivors(t, mark, 1) // the run exited; its shell runs in the supervisor
	if st := sv.live(t); len(st.Sessions) != 1 || st.Sessions[0].Attached || len(st.Sessions[0].Tasks) != 1 || st.Sessions[0].Tasks[0].State.Finished() {
		t.Errorf("offstage serve hosts %+v; want one session, no client, shell:1 running", st)
	}
	os.WriteFile(gate, nil, 0o644)
	waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] == "completed" })

	second := writeScript(t, `{"turns": [`+start+`, {"expect": "shell-finished", "text": "the shell said shell-finished"}]}`)
	out, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach", "--script", second)
	if code != 0 {
		t.Fatalf("run --attach: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"attached to session", "finished meanwhile: shell:1 completed", "background results joined the conversation: shell:1", "the shell said shell-finished", "detached from session"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --attach does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "shell:1 started") {
		t.Errorf("run --attach replays the task log from its start; want only what happened meanwhile, in a few lines:\n%s", out)
	}
	out, errOut, code, _ = runIn(t, state, strings.NewReader(""), "run", "--attach", "--script", second)
	if code != 0 || strings.Contains(out, "joined the conversation") || strings.Contains(out, "autonomous turn") {
		t.Errorf("a second attach: exit %d; want no result and no turn (delivered once):\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "meanwhile the model answered") { // an outsider's finding
		t.Errorf("a second attach tells as news the answer the first one showed:\n%s", out)
	}
	if r := waitTask(t, state, "shell:1", func(map[string]any) bool { return true }); r["delivered"] != true {
		t.Errorf("shell:1 is not recorded delivered: %v", r)
	}
	sv.stop(t)
	if _, err := os.Lstat(socketPath(filepath.Join(state, "offstage"))); !os.IsNotExist(err) {
		t.Errorf("the socket is left after stop: %v", err)
	}
	noSurvivors(t, mark)
}

// TestSIGKILLOfAnAttachedRunLeavesItsWorkAndStopEndsIt: a conversation
// served by offstage serve starts a shell; SIGKILL of the run detaches
// (the shell goes on, the next attach finds it running); SIGTERM to the
// supervisor ends it with ended_by supervisor and reaps it (items 2, 5).
func TestSIGKILLOfAnAttachedRunLeavesItsWorkAndStopEndsIt(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 300", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "start it\n")
	waitOutput(t, &out, "started it")
	waitSurvivors(t, mark, 1)
	// offstage sessions close does not pull the session from under the
	// attached run; /quit there ends it.
	if _, errOut, code, _ := runIn(t, state, nil, "sessions", "close", sv.live(t).Sessions[0].ID); code != 2 || !strings.Contains(errOut, "has an offstage run attached: /quit in it ends the session") {
		t.Errorf("sessions close of a session with a run attached: exit %d: %s", code, errOut)
	}
	cmd.Process.Kill()
	cmd.Wait()
	in.Close()

	// The session detaches when the supervisor sees the client gone.
	var attached string
	deadline := time.Now().Add(20 * time.Second)
	for {
		o, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach")
		if code == 0 {
			attached = o
			break
		}
		if !strings.Contains(errOut, "has a client already") || time.Now().After(deadline) {
			t.Fatalf("run --attach after the SIGKILL: exit %d: %s%s", code, o, errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(attached, "still running: shell:1") {
		t.Errorf("run --attach does not find shell:1 running:\n%s", attached)
	}
	if len(survivors(t, mark)) == 0 {
		t.Errorf("the shell died with the attached run")
	}
	// offstage tasks asks the supervisor for its live sessions (item 3).
	_, errOut, code, _ := runIn(t, state, nil, "tasks")
	if want := "hosts 1 live session.\n  "; code != 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "no client for") || !strings.Contains(errOut, "running: shell:1 running") {
		t.Errorf("offstage tasks with offstage serve running: exit %d; want %q, no client, shell:1 running:\n%s", code, want, errOut)
	}
	cmd.Process.Signal(syscall.SIGTERM) // already dead: harmless
	sv.cmd.Process.Signal(syscall.SIGTERM)
	sv.wait(t)
	noSurvivors(t, mark)
	r := waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] != "running" })
	if r["ended_by"] != "supervisor" || !strings.Contains(r["end_reason"].(string), "offstage serve was stopped") {
		t.Errorf("shell:1 after SIGTERM to offstage serve: ended_by %v, end_reason %q; want supervisor", r["ended_by"], r["end_reason"])
	}
	if !strings.Contains(sv.stderr.String(), "stopped: 1 session closed") {
		t.Errorf("offstage serve's last words: %s", sv.stderr.String())
	}
}

// TestASIGKILLedSupervisorsWorkIsOrphaned: the keeper kills the work of a
// supervisor that is SIGKILLed, and the next one to start marks it
// orphaned, ended_by host (item 5).
func TestASIGKILLedSupervisorsWorkIsOrphaned(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 300", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	_, errOut, code, mark := runIn(t, state, nil, "run", "--wait", "0", "--script", script, "go")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	waitSurvivors(t, mark, 1)
	sv.cmd.Process.Kill()
	sv.wait(t)
	noSurvivors(t, mark)
	sv = startServe(t, state)
	r := waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] != "running" })
	if r["ended_by"] != "host" {
		t.Errorf("shell:1 of a SIGKILLed supervisor: ended_by %v (%v); want host", r["ended_by"], r["end_reason"])
	}
	if _, _, code, _ := runIn(t, state, nil, "serve", "stop"); code != 0 {
		t.Errorf("serve stop: exit %d", code)
	}
	sv.wait(t)
}

// TestOneSupervisorPerStateDirectory: a second offstage serve on the same
// state directory refuses to start, naming the first.
func TestOneSupervisorPerStateDirectory(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	_, errOut, code, _ := runIn(t, state, nil, "serve")
	if code != 2 || !strings.Contains(errOut, "offstage serve already runs") || !strings.Contains(errOut, "pid "+strconv.Itoa(sv.cmd.Process.Pid)) {
		t.Errorf("a second offstage serve: exit %d: %s", code, errOut)
	}
	st, err := os.Stat(filepath.Join(state, "offstage", "run", "serve.sock"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("the socket: %v, %v; want mode 0600", st.Mode(), err)
	}
}

// TestServeSaysWhatIsInTheSocketsPlace: a directory with files where the
// socket goes was reported as "address already in use" (outsider 16), as
// if a supervisor ran there.
func TestServeSaysWhatIsInTheSocketsPlace(t *testing.T) {
	state := serveState(t)
	if err := os.MkdirAll(filepath.Join(state, "offstage", "run", "serve.sock", "kept"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, errOut, code, _ := runIn(t, state, nil, "serve")
	if code != 2 || !strings.Contains(errOut, "a directory is in the socket's place and cannot be removed") || strings.Contains(errOut, "in use") {
		t.Errorf("offstage serve with a directory as its socket: exit %d: %s", code, errOut)
	}
}

// TestServeAdvisesNoNoJournal: a journal serve cannot open was met with
// the advice to pass --no-journal, which serve refuses; a run in its own
// process is still given it.
func TestServeAdvisesNoNoJournal(t *testing.T) {
	state := serveState(t)
	dir := filepath.Join(state, "offstage")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "journal.db"), bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code, _ := runIn(t, state, nil, "serve")
	if code != 2 || !strings.Contains(errOut, "is damaged") || strings.Contains(errOut, "--no-journal") {
		t.Errorf("offstage serve on a damaged journal: exit %d: %s; want it said, without --no-journal", code, errOut)
	}
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"turns": [{"text": "hi"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code, _ = runIn(t, state, strings.NewReader(""), "run", "--no-serve", "--script", script)
	if code != 2 || !strings.Contains(errOut, "is damaged") || !strings.Contains(errOut, "--no-journal") {
		t.Errorf("offstage run --no-serve on a damaged journal: exit %d: %s; want --no-journal among the ways out", code, errOut)
	}
	// A directory others can write to names --state-dir once, not twice
	// (outsider 17).
	loose := filepath.Join(t.TempDir(), "loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	_, errOut, code, _ = runIn(t, state, strings.NewReader(""), "run", "--no-serve", "--state-dir", loose, "--script", script)
	if code != 2 || !strings.Contains(errOut, "writable by its group and others") || strings.Count(errOut, "--state-dir DIR") != 1 {
		t.Errorf("offstage run --no-serve in a directory others can write to: exit %d: %s; want --state-dir advised once", code, errOut)
	}
}

// TestNoServeKeepsTheSessionInTheRun: --no-serve hosts the session in the
// run's own process, which ends its work when it exits.
func TestNoServeKeepsTheSessionInTheRun(t *testing.T) {
	state := serveState(t)
	startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 300", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	_, errOut, _, mark := runIn(t, state, nil, "run", "--no-serve", "--wait", "0", "--script", script, "go")
	if strings.Contains(errOut, "offstage serve") || !strings.Contains(errOut, "cancelled, and every process reaped") {
		t.Errorf("run --no-serve with a supervisor running:\n%s", errOut)
	}
	noSurvivors(t, mark)
}

// waitOutput waits until out holds want.
func waitOutput(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeRefusesAnotherUser: with the socket's directory and mode
// opened to everyone, a connection from another uid is still refused
// (SO_PEERCRED), and the supervisor says so.
func TestServeRefusesAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("OFFSTAGE_REQUIRE_ROOT") != "" {
			t.Fatal("OFFSTAGE_REQUIRE_ROOT is set, but the test does not run as root")
		}
		t.Skip("needs root, to connect as another user")
	}
	state := serveState(t)
	sv := startServe(t, state)
	run := filepath.Join(state, "offstage", "run")
	for _, d := range []string{state, filepath.Dir(run), run} {
		os.Chmod(d, 0o755)
	}
	os.Chmod(socketPath(filepath.Join(state, "offstage")), 0o666)
	// The test binary, where the other user may run it.
	binDir, err := os.MkdirTemp("", "osvbin")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "offstage")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, `{"turns": [{"text": "hi"}]}`)
	os.Chmod(filepath.Dir(script), 0o755)
	cmd := exec.Command(bin, "run", "--script", script, "hello")
	cmd.Env = []string{asMainEnv + "=1", "XDG_STATE_HOME=" + state, "HOME=" + binDir, "PATH=/usr/bin:/bin"}
	cmd.Dir = binDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if exitOf(t, err) == 0 || !strings.Contains(string(out), "offstage serve closed the connection") {
		t.Errorf("a run as uid 65534: %v; want it refused:\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(sv.stderr.String(), "refused a connection from uid 65534") {
		if time.Now().After(deadline) {
			t.Fatalf("offstage serve does not say it refused uid 65534:\n%s", sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPrintUnit: the systemd --user unit runs this offstage's serve with
// the flags given, and stops it by SIGTERM to it alone. A % or $ in them
// is doubled, as systemd reads them as specifiers and variables (an
// outsider's finding).
func TestPrintUnit(t *testing.T) {
	out, errOut, code, _ := runIn(t, serveState(t), nil, "serve", "--print-unit", "--idle", "2h", "--state-dir", "/srv/100%h$HOME")
	if code != 0 {
		t.Fatalf("serve --print-unit: exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"serve" "--idle" "2h" "--state-dir" "/srv/100%%h$$HOME"`, "KillMode=mixed", "TimeoutStopSec=30", "WantedBy=default.target"} {
		if !strings.Contains(out, want) {
			t.Errorf("the unit has no %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "print-unit") {
		t.Errorf("the unit's command prints a unit:\n%s", out)
	}
	// The state directory this shell's XDG_STATE_HOME chose is named in
	// the unit, whose environment has its own (an outsider's unit served
	// another directory than its clients looked in).
	state := serveState(t)
	if out, errOut, code, _ := runIn(t, state, nil, "serve", "--print-unit"); code != 0 || !strings.Contains(out, `"serve" "--state-dir" "`+filepath.Join(state, "offstage")+`"`) {
		t.Errorf("serve --print-unit under XDG_STATE_HOME=%s: exit %d: %s%s", state, code, out, errOut)
	}
	// --no-journal, which serve refuses, saying why, is not offered.
	help, _, _, _ := runIn(t, serveState(t), nil, "serve", "--help")
	if strings.Contains(help, "no-journal") || !strings.Contains(help, "--state-dir") {
		t.Errorf("offstage serve --help offers --no-journal, or not --state-dir:\n%s", help)
	}
	if _, errOut, code, _ := runIn(t, serveState(t), nil, "serve", "--no-journal"); code != 2 || !strings.Contains(errOut, "offstage serve records what its sessions run") {
		t.Errorf("offstage serve --no-journal: exit %d: %s", code, errOut)
	}
}

// TestACPSessionOutlivesTheEditorUnderServe: offstage acp relays to
// offstage serve; the TypeScript ACP SDK client starts a background shell
// and quits without closing the session; the shell goes on; a new client
// lists the session and session/load attaches to it, live: its
// conversation replayed, and the result its model has not seen delivered
// once, by the next prompt's turn (issue 38 items 3, 6).
func TestACPSessionOutlivesTheEditorUnderServe(t *testing.T) {
	node := nodeBinary(t, "the TypeScript ACP SDK peer test")
	dir := nodePeer(t, "@agentclientprotocol/sdk")
	state := serveState(t)
	sv := startServe(t, state)
	gate := filepath.Join(t.TempDir(), "go")
	script := writeScript(t, `{"turns": [
		{"text": "Starting it.", "tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e `+gate+` ]; do sleep 0.05; done; echo shell-finished", "run_in_background": true}}]},
		{"text": "It runs in the background."},
		{"expect": "shell-finished", "text": "The shell said shell-finished."}
	]}`)
	cwd := t.TempDir()
	quit, mark := offstage(t, []string{"XDG_STATE_HOME=" + state})
	quit.Path, quit.Args = node, []string{node, filepath.Join(dir, "acp-quit.mjs"), cwd, "start it", os.Args[0], "acp", "--script", script, "--yolo"}
	var stdout, stderr bytes.Buffer
	quit.Stdout, quit.Stderr = &stdout, &stderr
	if err := quit.Run(); err != nil {
		t.Fatalf("the first node client failed: %v\n%s", err, stderr.String())
	}
	var first struct{ SessionID, StopReason string }
	if err := json.Unmarshal(stdout.Bytes(), &first); err != nil || first.StopReason != "end_turn" {
		t.Fatalf("the first client printed %q (%v)\n%s", stdout.String(), err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "hosted by offstage serve") {
		t.Errorf("offstage acp does not say it relays to offstage serve:\n%s", stderr.String())
	}
	waitSurvivors(t, mark, 1) // the editor quit; the shell goes on
	os.WriteFile(gate, nil, 0o644)
	waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] == "completed" })

	load, mark2 := offstage(t, []string{"XDG_STATE_HOME=" + state})
	load.Path, load.Args = node, []string{node, filepath.Join(dir, "acp-load.mjs"), cwd, os.Args[0], "acp", "--script", script, "--yolo"}
	stdout.Reset()
	stderr.Reset()
	load.Stdout, load.Stderr = &stdout, &stderr
	if err := load.Run(); err != nil {
		t.Fatalf("the second node client failed: %v\n%s", err, stderr.String())
	}
	var loaded struct {
		Listed     []struct{ SessionID string }
		Replayed   int
		StopReason string
		Updates    []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &loaded); err != nil {
		t.Fatalf("node printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	if len(loaded.Listed) != 1 || loaded.Listed[0].SessionID != first.SessionID {
		t.Fatalf("listed %+v; want %s", loaded.Listed, first.SessionID)
	}
	replay := strings.Join(loaded.Updates[:loaded.Replayed], "\n")
	for _, want := range []string{"user start it", "message Starting it.", "message It runs in the background."} {
		if !strings.Contains(replay, want) {
			t.Errorf("the replay of the live session lacks %q:\n%s", want, replay)
		}
	}
	said := "" // the answer, streamed in chunks
	for _, u := range loaded.Updates[loaded.Replayed:] {
		if text, ok := strings.CutPrefix(u, "message "); ok {
			said += text
		}
	}
	if loaded.StopReason != "end_turn" || !strings.Contains(said, "The shell said shell-finished.") {
		t.Errorf("the prompt on the attached session: %s, said %q\n%s", loaded.StopReason, said, strings.Join(loaded.Updates[loaded.Replayed:], "\n"))
	}
	if r := waitTask(t, state, "shell:1", func(map[string]any) bool { return true }); r["delivered"] != true {
		t.Errorf("shell:1 is not recorded delivered: %v", r)
	}
	// The second client closed the session: the supervisor holds none.
	deadline := time.Now().Add(10 * time.Second)
	for sv.liveACP(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("offstage serve still holds the closed ACP session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, _, code, _ := runIn(t, state, nil, "serve", "stop"); code != 0 {
		t.Errorf("serve stop: exit %d", code)
	}
	sv.wait(t)
	noSurvivors(t, mark)
	noSurvivors(t, mark2)
}

// TestStoppingServeEndsADetachedACPSessionsWork: the work of an ACP
// session whose editor quit ends with ended_by supervisor when offstage
// serve is stopped, every process reaped (item 5).
func TestStoppingServeEndsADetachedACPSessionsWork(t *testing.T) {
	node := nodeBinary(t, "the TypeScript ACP SDK peer test")
	dir := nodePeer(t, "@agentclientprotocol/sdk")
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 300", "run_in_background": true}}]},
		{"text": "It runs in the background."}]}`)
	quit, mark := offstage(t, []string{"XDG_STATE_HOME=" + state})
	quit.Path, quit.Args = node, []string{node, filepath.Join(dir, "acp-quit.mjs"), t.TempDir(), "start it", os.Args[0], "acp", "--script", script, "--yolo"}
	if out, err := quit.CombinedOutput(); err != nil {
		t.Fatalf("the node client failed: %v\n%s", err, out)
	}
	waitSurvivors(t, mark, 1)
	if n := sv.liveACP(t); n != 1 {
		t.Errorf("offstage serve keeps %d ACP sessions; want the detached one", n)
	}
	sv.cmd.Process.Signal(syscall.SIGTERM)
	sv.wait(t)
	noSurvivors(t, mark)
	r := waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] != "running" })
	if r["ended_by"] != "supervisor" {
		t.Errorf("shell:1 of a detached ACP session after SIGTERM to offstage serve: ended_by %v (%v); want supervisor", r["ended_by"], r["end_reason"])
	}
}

// TestOneShotThatDetachesPrintsItsAnswer (an outsider's finding): a
// one-shot run whose work outlasts --wait detaches under offstage serve;
// its answer still goes to stdout, as in process, for a script's
// answer=$(offstage run --wait 0 ...).
func TestOneShotThatDetachesPrintsItsAnswer(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	defer sv.stop(t)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 30", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	out, errOut, code, _ := runIn(t, state, nil, "run", "--wait", "0", "--script", script, "go")
	if code != 0 || !strings.Contains(errOut, "detached from session") || strings.TrimSpace(out) != "started it" {
		t.Errorf("run: exit %d, stdout %q:\n%s", code, out, errOut)
	}
}

// TestIdleSessionClosesUnderServe: a detached session whose work has
// ended closes after --idle, as a real supervisor runs it; the session's
// end is recorded and the supervisor says why (the idle policy's clock
// itself: TestIdlePolicyClosesOnlySessionsWithNoClientAndNoWork).
func TestIdleSessionClosesUnderServe(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state, "--idle", "1s")
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 0.5", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	_, errOut, code, _ := runIn(t, state, nil, "run", "--wait", "0", "--script", script, "go")
	if code != 0 || !strings.Contains(errOut, "detached from session") {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(sv.live(t).Sessions) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle session is still live: %+v", sv.live(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The log line may come just after the session left the live list.
	for !strings.Contains(sv.stderr.String(), "(serve: idle policy: no client and no running work for 1s)") {
		if time.Now().After(deadline) {
			t.Fatalf("offstage serve does not say why it closed the session:\n%s", sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sessions, tasks := journalOf(t, state)
	if len(sessions) != 1 || sessions[0].Ended.IsZero() || len(tasks) != 1 || tasks[0].EndedBy != "self" || tasks[0].Delivered {
		t.Errorf("the journal after the idle close: sessions %+v, tasks %+v", sessions, tasks)
	}
	// --resume goes on with it in the supervisor, and delivers the result
	// the idle close left unseen.
	resume := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 0.5", "run_in_background": true}}]},
		{"text": "started it"},
		{"expect": "shell:1", "text": "it finished"}]}`)
	out, errOut, code, _ := runIn(t, state, nil, "run", "--resume", "--script", resume, "and?")
	if code != 0 || !strings.Contains(errOut, "resuming session "+sessions[0].ID+": 4 messages, 1 result it has not seen") || !strings.Contains(errOut, "is hosted by offstage serve") || !strings.Contains(out, "it finished") {
		t.Errorf("run --resume under serve: exit %d:\n%s%s", code, out, errOut)
	}
}

// TestServeRefusesASocketPathTooLong: a state directory whose socket path
// would not fit sun_path is refused, naming the way out.
func TestServeRefusesASocketPathTooLong(t *testing.T) {
	state := filepath.Join(serveState(t), strings.Repeat("d", 100))
	_, errOut, code, _ := runIn(t, state, nil, "serve")
	if code != 2 || !strings.Contains(errOut, "a Unix socket's path holds at most 103") || !strings.Contains(errOut, "--state-dir") {
		t.Errorf("offstage serve with a long state directory: exit %d: %s", code, errOut)
	}
}

// TestIdleACPSessionClosesUnderServe: the idle policy holds for an ACP
// session whose editor quit: once its work has ended, it closes after
// --idle.
func TestIdleACPSessionClosesUnderServe(t *testing.T) {
	node := nodeBinary(t, "the TypeScript ACP SDK peer test")
	dir := nodePeer(t, "@agentclientprotocol/sdk")
	state := serveState(t)
	sv := startServe(t, state, "--idle", "1s")
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "sleep 0.5", "run_in_background": true}}]},
		{"text": "It runs in the background."}]}`)
	quit, _ := offstage(t, []string{"XDG_STATE_HOME=" + state})
	quit.Path, quit.Args = node, []string{node, filepath.Join(dir, "acp-quit.mjs"), t.TempDir(), "start it", os.Args[0], "acp", "--script", script, "--yolo"}
	if out, err := quit.CombinedOutput(); err != nil {
		t.Fatalf("the node client failed: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for sv.liveACP(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle ACP session is still kept:\n%s", sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for !strings.Contains(sv.stderr.String(), "closed 1 ACP sessions (serve: idle policy: no editor and no running work for 1s)") {
		if time.Now().After(deadline) { // the line follows the close
			t.Fatalf("offstage serve does not say why it closed the ACP session:\n%s", sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] != "running" }); r["ended_by"] != "self" {
		t.Errorf("shell:1: ended_by %v; want self (the policy waits for work to end)", r["ended_by"])
	}
}

// TestServeDetach: offstage serve --detach starts the supervisor in the
// background, in a session of its own with its log in STATE/run, and
// returns once it answers (the on-demand start); a second --detach finds
// it running; serve stop ends it, and nothing of it stays behind.
func TestServeDetach(t *testing.T) {
	state := serveState(t)
	env := []string{"XDG_STATE_HOME=" + state}
	cmd, mark := offstage(t, env, "serve", "--detach", "--idle", "1h")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "offstage serve started in the background: pid") {
		t.Fatalf("serve --detach = %v:\n%s", err, out)
	}
	t.Cleanup(func() {
		if len(survivors(t, mark)) > 0 { // a failed test leaves none running
			stop, _ := offstage(t, env, "serve", "stop")
			stop.Run()
		}
	})
	sv := &served{state: state}
	pid, err := sv.ping()
	if err != nil {
		t.Fatalf("the detached supervisor does not answer: %v", err)
	}
	if sid, err := unix.Getsid(pid); err != nil || sid != pid {
		t.Errorf("the supervisor's session = %d, %v; want one of its own (%d)", sid, err, pid)
	}
	again, _ := offstage(t, env, "serve", "--detach")
	if out, err := again.CombinedOutput(); err != nil || !strings.Contains(string(out), "already runs") {
		t.Errorf("a second serve --detach = %v:\n%s", err, out)
	}
	if log, err := os.ReadFile(filepath.Join(state, "offstage", "run", "serve.log")); err != nil || !strings.Contains(string(log), "offstage serve: pid") {
		t.Errorf("its log: %v\n%s", err, log)
	}
	stop, _ := offstage(t, env, "serve", "stop")
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("serve stop = %v:\n%s", err, out)
	}
	noSurvivors(t, mark)
}

// TestServeDetachSaysWhyItCouldNotStart (an outsider's finding): a
// detached supervisor that stopped before it served said why only in its
// log, which a full disk leaves empty: serve --detach printed "its log
// ends:" and nothing. The reason now comes back on a pipe of its own,
// whatever the log holds; here the journal cannot be opened (its file
// is a directory). (The full disk itself: a tmpfs, tried by hand.)
func TestServeDetachSaysWhyItCouldNotStart(t *testing.T) {
	state := t.TempDir()
	if err := os.MkdirAll(filepath.Join(state, "journal.db"), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd, mark := offstage(t, nil, "serve", "--state-dir", state, "--detach")
	out, err := cmd.CombinedOutput()
	if code := exitOf(t, err); code != 1 || !strings.Contains(string(out), "offstage serve exited at once (exit status 2), saying:\noffstage: cannot open the journal") {
		t.Errorf("serve --detach with a journal it cannot open: exit %d:\n%s", code, out)
	}
	noSurvivors(t, mark)
}

// TestAServedRunReadsItsClientsConfigFile: a run hosted by offstage serve
// finds the user's config file where its client would (the client's
// XDG_CONFIG_HOME), as it would without a supervisor: its environment
// rules, sandbox and prices hold. It read the supervisor's, so a
// sandbox kept in a project's or CI's XDG_CONFIG_HOME was silently off
// once a supervisor ran (an outsider's finding).
func TestAServedRunReadsItsClientsConfigFile(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	config := t.TempDir()
	if err := os.MkdirAll(filepath.Join(config, "offstage"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte("env: {drop: [MY_VISIBLE]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo \"visible=${MY_VISIBLE:-withheld}\""}}]},
		{"expect": "visible=withheld", "text": "the variable was withheld"}]}`)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state, "XDG_CONFIG_HOME=" + config, "MY_VISIBLE=abc"}, "run", "--script", script, "go")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "is hosted by offstage serve") || !strings.Contains(string(out), "the variable was withheld") {
		t.Errorf("a served run with its client's config file dropping MY_VISIBLE: %v\n%s", err, out)
	}
	sv.stop(t)
}

// TestAServedPipedRunIsNotAskedToLeaveTheSandbox: a conversation hosted by
// offstage serve whose input is a pipe is not asked whether a command may
// run outside the sandbox: the request is refused, as in process, and a
// piped "y" is a message like any other. Under serve the next piped line
// answered it, and the command wrote outside the workspace (an outsider's
// finding).
func TestAServedPipedRunIsNotAskedToLeaveTheSandbox(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		if os.Getenv("OFFSTAGE_REQUIRE_SANDBOX") != "" {
			t.Fatalf("no sandbox on this host, and OFFSTAGE_REQUIRE_SANDBOX is set: %v", err)
		}
		t.Skipf("no sandbox on this host: %v", err)
	}
	state := serveState(t)
	sv := startServe(t, state)
	target := filepath.Join(t.TempDir(), "escaped")
	script := writeScript(t, `{"turns": [
		{"delay_ms": 300, "tool_calls": [{"name": "bash", "input": {"command": "touch `+target+`", "sandbox": false}}]},
		{"expect": "not a terminal", "text": "refused"},
		{"text": "ok"}]}`)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state, "XDG_CONFIG_HOME=" + t.TempDir()}, "run", "--sandbox", "workspace-write", "--script", script)
	cmd.Stdin = strings.NewReader("go\ny\n")
	out, err := cmd.CombinedOutput()
	if _, statErr := os.Stat(target); statErr == nil || err != nil || !strings.Contains(string(out), "is hosted by offstage serve") || !strings.Contains(string(out), "refused") {
		t.Errorf("a served, piped run whose model asks to leave the sandbox (written: %v): %v\n%s", statErr == nil, err, out)
	}
	sv.stop(t)
}

// TestAClientKilledInATurnFreesItsSessionAtOnce: a run SIGKILLed while its
// foreground command runs detaches at once: offstage serve shows the
// session without a client while the turn goes on, and run --attach joins
// it, waiting for that turn and then showing its answer. The session
// stayed attached to no one for as long as the turn ran, refusing the
// attach (an outsider's finding).
func TestAClientKilledInATurnFreesItsSessionAtOnce(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	gate := filepath.Join(t.TempDir(), "go")
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e `+gate+` ]; do sleep 0.05; done; echo built"}}]},
		{"expect": "built", "text": "the build is done"}]}`)
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "build it\n")
	waitSurvivors(t, mark, 2) // the run, and its foreground command
	cmd.Process.Kill()
	cmd.Wait()
	in.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := sv.live(t)
		if len(st.Sessions) == 1 && !st.Sessions[0].Attached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session of a SIGKILLed run, its turn still running, stays attached: %+v\nthe run said:\n%s\noffstage serve said:\n%s", st, out.String(), sv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	attached := make(chan string, 1)
	go func() {
		o, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach")
		attached <- fmt.Sprintf("exit %d\n%s%s", code, o, errOut)
	}()
	time.Sleep(200 * time.Millisecond) // the attach waits for the turn
	os.WriteFile(gate, nil, 0o644)
	got := <-attached
	if !strings.HasPrefix(got, "exit 0") || !strings.Contains(got, "meanwhile the model answered: the build is done") {
		t.Errorf("run --attach while the killed run's turn ran: %s\nwant exit 0 and the turn's answer", got)
	}
	sv.stop(t)
	noSurvivors(t, mark)
}

// An editor killed while its prompt runs a foreground command, under
// offstage serve: the relay offstage acp sees its output's reader gone,
// drops the connection, and the supervisor frees the session at once,
// ending the command (ended_by session), rather than waiting its drain
// for answers nobody will read (an outsider's finding: 5 s later).
func TestARelayedACPClientKilledInATurnEndsItsCommandAtOnce(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	gate := filepath.Join(t.TempDir(), "go")
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "while [ ! -e `+gate+` ]; do sleep 0.05; done"}}]},
		{"text": "done"}]}`)
	cmd, mark := offstage(t, []string{"XDG_STATE_HOME=" + state}, "acp", "--script", script, "--yolo")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(gate, nil, 0o644)
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	await := func(what string) string {
		for lines.Scan() {
			if strings.Contains(lines.Text(), what) {
				return lines.Text()
			}
		}
		t.Fatalf("offstage acp ended before %s (%v):\n%s", what, lines.Err(), stderr.String())
		return ""
	}
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	await(`"id":1`)
	cwd, _ := json.Marshal(t.TempDir())
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":%s,"mcpServers":[]}}`+"\n", cwd)
	var created struct{ Result struct{ SessionID string } }
	json.Unmarshal([]byte(await(`"id":2`)), &created)
	sid, _ := json.Marshal(created.Result.SessionID)
	fmt.Fprintf(in, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":%s,"prompt":[{"type":"text","text":"wait"}]}}`+"\n", sid)
	await(`"sessionUpdate":"tool_call"`)
	// The editor dies: both of its pipes close at once.
	in.Close()
	out.Close()
	died := time.Now()
	r := waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] != "running" })
	if took := time.Since(died); took > 3*time.Second || r["ended_by"] != "session" {
		t.Errorf("the foreground command ended %v after its editor died, %v; want at once (the drain waits 5 s), ended_by session", took.Round(time.Millisecond), r)
	}
	cmd.Wait()
	sv.stop(t)
	noSurvivors(t, mark)
}

// TestAClientThatStopsReadingIsLetGo: a client that stops reading (a
// stopped process, a stuck terminal) for the write timeout is let go: its
// session detaches instead of ending as a one-shot run that was answered,
// and the next attach shows the answer no one read. The session closed as
// answered, the answer lost (an outsider's finding).
func TestAClientThatStopsReadingIsLetGo(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	long := strings.Repeat("lorem ipsum ", 200_000) // 2.4 MB, far more than a socket holds
	script := writeScript(t, `{"turns": [{"text": "the answer begins `+long+`"}]}`)
	c, err := net.Dial("unix", socketPath(filepath.Join(state, "offstage")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := serveHeader{Face: "run", Args: []string{"--script", script, "--wait", "60s", "go"}, Dir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}}
	if err := json.NewEncoder(c).Encode(h); err != nil {
		t.Fatal(err)
	}
	// ... and never read.
	deadline := time.Now().Add(writeTimeout + 30*time.Second)
	for {
		st := sv.live(t)
		if len(st.Sessions) == 1 && !st.Sessions[0].Attached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a client that does not read is still attached after %s: %+v\n%s", writeTimeout+30*time.Second, st, sv.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach")
	if code != 0 || !strings.Contains(out, "meanwhile the model answered: the answer begins lorem ipsum") {
		t.Errorf("run --attach after the client was let go: exit %d; want the answer it did not read:\n%.2000s\n%s", code, out, errOut)
	}
	sv.stop(t)
}

// TestAttachingToABudgetStoppedSessionDoesNotWaitForATurn: results wait
// in a session whose budget stops autonomous turns; run --attach from a
// pipe says no autonomous turn will deliver them and ends, where it waited
// for that turn for good; and an attach refuses the flags that shape a
// session at its start, which it silently ignored (an outsider's finding).
func TestAttachingToABudgetStoppedSessionDoesNotWaitForATurn(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	script := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo done", "run_in_background": true}}]},
		{"text": "started it"}]}`)
	_, errOut, code, _ := runIn(t, state, nil, "run", "--wait", "0", "--budget-calls", "2", "--script", script, "go")
	if code != 0 {
		t.Fatalf("the one-shot run: exit %d\n%s", code, errOut)
	}
	waitTask(t, state, "shell:1", func(r map[string]any) bool { return r["state"] == "completed" })
	// tasks show points a live session's result to an attach, not to a
	// resume, which refuses a live session (an outsider's finding).
	live := liveSessions(journalFlags{state: filepath.Join(state, "offstage")})
	store, err := journal.OpenSQLiteReadOnly(filepath.Join(state, "offstage", "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	var shown bytes.Buffer
	err = showTaskLive(t.Context(), store, "", "shell:1", false, live, &shown, io.Discard)
	store.Close()
	if err != nil || len(live) != 1 || !strings.Contains(shown.String(), "offstage run --attach ") || strings.Contains(shown.String(), "--resume") {
		t.Errorf("tasks show of a live session's undelivered result (live %v): %v\n%s", live, err, shown.String())
	}
	out, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach", "--budget-tokens", "5k")
	if code != 2 || !strings.Contains(errOut, "--budget-tokens would not change it") {
		t.Errorf("run --attach --budget-tokens: exit %d; want it refused, naming the flag:\n%s%s", code, out, errOut)
	}
	done := make(chan string, 1)
	go func() {
		out, errOut, code, _ := runIn(t, state, strings.NewReader(""), "run", "--attach")
		done <- fmt.Sprintf("exit %d\n%s%s", code, out, errOut)
	}()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "exit 0") || !strings.Contains(got, "no autonomous turn delivers the results that wait (session call budget of 2") {
			t.Errorf("run --attach to a session whose budget stopped autonomous turns: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run --attach < /dev/null to a session whose budget stopped autonomous turns still waits after 30s")
	}
	sv.stop(t)
}

// TestServeDetachAtOnce: several serve --detach at the same time (a
// shell's profile in several terminals) leave one supervisor, and each
// says which pid runs: the one that started it, the others that it runs
// already. They claimed to have started a process that had exited, or
// failed quoting the log (an outsider's finding).
func TestServeDetachAtOnce(t *testing.T) {
	state := serveState(t)
	env := []string{"XDG_STATE_HOME=" + state}
	const n = 4
	outs := make(chan string, n)
	var mark string
	for range n {
		cmd, m := offstage(t, env, "serve", "--detach", "--idle", "1h")
		mark = m
		cmd.Env = append(cmd.Env, markEnv+"="+mark) // one mark for all, to find any left
		go func() {
			out, err := cmd.CombinedOutput()
			outs <- fmt.Sprintf("%v: %s", err, out)
		}()
	}
	t.Cleanup(func() {
		stop, _ := offstage(t, env, "serve", "stop")
		stop.Run()
		noSurvivors(t, mark)
	})
	var all []string
	for range n {
		all = append(all, <-outs)
	}
	pid, err := (&served{state: state}).ping()
	if err != nil {
		t.Fatalf("no supervisor answers after %d serve --detach: %v\n%s", n, err, strings.Join(all, "\n"))
	}
	started := 0
	for _, o := range all {
		switch {
		case strings.HasPrefix(o, "<nil>: offstage serve started in the background: pid "+strconv.Itoa(pid)+","):
			started++
		case strings.HasPrefix(o, "<nil>: offstage serve already runs") && strings.Contains(o, "pid "+strconv.Itoa(pid)) || strings.HasPrefix(o, "<nil>: offstage serve already runs for") && !strings.Contains(o, "(pid"):
		default:
			t.Errorf("a serve --detach said %q; the supervisor is pid %d", o, pid)
		}
	}
	if started != 1 {
		t.Errorf("%d say they started pid %d, want 1:\n%s", started, pid, strings.Join(all, "\n"))
	}
}

// TestARelayedACPSaysItsMistakes: offstage acp with a supervisor running
// checks its arguments and the user's config file before it relays, so a
// mistake reaches the editor's stderr with exit 2; relayed, it reached
// only the supervisor's log and the agent ended with 0.
func TestARelayedACPSaysItsMistakes(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	config := t.TempDir()
	os.MkdirAll(filepath.Join(config, "offstage"), 0o700)
	os.WriteFile(filepath.Join(config, "offstage", "config.yaml"), []byte("sandbox: {mode: nope}\n"), 0o600)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"acp", "--script", writeScript(t, `{"turns": []}`), "extra"}, `acp takes no arguments (got "extra")`},
		{[]string{"XDG_CONFIG_HOME=" + config}, []string{"acp", "--script", writeScript(t, `{"turns": []}`)}, "config.yaml"},
	} {
		cmd, _ := offstage(t, append([]string{"XDG_STATE_HOME=" + state}, tc.env...), tc.args...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if exitOf(t, err) != 2 || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "hosted by offstage serve") {
			t.Errorf("offstage %q under serve: %v; want exit 2 saying %q before any relay:\n%s", tc.args, err, tc.want, out)
		}
	}
	sv.stop(t)
}

// rawPingEnv makes the test binary ping the supervisor at its socket
// path directly, skipping the client's own checks, and print what it got.
const rawPingEnv = "OFFSTAGE_TEST_RAW_PING"

func rawPing(sock string) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("raw ping:", err)
		return
	}
	defer c.Close()
	json.NewEncoder(c).Encode(serveHeader{Face: "ping"})
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var p struct{ PID int }
	if err := json.NewDecoder(c).Decode(&p); err != nil {
		fmt.Println("raw ping: refused:", err)
		return
	}
	fmt.Println("raw ping: answered by pid", p.PID)
}

// TestASandboxedCommandCannotUseServe: a sandboxed command of a session
// hosted by offstage serve that runs offstage itself gets a session in its
// own process, inside its sandbox, and a client that skips that check is
// refused by the supervisor. It reached the supervisor's socket and had it
// start a session outside the sandbox, whose command wrote where the
// sandbox forbade (an outsider's finding, critical).
func TestASandboxedCommandCannotUseServe(t *testing.T) {
	if _, err := sandbox.Check(sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: t.TempDir()}); err != nil {
		if os.Getenv("OFFSTAGE_REQUIRE_SANDBOX") != "" {
			t.Fatalf("no sandbox on this host, and OFFSTAGE_REQUIRE_SANDBOX is set: %v", err)
		}
		t.Skipf("no sandbox on this host: %v", err)
	}
	state := serveState(t)
	sv := startServe(t, state)
	outside := filepath.Join(t.TempDir(), "escaped")
	inner := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "echo escaped > `+outside+`"}}]},
		{"text": "inner done"}]}`)
	sock := socketPath(filepath.Join(state, "offstage"))
	outer := writeScript(t, `{"turns": [
		{"tool_calls": [{"name": "bash", "input": {"command": "'`+os.Args[0]+`' run --script `+inner+` go 2>&1; `+rawPingEnv+`=`+sock+` '`+os.Args[0]+`'"}}]},
		{"expect": "(?s)no_new_privs.*raw ping: refused", "text": "outer done"}]}`)
	cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state, "XDG_CONFIG_HOME=" + t.TempDir()}, "run", "--sandbox", "workspace-write", "--script", outer, "go")
	out, err := cmd.CombinedOutput()
	if _, statErr := os.Stat(outside); statErr == nil || err != nil || !strings.Contains(string(out), "is hosted by offstage serve") || !strings.Contains(string(out), "outer done") {
		t.Errorf("a sandboxed command that runs offstage under serve (written outside: %v): %v\n%s", statErr == nil, err, out)
	}
	if !strings.Contains(sv.stderr.String(), "runs under no_new_privs") {
		t.Errorf("offstage serve does not say it refused the sandboxed client:\n%s", sv.stderr.String())
	}
	sv.stop(t)
}

// stopOutsideAWrite stops the supervisor (SIGSTOP) while the test holds
// its journal's write lock, so that it is not stopped in the middle of a
// transaction, holding the lock for as long as it stays stopped: the run
// in process could then not open the journal (a CI run's finding: the
// run waited past 60 s, and refuses after the busy timeout now).
func stopOutsideAWrite(t *testing.T, sv *served) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(sv.state, "offstage", "journal.db")+"?_pragma=busy_timeout(30000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	err = sv.cmd.Process.Signal(syscall.SIGSTOP)
	if _, rerr := conn.ExecContext(context.Background(), "ROLLBACK"); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestAStoppedSupervisorIsNotWaitedOn (an outsider's findings): with
// offstage serve stopped (SIGSTOP) the socket still takes connections,
// and offstage run sent its header and waited without a word for as
// long as the supervisor stayed stopped; offstage sessions waited a
// minute, SIGTERM or not. Now run sees that it is stopped (it waited
// 5 s for a ping's answer before), says so in one line and runs in
// process, and sessions ends at once on SIGTERM.
func TestAStoppedSupervisorIsNotWaitedOn(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state)
	stopOutsideAWrite(t, sv)
	t.Cleanup(func() { sv.cmd.Process.Signal(syscall.SIGCONT) }) // before the stop the cleanup sends
	script := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(script, []byte(`{"turns": [{"text": "answered in process"}]}`), 0o644)
	start := time.Now()
	run, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, "run", "--script", script, "go")
	var stdout, stderr syncBuffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	// It waited without end. (In process it may wait on the journal
	// while the stopped supervisor holds it: SQLite's busy timeout.)
	kill := time.AfterFunc(60*time.Second, func() { run.Process.Kill() })
	code := exitOf(t, run.Wait())
	kill.Stop()
	out, errOut := stdout.String(), stderr.String()
	if code != 0 || !strings.Contains(out, "answered in process") || !strings.Contains(errOut, "it is stopped (pid "+strconv.Itoa(sv.cmd.Process.Pid)) || !strings.Contains(errOut, "the session runs in this process") {
		t.Errorf("offstage run with the supervisor stopped: exit %d after %s\nstdout:\n%s\nstderr:\n%s", code, time.Since(start).Round(time.Millisecond), out, errOut)
	}
	// offstage sessions, offstage serve stop and run --attach say it at
	// once, and how to continue it; offstage tasks does not wait on it. (sessions waited 10 s, then sent its user to a log that
	// said nothing; serve stop waited without end, SIGTERM or not: an
	// outsider's findings.)
	for _, args := range [][]string{{"sessions"}, {"serve", "stop"}, {"run", "--attach"}} {
		start := time.Now()
		cmd, _ := offstage(t, []string{"XDG_STATE_HOME=" + state}, args...)
		errs := new(syncBuffer)
		cmd.Stderr = errs
		kill := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		code := exitOf(t, cmd.Run())
		kill.Stop()
		if pid := strconv.Itoa(sv.cmd.Process.Pid); code != 2 || !strings.Contains(errs.String(), "it is stopped (pid "+pid) || !strings.Contains(errs.String(), "kill -CONT "+pid) {
			t.Errorf("offstage %s with the supervisor stopped: exit %d after %s\n%s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond), errs.String())
		}
	}
	start = time.Now()
	if _, errOut, code, _ := runIn(t, state, nil, "tasks"); code != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("offstage tasks with the supervisor stopped: exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), errOut)
	}
}
