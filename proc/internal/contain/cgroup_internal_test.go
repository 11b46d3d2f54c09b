//go:build linux

package contain

import (
	"os"
	"strings"
	"testing"
)

// TestFindCgroupDir: where the host's cgroup is found on the machines we
// know of.
func TestFindCgroupDir(t *testing.T) {
	const hybrid = `25 30 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
27 25 0:24 / /sys/fs/cgroup/memory rw,relatime shared:11 - cgroup cgroup rw,memory
`
	const pureV2 = `35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	// A container with a cgroup namespace: its root is the mount's root.
	const container = `612 600 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate
`
	// A container without one: the mount's root is the container's cgroup.
	const bindMounted = `612 600 0:30 /system.slice/docker-abc.scope /sys/fs/cgroup rw,relatime - cgroup2 cgroup rw
`
	const spaced = `35 24 0:30 / /mnt/my\040cgroup rw,relatime - cgroup2 cgroup2 rw
`
	const v1Only = `27 25 0:24 / /sys/fs/cgroup/memory rw,relatime shared:11 - cgroup cgroup rw,memory
`
	dir := t.TempDir()
	cases := []struct {
		name, self, mountinfo, want string
		wantErr                     bool
	}{
		{"hybrid host, in the root (here)", "4:memory:/x\n0::/\n", hybrid, "/sys/fs/cgroup/unified", false},
		{"pure v2 desktop, a user's delegated scope", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope\n", pureV2,
			"/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope", false},
		{"container with a cgroup namespace", "0::/\n", container, "/sys/fs/cgroup", false},
		{"container without one", "0::/system.slice/docker-abc.scope/sub\n", bindMounted, "/sys/fs/cgroup/sub", false},
		{"a mount point with a space", "0::/a\n", spaced, "/mnt/my cgroup/a", false},
		{"no v2 hierarchy", "4:memory:/x\n", v1Only, "", true},
		{"v2 line but no mount", "0::/\n", v1Only, "", true},
		{"cgroup outside the mount", "0::/other.slice\n", bindMounted, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// findCgroupDir checks the directory exists: root it in a
			// temporary directory.
			mi := replaceMounts(c.mountinfo, dir)
			want := ""
			if c.want != "" {
				want = dir + c.want
				mkdirAll(t, want)
			}
			got, err := findCgroupDir([]byte(c.self), []byte(mi))
			if (err != nil) != c.wantErr || got != want {
				t.Errorf("findCgroupDir = %q, %v; want %q (error %v)", got, err, want, c.wantErr)
			}
		})
	}
}

// replaceMounts puts every mount point of mountinfo under root.
func replaceMounts(mountinfo, root string) string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.SplitN(line, " ", 6)
		if len(f) == 6 {
			f[4] = root + f[4]
			line = strings.Join(f, " ")
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func mkdirAll(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCgroupOverhead: what ModeCgroup adds to a command that forks
// and leaves nothing, without the spawn. spare is the path a command
// takes (since issue 22): a kept cgroup taken and opened, its (empty)
// list read at the leader's exit, its final usage read, and kept again
// for the next. new is the path without a spare (a command with limits,
// or the first after spareIdle): make it, open it, read its list, remove
// it. Against the ~1.5 ms of BenchmarkSpawnRaw on this machine, this is
// the ratio's numerator less clone3's own cost, measured without the
// noise of a spawn.
func BenchmarkCgroupOverhead(b *testing.B) {
	info, h := containment()
	if h == nil {
		b.Skip(info)
	}
	b.Run("spare", func(b *testing.B) {
		h.drainSpares()
		defer h.drainSpares()
		seen, reused := map[string]bool{}, 0
		for b.Loop() {
			cg, err := h.newCgroup(Limits{})
			if err != nil {
				b.Fatal(err)
			}
			if seen[cg.dir] {
				reused++
			}
			seen[cg.dir] = true
			cg.closeDir()
			if n := cg.count(0); n != 0 {
				b.Fatalf("%d processes in a new cgroup", n)
			}
			cg.finalUsage()
			if err := cg.release(true); err != nil {
				b.Fatal(err)
			}
		}
		if b.N > 1 && reused == 0 {
			b.Fatalf("no cgroup of %d was a spare", b.N)
		}
	})
	b.Run("new", func(b *testing.B) {
		h.drainSpares() // and removed below, none is kept
		for b.Loop() {
			cg, err := h.newCgroup(Limits{})
			if err != nil {
				b.Fatal(err)
			}
			cg.closeDir()
			if n := cg.count(0); n != 0 {
				b.Fatalf("%d processes in a new cgroup", n)
			}
			if err := cg.remove(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEventValue reads keys of a flat keyed file (cpu.stat,
// cgroup.events) wherever they stand, and says when one is missing or
// not a number; reading it takes no allocation, so that a start's end
// keeps its buffers on the stack.
func TestEventValue(t *testing.T) {
	const stat = "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\nnr_descendants 0\nnr_dying_descendants 2"
	cases := []struct {
		in, key string
		want    int64
		ok      bool
	}{
		{stat, "usage_usec", 1234, true},
		{stat, "system_usec", 234, true},
		{stat, "nr_dying_descendants", 2, true}, // the last line, no newline
		{stat + "\n", "nr_dying_descendants", 2, true},
		{stat, "user", 0, false}, // a prefix of a key is not the key
		{stat, "usage_usec 1234", 0, false},
		{"populated 1\nfrozen 0\n", "frozen", 0, true},
		{"populated x\n", "populated", 0, false},
		{"", "populated", 0, false},
		{"\n\n", "populated", 0, false},
	}
	for _, c := range cases {
		got, ok := eventValue([]byte(c.in), c.key)
		if got != c.want || ok != c.ok {
			t.Errorf("eventValue(%q, %q) = %d, %v; want %d, %v", c.in, c.key, got, ok, c.want, c.ok)
		}
	}
	read := func() { // as finalUsage reads: into a buffer on its stack
		var buf [128]byte
		n := copy(buf[:], stat)
		eventValue(buf[:n], "nr_dying_descendants")
	}
	if n := testing.AllocsPerRun(100, read); n != 0 {
		t.Errorf("a buffer read by eventValue goes to the heap: %v allocations a read; want 0", n)
	}
}
