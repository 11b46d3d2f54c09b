package tools_test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offstage/offstage/tools"
)

// TestPortLeasesNeverOverlap (issue 40 item 3): leases of one PortLeases,
// and of two (two Sets, two offstage processes) sharing the lock
// directory, never hold a port twice; a released port can be leased
// again; a port something listens on is never leased.
func TestPortLeasesNeverOverlap(t *testing.T) {
	dir := t.TempDir()
	// A range of 12 ports, one of them taken by a listener.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	lo := taken - 6
	a := &tools.PortLeases{Min: lo, Max: lo + 12, Dir: dir}
	b := &tools.PortLeases{Min: lo, Max: lo + 12, Dir: dir}

	held := map[int]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, l := range []*tools.PortLeases{a, b, a, b, a} {
		wg.Go(func() {
			ports, err := l.Lease(2)
			if err != nil {
				return // the range may run out for the last ones; overlap is what matters
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ports {
				if p == taken {
					t.Errorf("lease %d got port %d, where something listens", i, p)
				}
				if other, ok := held[p]; ok {
					t.Errorf("port %d leased twice (%s and %d)", p, other, i)
				}
				held[p] = strconv.Itoa(i)
			}
		})
	}
	wg.Wait()
	if len(held) < 8 {
		t.Errorf("only %d ports leased of 11 free", len(held))
	}
	if _, err := a.Lease(9); err == nil {
		t.Error("a lease of 9 ports was granted; the bound is 8")
	}
	// All of the range is held or taken: no more.
	if ports, err := b.Lease(2); err == nil && len(held) >= 10 {
		t.Errorf("a lease beyond the range got %v", ports)
	}
	// Released, a port is free again, to either.
	n := a.Held()
	var mine []int
	for p := range held {
		mine = append(mine, p)
	}
	a.Release(mine)
	b.Release(mine)
	if a.Held() != 0 || b.Held() != 0 {
		t.Errorf("after releasing all: held %d and %d (was %d)", a.Held(), b.Held(), n)
	}
	if _, err := b.Lease(8); err != nil {
		t.Errorf("after release, Lease(8) = %v", err)
	}

	// Of six ports, one taken by a listener: five can be leased, never it.
	c := &tools.PortLeases{Min: taken - 3, Max: taken + 3, Dir: t.TempDir()}
	ports, err := c.Lease(5)
	if err != nil {
		t.Fatalf("Lease(5) of 5 free = %v", err)
	}
	for _, p := range ports {
		if p == taken {
			t.Errorf("Lease(5) = %v holds %d, where something listens", ports, taken)
		}
	}
	if more, err := c.Lease(1); err == nil {
		t.Errorf("a sixth lease got %v", more)
	}
}

// TestPortLeasesRefuseALooseDirectory: a lock directory that others may
// write (where they could swap lock files) is refused, saying so.
func TestPortLeasesRefuseALooseDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := (&tools.PortLeases{Dir: dir}).Lease(1)
	if err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("Lease in a 0777 directory = %v", err)
	}
}

// TestBashLeasesAPort: bash with port gives the command $PORT and
// $OFFSTAGE_PORTS, lists them, waits with until_port "leased" until the
// server listens on it, shows them in task_inspect, and releases them
// when the task ends; two servers at once get two ports.
func TestBashLeasesAPort(t *testing.T) {
	needServer(t)
	leases := &tools.PortLeases{Dir: t.TempDir()}
	e := newEnv(t, tools.Config{Ports: leases})
	var first, second tools.BashOutput
	for _, out := range []*tools.BashOutput{&first, &second} {
		ok(t, e, e.top, "bash", `{"command": "echo ports=$OFFSTAGE_PORTS; exec python3 -u -m http.server $PORT --bind 127.0.0.1", "run_in_background": true, "port": 2, "until_port": "leased", "wait_seconds": 20}`, out)
		if len(out.Ports) != 2 || out.Listening == nil || out.Listening.Port != out.Ports[0] {
			t.Fatalf("bash with port = %+v", out)
		}
		want := "ports=" + strconv.Itoa(out.Ports[0]) + "," + strconv.Itoa(out.Ports[1])
		if !strings.Contains(out.Output, want) {
			t.Errorf("output %q, want %q", out.Output, want)
		}
	}
	if first.Ports[0] == second.Ports[0] || first.Ports[0] == second.Ports[1] || first.Ports[1] == second.Ports[0] {
		t.Errorf("two running servers share a port: %v and %v", first.Ports, second.Ports)
	}
	var in tools.InspectOutput
	ok(t, e, e.top, "task_inspect", `{"task_id": "`+first.TaskID+`"}`, &in)
	if len(in.Ports) != 2 || in.Ports[0] != first.Ports[0] {
		t.Errorf("task_inspect ports = %v, want %v", in.Ports, first.Ports)
	}
	var list tools.ListOutput
	ok(t, e, e.top, "task_list", `{}`, &list)
	for _, row := range list.Tasks {
		if row.ID == first.TaskID && (len(row.Ports) != 2 || row.Ports[0] != first.Ports[0]) {
			t.Errorf("task_list ports = %v, want %v", row.Ports, first.Ports)
		}
	}
	if leases.Held() != 4 {
		t.Errorf("held %d ports, want 4", leases.Held())
	}
	ok(t, e, e.top, "task_cancel", `{"task_id": "`+first.TaskID+`"}`, &struct{}{})
	for deadline := time.Now().Add(10 * time.Second); leases.Held() != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled server's ports are not released: %d held", leases.Held())
		}
	}

	res := e.call(t, e.top, "bash", `{"command": "true", "run_in_background": true, "until_port": "leased"}`)
	if !res.IsError || !strings.Contains(res.Text, "add port") {
		t.Errorf("until_port leased without port = %s", res.Text)
	}
	res = e.call(t, e.top, "bash", `{"command": "true", "port": 9}`)
	if !res.IsError || !strings.Contains(res.Text, "1 to 8") {
		t.Errorf("port 9 = %s", res.Text)
	}
}

// TestUntilPortErrorNamesLeased (outsider finding): a bad until_port on
// bash names every value bash takes, "leased" among them, and "leased"
// on task_wait (which has no lease to wait for) says where it belongs.
func TestUntilPortErrorNamesLeased(t *testing.T) {
	e := newEnv(t, tools.Config{Ports: &tools.PortLeases{Dir: t.TempDir()}})
	res := e.call(t, e.top, "bash", `{"command": "true", "run_in_background": true, "port": 1, "until_port": "lease"}`)
	if !res.IsError || !strings.Contains(res.Text, `\"leased\"`) || !strings.Contains(res.Text, `\"any\"`) {
		t.Errorf("bash until_port \"lease\" = %s, want an error naming \"any\" and \"leased\"", res.Text)
	}
	var done tools.BashOutput
	ok(t, e, e.top, "bash", `{"command": "true"}`, &done)
	res = e.call(t, e.top, "task_wait", `{"task_ids": ["`+done.TaskID+`"], "until_port": "leased", "timeout_seconds": 0.1}`)
	if !res.IsError || !strings.Contains(res.Text, "bash") || !strings.Contains(res.Text, "task_inspect") {
		t.Errorf("task_wait until_port \"leased\" = %s, want it called bash's", res.Text)
	}
}

// TestPortLeasesRefuseASymlinkedLockFile (outsider finding): a lock file
// that is a symlink is refused with an error naming it and saying what to
// do, not passed over as a port in use until every lease failed with
// "all in use".
func TestPortLeasesRefuseASymlinkedLockFile(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // a port that was free a moment ago; one port's range
	link, target := dir+"/"+strconv.Itoa(free), t.TempDir()+"/elsewhere"
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_, err = (&tools.PortLeases{Min: free, Max: free + 1, Dir: dir}).Lease(1)
	if err == nil || !strings.Contains(err.Error(), link) || !strings.Contains(err.Error(), "symlink") || !strings.Contains(err.Error(), "remove") {
		t.Errorf("Lease with a symlinked lock file = %v, want an error naming %s as a symlink to remove", err, link)
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("the symlink was followed")
	}
}
