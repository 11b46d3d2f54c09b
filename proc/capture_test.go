package proc_test

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/offstage/offstage/proc"
)

// stream returns the bytes a test writes: byte i is 'a'+i%26, so any
// window shows where it came from.
func stream(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func TestCursorReadsAcrossWrapAroundReportSkippedBytesExactly(t *testing.T) {
	all := stream(1000)
	c := proc.NewCapture(10, 100)
	for _, n := range []int{7, 50, 93, 300, 1, 549} { // uneven writes, wrapping many times
		c.Write(all[:n])
		all = all[n:]
	}
	all = stream(1000)
	for _, tc := range []struct {
		since, limit         int
		start, next, skipped int64
	}{
		{0, 1000, 0, 10, 0},        // the head
		{5, 3, 5, 8, 0},            // inside the head, limited
		{10, 1000, 900, 1000, 890}, // the gap between head and ring: skipped exactly
		{899, 1000, 900, 1000, 1},
		{900, 50, 900, 950, 0}, // ring, wrapped, limited
		{950, 1000, 950, 1000, 0},
		{1000, 10, 1000, 1000, 0}, // nothing new
		{5000, 10, 1000, 1000, 0}, // beyond the end: clamped
		{-3, 2, 0, 2, 0},          // before the start: clamped
	} {
		got := c.ReadAt(int64(tc.since), tc.limit)
		if got.Start != tc.start || got.Next != tc.next || got.Skipped != tc.skipped || got.Total != 1000 {
			t.Errorf("read(%d, %d) = start %d next %d skipped %d total %d; want %d %d %d 1000",
				tc.since, tc.limit, got.Start, got.Next, got.Skipped, got.Total, tc.start, tc.next, tc.skipped)
		}
		if want := all[got.Start:got.Next]; !bytes.Equal(got.Data, want) {
			t.Errorf("read(%d, %d) data = %q, want %q", tc.since, tc.limit, got.Data, want)
		}
	}
}

// Following the output with Next never yields a byte twice, never misses
// one silently: data plus skipped adds up to everything written.
func FuzzCursorFollowing(f *testing.F) {
	f.Add(uint16(8), uint16(32), []byte{3, 200, 17, 64, 1}, uint16(16))
	f.Fuzz(func(t *testing.T, head, tail uint16, writes []byte, limit uint16) {
		c := proc.NewCapture(int(head%512), int(tail%512)+1)
		all := stream(1 << 16)
		var written, cursor, seen, skipped int64
		for _, w := range writes {
			n := int(w) * 3
			if written+int64(n) > int64(len(all)) {
				break
			}
			c.Write(all[written : written+int64(n)])
			written += int64(n)
			for {
				ch := c.ReadAt(cursor, int(limit%300)+1)
				if ch.Skipped > 0 && ch.Start != cursor+ch.Skipped {
					t.Fatalf("skipped %d from %d but data starts at %d", ch.Skipped, cursor, ch.Start)
				}
				if !bytes.Equal(ch.Data, all[ch.Start:ch.Next]) {
					t.Fatalf("data at %d is wrong", ch.Start)
				}
				seen += int64(len(ch.Data))
				skipped += ch.Skipped
				cursor = ch.Next
				if cursor == written {
					break
				}
				if len(ch.Data) == 0 && ch.Skipped == 0 {
					t.Fatalf("read at %d of %d made no progress", cursor, written)
				}
			}
		}
		if seen+skipped != written {
			t.Fatalf("seen %d + skipped %d != written %d", seen, skipped, written)
		}
	})
}

func TestTailLines(t *testing.T) {
	c := proc.NewCapture(0, 64)
	c.Write([]byte("one\ntwo\nthree\nfour\n"))
	for _, tc := range []struct {
		n, limit int
		want     string
	}{
		{1, 100, "four\n"},
		{2, 100, "three\nfour\n"},
		{10, 100, "one\ntwo\nthree\nfour\n"},
		{0, 100, ""},
		{2, 8, "ee\nfour\n"}, // byte limit wins: a partial first line
	} {
		if got := string(c.Tail(tc.n, tc.limit).Data); got != tc.want {
			t.Errorf("tail(%d, %d) = %q, want %q", tc.n, tc.limit, got, tc.want)
		}
	}
	c.Write([]byte("no newline yet"))
	if got := string(c.Tail(1, 100).Data); got != "no newline yet" {
		t.Errorf("tail(1) = %q", got)
	}
	long := proc.NewCapture(0, 32)
	long.Write([]byte(strings.Repeat("x", 1000))) // a line longer than the ring
	if got := long.Tail(3, 100); len(got.Data) != 32 || got.Start != 1000-32 {
		t.Errorf("tail of one long line = %d bytes from %d, want the ring's 32 from 968", len(got.Data), got.Start)
	}
}

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "hello\nworld\n", "hello\nworld\n"},
		{"crlf", "a\r\nb\r\n", "a\nb\n"},
		{"progress bar", "10%\r50%\r100%\ndone\n", "100%\ndone\n"},
		{"trailing cr kept for the next chunk", "abc\r", "abc"},
		{"colours", "\x1b[1;31mred\x1b[0m plain", "red plain"},
		{"cursor moves", "a\x1b[2K\x1b[1Gb", "ab"},
		{"title (OSC, BEL)", "\x1b]0;my title\x07text", "text"},
		{"OSC 8 link (ST)", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"charset", "\x1b(Bok", "ok"},
		{"unfinished escape", "ok\x1b[31", "ok"},
		{"controls", "a\x00b\x07c\x08d\x7fe\tf", "abcde\tf"},
		{"invalid utf-8 run", "a\xff\xfe\xfdb", "a\uFFFDb"},
		{"truncated rune", "ok\xe6\x97", "ok\uFFFD"},
		{"valid utf-8", "日本語 ✓ 🎉", "日本語 ✓ 🎉"},
		{"C1 control", "a\u0085b", "ab"},
		{"binary", "\x00\x01\x02\xff\xd8\xff\xe0", "\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := proc.Clean([]byte(tc.in)); got != tc.want {
				t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"\x1b[31mx\x1b[0m", "a\r\nb\rc", "\xff\xfe", "\x1b]0;t\x07", "日本\x1b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := proc.Clean(raw)
		if !utf8Valid(got) {
			t.Fatalf("Clean(%q) = %q: invalid UTF-8", raw, got)
		}
		for _, r := range got {
			if r == 0x1b || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("Clean(%q) = %q: kept control %U", raw, got, r)
			}
		}
		if len(got) > 3*len(raw) {
			t.Fatalf("Clean grew %d bytes into %d", len(raw), len(got))
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

// TestReadsFallBackToTheLog: 15 MiB printed in a burst and read from
// cursor 0 after the ring has moved on: with a log, every byte comes
// back in order and nothing is skipped; past the log's cap, the skip is
// exactly what neither the log nor the ring holds.
func TestReadsFallBackToTheLog(t *testing.T) {
	const total = 15 << 20
	want := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	want[len(want)-1] = '\n'
	for _, c := range []struct {
		name    string
		logMax  int64
		skipped int64
	}{
		{"whole log", 0, 0},
		{"capped log", 4 << 20, total - 4<<20 - proc.DefaultTailBytes},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := helperConfig("print", strconv.Itoa(total))
			cfg.LogPath, cfg.LogMaxBytes = filepath.Join(t.TempDir(), "out.log"), c.logMax
			p, err := proc.Start(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if e, _ := p.Wait(t.Context()); e.Bytes != total {
				t.Fatalf("exit %+v", e)
			}
			var got bytes.Buffer
			var skipped int64
			for cur := int64(0); cur < total; {
				ch := p.Read(proc.Combined, cur, 64<<10)
				if ch.Start != cur+ch.Skipped {
					t.Fatalf("read at %d: start %d, skipped %d", cur, ch.Start, ch.Skipped)
				}
				skipped += ch.Skipped
				for i := range ch.Data {
					if ch.Data[i] != want[(ch.Start+int64(i))%int64(len(want))] {
						t.Fatalf("byte %d is wrong", ch.Start+int64(i))
					}
				}
				got.Write(ch.Data)
				cur = ch.Next
			}
			if skipped != c.skipped || int64(got.Len())+skipped != total {
				t.Errorf("read %d bytes and skipped %d, want %d skipped", got.Len(), skipped, c.skipped)
			}
		})
	}
}
