package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Regression (an outsider's finding): an answer the relay wrote into its
// client's pipe counted as passed on, though the client died before it
// read it (6 of 6): the result was taken as delivered and never offered
// again. The relay now tells what the client has read of a pipe: what it
// wrote less what the pipe holds. What a socket took counts, read or not
// (clientQueue says why).
func TestTheRelayTellsWhatItsClientRead(t *testing.T) {
	a := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	b := `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}` + "\n"
	for _, kind := range []string{"pipe", "socket"} {
		for _, c := range []struct {
			name string
			read int // of b, before the client goes
			late bool
			want int // the last ack, beyond a
		}{
			{name: "b unread", read: 0, want: map[string]int{"pipe": 0, "socket": len(b)}[kind]},
			{name: "b half read", read: len(b) / 2, want: map[string]int{"pipe": len(b) / 2, "socket": len(b)}[kind]},
			{name: "b read whole", read: len(b), want: len(b)},
			{name: "b read a while after", read: len(b), late: true, want: len(b)},
		} {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				sup, relay := unixPair(t)
				in, inW := io.Pipe()
				defer inW.Close()
				client, out := clientEnd(t, kind)
				ended := make(chan error, 1)
				go func() { ended <- relayStream(context.Background(), relay, "mcp", true, nil, in, out) }()
				acks := make(chan string, 16)
				go func() {
					defer close(acks)
					br := bufio.NewReader(sup)
					br.ReadBytes('\n') // the header
					for {
						line, err := br.ReadString('\n')
						if err != nil {
							return
						}
						acks <- line
					}
				}()
				nextAck := func() string {
					t.Helper()
					select {
					case l := <-acks:
						return l
					case <-time.After(10 * time.Second):
						t.Fatal("no ack in 10 s")
						return ""
					}
				}
				sup.Write([]byte(a))
				if _, err := io.ReadFull(client, make([]byte, len(a))); err != nil {
					t.Fatal(err)
				}
				if got, want := nextAck(), fmt.Sprintf("%cack %d\n", ackMark, len(a)); got != want {
					t.Fatalf("after the client read a: the relay told %q, want %q", got, want)
				}
				sup.Write([]byte(b))
				waitUnread(t, client, len(b))
				if c.late {
					time.Sleep(50 * time.Millisecond) // the relay looked, and will look again
				}
				if _, err := io.ReadFull(client, make([]byte, c.read)); err != nil {
					t.Fatal(err)
				}
				last := len(a)
				if c.late {
					if got, want := nextAck(), fmt.Sprintf("%cack %d\n", ackMark, len(a)+len(b)); got != want {
						t.Fatalf("the client read b without a write after it: the relay told %q, want %q", got, want)
					}
					last += len(b)
				}
				client.Close() // the client goes
				if err := <-ended; err != nil {
					t.Fatalf("relayStream = %v", err)
				}
				for l := range acks {
					if _, err := fmt.Sscanf(l, "\x1eack %d\n", &last); err != nil {
						t.Fatalf("the relay sent %q", l)
					}
				}
				if want := len(a) + c.want; last != want {
					t.Errorf("the last ack counts %d bytes, want %d (a, and %d of b read)", last, want, c.want)
				}
			})
		}
	}
}

// clientEnd returns the two ends of a client's stdout of kind "pipe" or
// "socket": the client's, which the test closes, and the relay's.
func clientEnd(t *testing.T, kind string) (client *os.File, relay *os.File) {
	t.Helper()
	if kind == "pipe" {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, r := os.NewFile(uintptr(fds[0]), "client"), os.NewFile(uintptr(fds[1]), "relay")
	t.Cleanup(func() { c.Close(); r.Close() })
	return c, r
}

// waitUnread waits until n bytes wait to be read at f.
func waitUnread(t *testing.T, f *os.File, n int) {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		rc.Control(func(fd uintptr) { got, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes wait at the client's end after 10 s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The same, end to end: the client of a relayed offstage mcp sends a
// task_wait and dies with its answer unread in the pipe. The result is
// undelivered in the journal, to be offered again.
func TestARelayedAnswerLeftUnreadInThePipeIsUndelivered(t *testing.T) {
	state := serveState(t)
	sv := startServe(t, state, "--idle", "1h")
	rc := startRelayClient(t, state)
	finishedShell(t, rc, state)
	io.WriteString(rc.in, request("w", "tools/call", `{"name":"task_wait","arguments":{"task_ids":["shell:1"]}}`))
	waitUnread(t, rc.out, len(`{"jsonrpc":"2.0","id":"w","result":{}}`))
	time.Sleep(200 * time.Millisecond) // the relay has written the answer whole, and looked
	rc.out.Close()                     // the client dies, the answer unread
	rc.cmd.Process.Kill()
	sv.waitLive(t, "no session (its client went)", func(s []liveSession) bool { return len(s) == 0 })
	if r := waitTask(t, state, "shell:1", func(map[string]any) bool { return true }); r["delivered"] != false {
		t.Errorf("shell:1, its answer never read: delivered %v, want false: %v", r["delivered"], r)
	}
	noSurvivors(t, rc.mark)
}

// A relay stopped (SIGTERM, as a client stops its server on the way out)
// right after its client read an answer tells that it did, before it
// drops the connection: its next look at the pipe would never come, and
// the supervisor would take back what the client read.
func TestAStoppedRelayTellsWhatItsClientRead(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	sup, relay := unixPair(t)
	in, inW := io.Pipe()
	defer inW.Close()
	client, out := clientEnd(t, "pipe")
	ctx, stop := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- relayStream(ctx, relay, "mcp", true, nil, in, out) }()
	br := bufio.NewReader(sup)
	if _, err := br.ReadBytes('\n'); err != nil { // the header
		t.Fatal(err)
	}
	sup.Write([]byte(answer))
	waitUnread(t, client, len(answer))
	time.Sleep(300 * time.Millisecond) // the relay looks at the pipe every 100 ms by now
	if _, err := io.ReadFull(client, make([]byte, len(answer))); err != nil {
		t.Fatal(err)
	}
	stop() // at once
	if err := <-ended; err != nil {
		t.Fatalf("relayStream = %v", err)
	}
	rest, _ := io.ReadAll(br)
	if want := fmt.Sprintf("%cack %d\n", ackMark, len(answer)); string(rest) != want {
		t.Errorf("the supervisor read %q after the header, want %q", rest, want)
	}
}
