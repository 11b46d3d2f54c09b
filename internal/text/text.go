// Package text holds the small string helpers offstage's surfaces share
// to show things to people and models: one line of at most n characters,
// a byte-bounded cut that says what it cut, a bounded quoted name, "1 task" / "2 tasks", and
// JSON as a model or a person reads it (no HTML escaping).
//
// All of them are pure functions, safe for concurrent use.
package text

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// OneLine folds every run of white space in s (newlines included) into
// one space, trims both ends and cuts the result to at most n runes,
// marking a cut with a final "…" (which counts in the n). n must be at
// least 1.
func OneLine(s string, n int) string { return Cut(Fold(s), n) }

// Fold joins the white-space separated words of s with single spaces: s
// on one line, without leading or trailing space.
func Fold(s string) string { return strings.Join(strings.Fields(s), " ") }

// Cut returns s if it has at most n runes, else its first n-1 runes and
// "…". n must be at least 1.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Clip cuts s to at most n bytes at a rune boundary and, if it cut, adds
// how many bytes it left out: "…(+123 more bytes)". The note is not
// counted in n.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(+" + strconv.Itoa(len(s)-cut) + " more bytes)"
}

// Quote is s cut to at most n runes (as Cut) and quoted as Go's %q
// does: control characters and invalid UTF-8 show escaped, so a name a
// person or a program typed is shown as it is, on one line, bounded.
func Quote(s string, n int) string { return strconv.Quote(Cut(s, n)) }

// Plural says n of what, for English nouns that take an s: "1 task",
// "0 tasks", "2 tasks".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Bytes says a size as a person reads it: "512 B", "3.2 MiB", "1.4 GiB".
func Bytes(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n)/unit, 0
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	if f >= 100 {
		return fmt.Sprintf("%.0f %ciB", f, "KMGTP"[i])
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[i])
}

// JSON is json.Marshal without its HTML escaping: `>`, `<` and `&` stay
// as they are, not \u003e, \u003c and \u0026, for a reader that is a
// model or a person (`2>&1`, `>>>`, `<background-result>`), not a page.
func JSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Nearest returns the word of words at most two edits from s, if any:
// the one a typo was most likely meant for ("rnu" for "run").
func Nearest(s string, words []string) string {
	best, bestD := "", 3
	for _, w := range words {
		if d := editDistance(s, w); d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
