package tools_test

import (
	"encoding/json"
	"net"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/tools"
)

// serverCommand is a server on a free port that prints it.
const serverCommand = "exec python3 -u -m http.server 0 --bind 127.0.0.1"

var servingPort = regexp.MustCompile(`port (\d+)`)

func needServer(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("ports are found in /proc")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
}

// TestWaitUntilPortAny (issue 22): a server started on port 0 in the
// background; task_wait until_port any returns its port, which is the
// one it printed, and task_inspect shows it (task_list leaves ports to
// task_inspect: issue 35).
func TestWaitUntilPortAny(t *testing.T) {
	needServer(t)
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, serverCommand)
	var w tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "until_port": "any", "timeout_seconds": 20}`, &w)
	if w.Listening == nil || w.Listening.TaskID != id || w.Listening.Port == 0 || len(w.Done) != 0 || len(w.Running) != 1 {
		t.Fatalf("task_wait until_port any = %+v", w)
	}
	port := w.Listening.Port
	waitOutput(t, e.top, id, "(http://")
	var read tools.TaskOutputResult
	ok(t, e, e.top, "task_output", `{"task_id": "`+id+`", "since": 0}`, &read)
	m := servingPort.FindStringSubmatch(read.Output)
	if m == nil || m[1] != strconv.Itoa(port) {
		t.Errorf("until_port found %d; the server says %q", port, read.Output)
	}
	var in tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &in)
	if !slices.Contains(in.Listening, port) {
		t.Errorf("task_inspect listening = %v, want %d", in.Listening, port)
	}
	// A given port that is not the server's times out; its own returns.
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "until_port": "1", "timeout_seconds": 0.4}`, &w)
	if w.Listening != nil || !w.TimedOut {
		t.Errorf("task_wait until_port 1 = %+v, want a timeout", w)
	}
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"], "until_port": "`+strconv.Itoa(port)+`", "timeout_seconds": 5}`, &w)
	if w.Listening == nil || w.Listening.Port != port {
		t.Errorf("task_wait until_port %d = %+v", port, w)
	}
}

// TestBashUntilPort: one bash call starts the server and returns its
// port.
func TestBashUntilPort(t *testing.T) {
	needServer(t)
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	args, _ := json.Marshal(map[string]any{"command": serverCommand, "run_in_background": true, "until_port": "any", "wait_seconds": 20})
	start := time.Now()
	ok(t, e, e.top, "bash", string(args), &out)
	if out.Listening == nil || out.Listening.Port == 0 || out.Status != "running" {
		t.Fatalf("bash until_port any = %+v", out)
	}
	t.Logf("listening on %d after %v: %s", out.Listening.Port, time.Since(start), out.Note)
	// A command that ends without listening says so.
	args, _ = json.Marshal(map[string]any{"command": "exit 3", "run_in_background": true, "until_port": "any"})
	ok(t, e, e.top, "bash", string(args), &out)
	if out.Listening != nil || out.Status != "failed" || out.Note != "It ended before it listened on until_port." {
		t.Errorf("bash until_port, ending first = %+v", out)
	}
}

// TestUntilPortArguments: what until_port refuses, and says why.
func TestUntilPortArguments(t *testing.T) {
	e := newEnv(t, tools.Config{})
	id := e.background(t, e.top, "sleep 100")
	for _, port := range []string{"0", "65536", "http", "-1"} {
		if msg := e.refused(t, e.top, "task_wait", `{"task_ids": ["`+id+`"], "until_port": "`+port+`"}`); msg == "" {
			t.Errorf("until_port %q accepted", port)
		}
	}
	if msg := e.refused(t, e.top, "bash", `{"command": "true", "until_port": "any"}`); msg == "" {
		t.Error("until_port without run_in_background accepted")
	}
}

// TestAddressInUseNamesTheHolder (issue 22): a command that fails with
// "address already in use" is told which of the caller's shells holds
// the port; a port held outside offstage is said to be, without more.
func TestAddressInUseNamesTheHolder(t *testing.T) {
	needServer(t)
	e := newEnv(t, tools.Config{})
	var out tools.BashOutput
	args, _ := json.Marshal(map[string]any{"command": serverCommand, "run_in_background": true, "until_port": "any", "wait_seconds": 20})
	ok(t, e, e.top, "bash", string(args), &out)
	if out.Listening == nil {
		t.Fatalf("the server did not listen: %+v", out)
	}
	server, port := out.TaskID, strconv.Itoa(out.Listening.Port)
	// Python's message names no port: the command line does.
	ok(t, e, e.top, "bash", `{"command": "python3 -m http.server `+port+` --bind 127.0.0.1"}`, &out)
	if out.Status != "failed" || !strings.Contains(out.Note, "Port "+port+" is already in use by your "+server) {
		t.Errorf("foreground, Python: %+v", out)
	}
	// A message that names the port, in the background: the result says.
	id := e.background(t, e.top, "echo 'listen tcp 127.0.0.1:"+port+": bind: address already in use' >&2; exit 1")
	waitDone(t, e.top, id)
	var w tools.WaitOutput
	ok(t, e, e.top, "task_wait", `{"task_ids": ["`+id+`"]}`, &w)
	if len(w.Done) != 1 || !strings.Contains(w.Done[0].Result, "Port "+port+" is already in use by your "+server) {
		t.Errorf("background result: %+v", w.Done)
	}
	// A port held outside offstage.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	outside := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	ok(t, e, e.top, "bash", `{"command": "python3 -m http.server `+outside+` --bind 127.0.0.1"}`, &out)
	if out.Status != "failed" || !strings.Contains(out.Note, "not by one of your tasks") || strings.Contains(out.Note, server) {
		t.Errorf("foreground, held outside: %+v", out)
	}
}

// TestInspectShowsUsage (issue 22): a running shell's processes, CPU
// time and memory are in task_inspect, in either containment
// (OFFSTAGE_CONTAINMENT=marks runs the fallback). task_list leaves them
// out: measuring a thousand shells per call took 40 ms (issue 35).
func TestInspectShowsUsage(t *testing.T) {
	needServer(t)
	e := newEnv(t, tools.Config{})
	// 48 MiB held after a busy loop of some 100 ms, in a child of the shell.
	id := e.background(t, e.top, `python3 -c 'import time; b = bytearray(48 << 20); t = time.process_time(); exec("while time.process_time() - t < 0.1: pass"); print("holding", flush=True); time.sleep(100)'; true`)
	waitOutput(t, e.top, id, "holding")
	var in tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+id+`"}`, &in)
	t.Logf("%s: task_inspect %+v", proc.Containment().Mode, in.ShellUsage)
	if u := in.ShellUsage; u.Processes != 2 || u.CPUSeconds < 0.05 || u.MemoryMiB < 48 || u.MemoryPeakMiB < u.MemoryMiB {
		t.Errorf("task_inspect: %+v; want 2 processes, at least 0.05 s and 48 MiB", u)
	}
}
