package linefilter_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/proc/internal/linefilter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFilterHasLiteralsWhereEveryMatchHasThem: which patterns get a filter.
func TestFilterHasLiteralsWhereEveryMatchHasThem(t *testing.T) {
	for pattern, want := range map[string]bool{
		`ERROR|panic:`:           true,
		`^\s*FAIL\b`:             true,
		`error: .* at line \d+`:  true,
		`(warn|err)(ing|or)`:     true,
		`x+`:                     true,
		`(ab){2,}`:               true,
		`.*`:                     false,
		`(?i)error`:              false,
		`[0-9]+`:                 false,
		`ERROR|.`:                false,
		`a?`:                     false,
		`(a|b|c|d|e|f|g|h|i|j)x`: true, // the x
		`a|b|c|d|e|f|g|h|i|j`:    false,
	} {
		if got := linefilter.New(regexp.MustCompile(pattern)) != nil; got != want {
			t.Errorf("New(%q) has a filter: %v, want %v", pattern, got, want)
		}
	}
	if linefilter.New(nil) != nil {
		t.Error("New(nil) has a filter")
	}
}

// TestSkipPassesOverPlainLinesWithoutTheLiterals: what Skip passes over.
func TestSkipPassesOverPlainLinesWithoutTheLiterals(t *testing.T) {
	f := linefilter.New(regexp.MustCompile(`ERROR|panic:`))
	for _, tt := range []struct {
		data string
		want int
	}{
		{"", 0},
		{"ok\nfine\n", 8},
		{"ok\nfine\nnot whole", 8},
		{"ok\nan ERROR here\nfine\n", 3},
		{"ok\npanic: x\n", 3},
		{"panic: x\n", 0},
		{"ok\nER\x1b[0mROR\nfine\n", 3}, // an escape could hide a literal: not plain
		{"ok\nERR\x07OR\n", 3},          // so could a control character
		{"ok\ncafé ERR\xc2\x85OR\n", 3}, // or a C1 control
		{"tab\tok\nfine\n", 12},
		{"ok\nno\x7fdel\n", 3},
	} {
		if got := f.Skip([]byte(tt.data)); got != tt.want {
			t.Errorf("Skip(%q) = %d, want %d", tt.data, got, tt.want)
		}
	}
	var none *linefilter.Filter
	if got := none.Skip([]byte("a\nb\n")); got != 0 {
		t.Errorf("a nil filter skipped %d bytes", got)
	}
}

// FuzzSkipNeverPassesOverAMatch: for any pattern and any output, no line
// Skip passes over matches the pattern once cleaned, as the watch matches
// it.
func FuzzSkipNeverPassesOverAMatch(f *testing.F) {
	f.Add(`ERROR|panic:`, "ok\nERROR x\nfine\npanic: y\n")
	f.Add(`(warn|err)(ing|or)\d`, "warning1\nerr\x1b[1mor2\nfoo\n")
	f.Add(`a.b`, "a\tb\naxb\n")
	f.Add(`^$`, "\n\n")
	f.Add(`x\ny`, "x\ny\n")
	f.Add(`é+`, "caf\xc3\xa9\n")
	f.Add(`ab`, "a\x00b\na\rb\n")
	f.Fuzz(func(t *testing.T, pattern, output string) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		lf := linefilter.New(re)
		data := []byte(output)
		for len(data) > 0 {
			n := lf.Skip(data)
			if n > len(data) || n > 0 && data[n-1] != '\n' {
				t.Fatalf("Skip(%q) = %d: not whole lines", data, n)
			}
			for _, line := range strings.SplitAfter(string(data[:n]), "\n") {
				if line != "" && re.MatchString(proc.Clean([]byte(strings.TrimSuffix(line, "\n")))) {
					t.Fatalf("pattern %q: Skip passed over %q, which matches", pattern, line)
				}
			}
			data = data[n:]
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			data = data[i+1:]
		}
	})
}

// TestSkipSeesEveryByteThatIsNotPlain: every byte value, at every place
// of a word, is looked at (the search reads eight bytes at a time).
func TestSkipSeesEveryByteThatIsNotPlain(t *testing.T) {
	f := linefilter.New(regexp.MustCompile(`zzz`))
	for c := range 256 {
		plain := c >= 0x20 && c < 0x7f || c == '\t'
		if c == '\n' || c == 'z' {
			continue
		}
		for at := range 17 {
			line := []byte(strings.Repeat("a", 17) + "\n")
			line[at] = byte(c)
			data := append([]byte("first\n"), line...)
			want := 6
			if plain {
				want = len(data)
			}
			if got := f.Skip(data); got != want {
				t.Fatalf("byte %#x at %d: Skip = %d, want %d", c, at, got, want)
			}
		}
	}
}
