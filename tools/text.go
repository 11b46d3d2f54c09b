package tools

import (
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/offstage/offstage/internal/text"
)

// filterLines keeps the lines of text that match re, joined with "\n".
// A nil re keeps everything.
func filterLines(text string, re *regexp.Regexp) string {
	if re == nil {
		return text
	}
	var b strings.Builder
	for line := range strings.Lines(text) {
		if re.MatchString(strings.TrimSuffix(line, "\n")) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// shorten keeps at most max bytes of s, on a UTF-8 boundary, and says how
// many bytes it cut: "abc…(+12 more bytes)".
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…(+" + strconv.Itoa(len(s)-i) + " more bytes)"
}

// shortenTail keeps the last max bytes of s, on a UTF-8 boundary, and says
// how many bytes came before: "…(12 earlier bytes)abc". Output tails are
// cut this way: the end is what matters.
func shortenTail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := len(s) - max
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…(" + strconv.Itoa(i) + " earlier bytes)" + s[i:]
}

// shortenResult cuts a finished task's result to about max bytes. Its
// first line, when it takes at most half of max, is kept: a shell's says
// how it ended and how much it wrote, and cut with the rest it was lost
// and the count of bytes cut counted only its own. The rest keeps its
// last bytes (shortenTail).
func shortenResult(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, rest, ok := strings.Cut(s, "\n")
	if !ok || len(head)+1 > max/2 {
		return shortenTail(s, max)
	}
	return head + "\n" + shortenTail(rest, max-len(head)-1)
}

// fitBudget is the last guard on a result's size. Every field is capped
// where it is made; if a result is still larger than budget (many tasks
// with long texts), the longest strings in it are cut, repeatedly, until
// it fits. The object then comes back as a generic value (keys in
// alphabetical order), with a "truncated" note. whole is false when
// nothing could be cut to fit, and an error object replaced it.
func fitBudget(out any, budget int, less string) (_ any, _ []byte, whole bool) {
	raw, _ := encode(out)
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return out, raw, true
	}
	if m, ok := v.(map[string]any); ok {
		m["truncated"] = "this result was cut to fit " + strconv.Itoa(budget) + " bytes"
	}
	for range 64 {
		text, _ := encode(v)
		if len(text) <= budget {
			return v, text, true
		}
		strs := collectStrings(v, nil)
		if len(strs) == 0 {
			break
		}
		sort.Slice(strs, func(i, j int) bool { return len(*strs[i]) > len(*strs[j]) })
		longest := strs[0]
		excess := len(text) - budget
		keep := max(0, min(len(*longest)/2, len(*longest)-excess-32))
		*longest = shorten(*longest, keep)
	}
	// Nothing left to cut that helps (thousands of tiny fields): give up
	// on the content rather than break the budget.
	tooLarge := ErrorOutput{Error: "The result was too large to show. " + less}
	small, _ := encode(tooLarge)
	return tooLarge, small, false
}

// collectStrings returns pointers to every string in v, so they can be cut
// in place. Strings are collected from maps and slices of the generic form
// json.Unmarshal produces.
func collectStrings(v any, out []*string) []*string {
	visit := func(e any, set func(*string)) {
		switch s := e.(type) {
		case string:
			p := &s
			set(p)
			out = append(out, p)
		case *string:
			out = append(out, s)
		default:
			out = collectStrings(e, out)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			visit(e, func(p *string) { x[k] = p })
		}
	case []any:
		for i, e := range x {
			visit(e, func(p *string) { x[i] = p })
		}
	}
	return out
}

// encode is how a result reaches the model and the client's logs: JSON
// with `>`, `<` and `&` as they are (json.Marshal would send 2>&1 as
// 2\u003e\u00261).
func encode(v any) ([]byte, error) { return text.JSON(v) }
