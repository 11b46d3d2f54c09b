package step

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// run runs a classic BPF seccomp program over a call, as the kernel
// would: the instructions the filters here use, and no others.
func run(t *testing.T, prog []unix.SockFilter, arch, nr uint32) uint32 {
	t.Helper()
	var data [64]byte // struct seccomp_data
	binary.LittleEndian.PutUint32(data[0:], nr)
	binary.LittleEndian.PutUint32(data[4:], arch)
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			a = binary.LittleEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var ok bool
			switch in.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				ok = a == in.K
			case unix.BPF_JGE:
				ok = a >= in.K
			default:
				ok = a&in.K != 0
			}
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: code %#x", pc, in.Code)
		}
	}
	t.Fatal("ran off the end of the program")
	return 0
}

// The root fence's filter starts with a shortcut for the numbers below
// clone3's: it must judge every call of every ABI as the program without
// it does (clone3 and x32 refused, everything else allowed).
func TestContainFilterShortcutJudgesAsTheFullProgram(t *testing.T) {
	f := ContainFilter()
	if len(setidArches) == 0 {
		if f != nil {
			t.Fatal("a filter on an architecture without one")
		}
		return
	}
	prog := unsafe.Slice(f.Filter, f.Len)
	var arches []setidArch
	for _, a := range setidArches {
		arches = append(arches, setidArch{arch: a.arch, x32: a.x32, calls: []setidCall{{nr: clone3NR, mode: -1}}})
	}
	full := setidProgram(arches)
	enosys := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	abis := []uint32{0xdead} // an architecture it does not know: allowed, as before
	for _, a := range setidArches {
		abis = append(abis, a.arch)
	}
	var refused int
	for _, arch := range abis {
		for _, base := range []uint32{0, 0x40000000} {
			for nr := base; nr < base+1024; nr++ {
				got, want := run(t, prog, arch, nr), run(t, full, arch, nr)
				if got != want {
					t.Fatalf("arch %#x call %#x: %#x, want %#x", arch, nr, got, want)
				}
				if got == enosys {
					refused++
				}
			}
		}
		if got := run(t, prog, arch, ^uint32(0)); got != run(t, full, arch, ^uint32(0)) {
			t.Fatalf("arch %#x call -1: %#x", arch, got)
		}
	}
	for _, a := range setidArches {
		if got := run(t, prog, a.arch, clone3NR); got != enosys {
			t.Errorf("arch %#x: clone3 gets %#x, want ENOSYS", a.arch, got)
		}
	}
	if refused == 0 {
		t.Fatal("nothing refused")
	}
	// The shortcut: below clone3, three instructions decide.
	if prog[0].K != 0 || prog[1].K != clone3NR || prog[2+int(prog[1].Jf)].Code != unix.BPF_RET|unix.BPF_K {
		t.Errorf("no shortcut for the calls below clone3: %+v", prog[:2])
	}
}
