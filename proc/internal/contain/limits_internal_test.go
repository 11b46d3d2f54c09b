//go:build linux

package contain

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindV1Dir: where a v1 controller's cgroup of this process is, with
// controllers mounted alone or together (cpu,cpuacct), in a nested cgroup
// (as the memory one here) or the root, and none for a controller no v1
// hierarchy has.
func TestFindV1Dir(t *testing.T) {
	dir := t.TempDir()
	mountinfo := `25 30 0:22 / ` + dir + ` ro - tmpfs tmpfs ro,mode=755
26 25 0:23 / ` + dir + `/unified rw - cgroup2 cgroup2 rw
27 25 0:24 / ` + dir + `/memory rw,relatime - cgroup cgroup rw,memory
28 25 0:25 / ` + dir + `/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
`
	self := "4:memory:/process_api/x\n2:cpu,cpuacct:/\n0::/\n"
	for _, d := range []string{"memory/process_api/x", "cpu,cpuacct"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	for ctl, want := range map[string]string{"memory": dir + "/memory/process_api/x", "cpu": dir + "/cpu,cpuacct", "pids": ""} {
		got, err := findV1Dir(ctl, []byte(self), []byte(mountinfo))
		if got != want || (err != nil) != (want == "") {
			t.Errorf("findV1Dir(%s) = %q, %v, want %q", ctl, got, err, want)
		}
	}
}

// TestLimitFiles: each limit lands in its controller's file, v2 or v1,
// and the cgroups go with remove.
func TestLimitFiles(t *testing.T) {
	info, h := containment()
	if h == nil {
		t.Logf("no cgroups here (%v); TestLimitMemory checks the error", info)
		return
	}
	l := Limits{Memory: 64 << 20, Pids: 16, CPUs: 1.5}
	if err := h.check(l); err != nil {
		t.Logf("these limits cannot be enforced here: %v", err)
		return
	}
	cg, err := h.newCgroup(l)
	if err != nil {
		t.Fatal(err)
	}
	cg.closeDir()
	ctl := h.controllers()
	read := func(i int, v2, v1 string) string {
		dir := cg.dir
		file := v2
		if !ctl[i].v2 {
			dir, file = ctl[i].v1+cg.dir[strings.LastIndexByte(cg.dir, '/'):], v1
		}
		b, err := os.ReadFile(dir + "/" + file)
		if err != nil {
			t.Error(err)
		}
		return strings.TrimSpace(string(b))
	}
	for _, tc := range []struct {
		i            int
		v2, v1, want string
	}{
		{i: ctlMemory, v2: "memory.max", v1: "memory.limit_in_bytes", want: "67108864"},
		{i: ctlPids, v2: "pids.max", v1: "pids.max", want: "16"},
		{i: ctlCPU, v2: "cpu.max", v1: "cpu.cfs_quota_us", want: "150000"},
	} {
		got := read(tc.i, tc.v2, tc.v1)
		if ctl[tc.i].v2 && tc.i == ctlCPU {
			tc.want += " 100000"
		}
		if got != tc.want {
			t.Errorf("%s limit = %q, want %q", limitNames[tc.i], got, tc.want)
		}
	}
	if err := cg.remove(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range append([]string{cg.dir}, cg.v1...) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there after remove (%v)", dir, err)
		}
	}
}
