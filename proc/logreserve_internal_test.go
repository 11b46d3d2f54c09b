package proc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
)

// TestLogLeavesItsReserve: a log on a file system with 3 MiB free of 100
// MiB (a default reserve of 1 MiB) stops at 2 MiB, not at a full disk,
// says why once, ends with the line that says where and why, and leaves
// the rest for the journal beside it; a negative reserve writes it all.
func TestLogLeavesItsReserve(t *testing.T) {
	const size, free0 = 100 << 20, 3 << 20
	for _, tc := range []struct {
		reserve int64
		want    int64 // bytes of output the log holds
	}{
		{0, free0 - 1<<20},
		{512 << 10, free0 - 512<<10},
		{-1, 5 << 20},
	} {
		t.Run(strconv.FormatInt(tc.reserve, 10), func(t *testing.T) {
			var told atomic.Int32
			var toldErr atomic.Pointer[error]
			path := filepath.Join(t.TempDir(), "out.log")
			l, err := openLog(path, 64<<20, tc.reserve, func(err error) { told.Add(1); toldErr.Store(&err) })
			if err != nil {
				t.Fatal(err)
			}
			// The fake file system loses what the log writes.
			l.free = func(f *os.File) (int64, int64, bool) {
				fi, err := f.Stat()
				if err != nil {
					t.Error(err)
					return 0, 0, false
				}
				return free0 - fi.Size(), size, true
			}
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range 80 { // 5 MiB
				l.write(chunk)
			}
			cut := l.close()
			got := l.onDisk.Load()
			if got != tc.want || cut != 5<<20-tc.want {
				t.Errorf("log holds %d bytes, cut %d; want %d and %d", got, cut, tc.want, 5<<20-tc.want)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reserve < 0 {
				if told.Load() != 0 || len(b) != 5<<20 {
					t.Errorf("without a reserve: told %d times, log of %d bytes; want none and all of it", told.Load(), len(b))
				}
				return
			}
			if told.Load() != 1 || !errors.Is(*toldErr.Load(), ErrLogReserve) {
				t.Errorf("OnLogError told %d times; want once, with ErrLogReserve", told.Load())
			}
			if err := l.failed(); !errors.Is(err, ErrLogReserve) {
				t.Errorf("failed() = %v, want ErrLogReserve", err)
			}
			mark := regexp.MustCompile(`\n\[offstage: log cut at byte (\d+): \d+ more bytes of output were not logged; stopped: the disk is nearly full: [\d.]+ [KM]iB free, which is kept for the journal and others\]\n$`)
			if m := mark.FindSubmatch(b); m == nil || string(m[1]) != strconv.FormatInt(got, 10) {
				t.Errorf("the log ends %q, want the cut line at byte %d", b[max(0, len(b)-200):], got)
			}
		})
	}
}
