package text_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/internal/text"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 5, ""},
		{"  make\n\ttest  ", 20, "make test"},
		{"make test", 9, "make test"},
		{"make test", 8, "make te…"},
		{"a\r\n\r\nb", 3, "a b"},
		{"héllo wörld", 7, "héllo …"},
		{"日本語のテキスト", 4, "日本語…"},
		{"abc", 1, "…"},
	} {
		if got := text.OneLine(c.in, c.n); got != c.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if got := text.OneLine(c.in, c.n); utf8.RuneCountInString(got) > c.n {
			t.Errorf("OneLine(%q, %d) = %q: longer than %d runes", c.in, c.n, got, c.n)
		}
	}
}

// TestCutKeepsWhiteSpace: Cut only cuts; folding is OneLine's.
func TestCutKeepsWhiteSpace(t *testing.T) {
	if got := text.Cut("a\n b\n c", 5); got != "a\n b…" {
		t.Errorf("Cut = %q, want %q", got, "a\n b…")
	}
	if got := text.Fold(" a\n b\t\tc "); got != "a b c" {
		t.Errorf("Fold = %q, want %q", got, "a b c")
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456789…(+3 more bytes)"},
		{"ab€cd", 3, "ab…(+5 more bytes)"}, // € is 3 bytes: the cut backs off to a rune start
		{"abc", 0, "…(+3 more bytes)"},
	} {
		got := text.Clip(c.in, c.n)
		if got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q: not valid UTF-8", c.in, c.n, got)
		}
	}
}

func TestQuote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{"a\x1b[2Jb\n", `"a\x1b[2Jb\n"`},
		{"\xff", `"\xff"`},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 9) + `…"`},
	} {
		if got := text.Quote(c.in, 10); got != c.want {
			t.Errorf("Quote(%q, 10) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 tasks", 1: "1 task", 2: "2 tasks", 12: "12 tasks"} {
		if got := text.Plural(n, "task"); got != want {
			t.Errorf("Plural(%d, task) = %q, want %q", n, got, want)
		}
	}
}

func TestJSONKeepsMarkupCharacters(t *testing.T) {
	got, err := text.JSON(map[string]string{"output": "a 2>&1 <b>\n"})
	if want := `{"output":"a 2>&1 <b>\n"}`; err != nil || string(got) != want {
		t.Errorf("JSON() = %s, %v; want %s", got, err, want)
	}
}
