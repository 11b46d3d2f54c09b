//go:build linux

package main

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// statusFlags reads f's open file's flags without changing its mode (as
// Fd would).
func statusFlags(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fl := 0
	rc.Control(func(fd uintptr) { fl, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	return fl
}

// offstage acp and offstage mcp, on one processor, read and write their
// stdio through Go's poller while they run (pipes set non-blocking: a
// blocking read held the processor, and a prompt took four times as
// long), and put the pipes, which the editor shares, back in blocking
// mode when they end. On two, where polling the input costs CPU and
// saves no time, they leave stdin as it is; stdout is polled whatever the
// processors, so that a write stuck on a client that reads nothing can be
// cut when the session ends (protocolStdio).
func TestStdioIsPolledWhileAFaceRunsAndRestoredAfter(t *testing.T) {
	for _, tc := range []struct {
		face           string
		procs          string
		polled, output bool // stdin polled, stdout polled
	}{{"acp", "1", true, true}, {"mcp", "1", true, true}, {"acp", "2", false, true}, {"mcp", "2", false, true}} {
		face := tc.face
		t.Run(face+"-GOMAXPROCS="+tc.procs, func(t *testing.T) {
			var in, out [2]int
			if err := unix.Pipe2(in[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			if err := unix.Pipe2(out[:], unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			inR, inW := os.NewFile(uintptr(in[0]), "inR"), os.NewFile(uintptr(in[1]), "inW")
			outR, outW := os.NewFile(uintptr(out[0]), "outR"), os.NewFile(uintptr(out[1]), "outW")
			defer inR.Close()
			defer inW.Close()
			defer outR.Close()
			defer outW.Close()
			cmd, mark := offstage(t, []string{"GOMAXPROCS=" + tc.procs}, face, "--no-serve")
			cmd.Stdin, cmd.Stdout = inR, outW
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}` + "\n"
			if face == "mcp" {
				initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n"
			}
			inW.Write([]byte(initialize))
			answered := make(chan string, 1)
			go func() {
				line, _ := bufio.NewReader(outR).ReadString('\n')
				answered <- line
			}()
			select {
			case line := <-answered:
				if !strings.Contains(line, `"result"`) {
					t.Fatalf("initialize = %q", line)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no answer to initialize")
			}
			inNB, outNB := statusFlags(t, inR)&unix.O_NONBLOCK != 0, statusFlags(t, outW)&unix.O_NONBLOCK != 0
			if inNB != tc.polled || outNB != tc.output {
				t.Errorf("while offstage %s runs with GOMAXPROCS=%s, its stdin and stdout non-blocking: %v, %v; want %v, %v (polled)", face, tc.procs, inNB, outNB, tc.polled, tc.output)
			}
			inW.Close() // the client's input ends: offstage ends
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case <-waited:
			case <-time.After(30 * time.Second):
				t.Fatalf("offstage %s did not end at the end of its input", face)
			}
			if statusFlags(t, inR)&unix.O_NONBLOCK != 0 || statusFlags(t, outW)&unix.O_NONBLOCK != 0 {
				t.Errorf("after offstage %s ended, its stdin or stdout is still non-blocking, for whoever shares them", face)
			}
			noSurvivors(t, mark)
		})
	}
}
