// Package linefilter passes over lines a regular expression cannot match
// without running it, as grep and ripgrep do: most patterns a watch looks
// for have literal parts ("ERROR|panic:"), and a line that holds none of
// them cannot match. Go's regexp costs tens of nanoseconds a byte on every
// line; the search for a literal (bytes.Index) a fraction of one.
//
// The literals come from the pattern's syntax tree: a set of strings one of
// which every match contains (a literal; each branch of an alternation;
// the best part of a concatenation; what is repeated at least once). A
// pattern with no such set (".*", "(?i)error", "[0-9]+") gets no filter,
// and every line goes to the regexp as before.
//
// The lines are matched after cleaning (package proc's Clean drops control
// characters and escape sequences, which could join the parts of a
// literal), so the filter passes over only plain lines: printable ASCII and
// tabs, which cleaning leaves as they are. Any other line goes to the
// regexp.
package linefilter

import (
	"bytes"
	"encoding/binary"
	"regexp"
	"regexp/syntax"
)

// Filter tells the lines a regular expression cannot match. A nil *Filter
// passes over nothing. It is immutable and safe for concurrent use.
type Filter struct {
	lits [][]byte // every match of the pattern contains one of them
}

// maxLiterals bounds the set: beyond it, one search per literal costs more
// than it saves.
const maxLiterals = 8

// New returns the filter of re, or nil when re has no literal every match
// contains.
func New(re *regexp.Regexp) *Filter {
	if re == nil {
		return nil
	}
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	set, ok := required(tree.Simplify())
	if !ok {
		return nil
	}
	f := &Filter{}
	for _, s := range set {
		f.lits = append(f.lits, []byte(s))
	}
	return f
}

// required returns a set of non-empty strings one of which is in every
// string re matches; ok is false when it knows of none.
func required(re *syntax.Regexp) (set []string, ok bool) {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || len(re.Rune) == 0 {
			return nil, false
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if s, ok := required(sub); ok && (set == nil || better(s, set)) {
				set = s
			}
		}
		return set, set != nil
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			s, ok := required(sub)
			if !ok || len(set)+len(s) > maxLiterals {
				return nil, false
			}
			set = append(set, s...)
		}
		return set, true
	}
	return nil, false
}

// better says whether a filters more than b: a longer shortest literal is
// rarer; at equal length, fewer literals cost fewer searches.
func better(a, b []string) bool {
	la, lb := shortest(a), shortest(b)
	return la > lb || la == lb && len(a) < len(b)
}

func shortest(set []string) int {
	n := -1
	for _, s := range set {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

// Skip returns how many bytes at the start of data are whole lines
// (each ending in '\n') that the pattern cannot match: plain lines that
// hold none of its literals. The line after them may match, or is not
// whole. A nil Filter skips nothing.
func (f *Filter) Skip(data []byte) int {
	if f == nil {
		return 0
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1] // whole lines only
	first := len(data)                              // where the first line that may match starts, at the latest
	for _, lit := range f.lits {
		if i := bytes.Index(data[:first], lit); i >= 0 {
			first = i
		}
	}
	if i := notPlain(data[:first]); i >= 0 {
		first = i
	}
	if first == len(data) {
		return len(data)
	}
	return bytes.LastIndexByte(data[:first], '\n') + 1
}

// notPlain returns the index of the first byte in b that is not printable
// ASCII, a tab or a newline, or -1. It looks at eight bytes at a time.
func notPlain(b []byte) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		below := (w - ones*0x20) &^ w & highs // a byte below 0x20 (or above 0x7f, caught next)
		del := (w ^ ones*0x7f)                // zero where a byte is 0x7f
		del = (del - ones) &^ del & highs
		if below|del|w&highs != 0 {
			if j := notPlainBytes(b[i : i+8]); j >= 0 {
				return i + j
			}
		}
	}
	if j := notPlainBytes(b[i:]); j >= 0 {
		return i + j
	}
	return -1
}

func notPlainBytes(b []byte) int {
	for i, c := range b {
		if (c < 0x20 && c != '\t' && c != '\n') || c >= 0x7f {
			return i
		}
	}
	return -1
}
