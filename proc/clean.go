package proc

import "unicode/utf8"

// Clean turns raw process output into text fit for a model:
//
//   - ANSI escape sequences (colours, cursor moves, titles) are removed;
//   - CRLF becomes LF, and a lone CR rewinds to the start of its line the
//     way a terminal does, so a progress bar leaves only its last state;
//   - other control characters except tab are removed;
//   - each run of invalid UTF-8 becomes one U+FFFD, so binary output
//     cannot inflate or corrupt the text.
//
// The result is always valid UTF-8.
func Clean(raw []byte) string {
	out := make([]byte, 0, len(raw))
	lineStart := 0   // index in out where the current line starts
	invalid := false // the last thing written was a U+FFFD for invalid bytes
	for i := 0; i < len(raw); {
		b := raw[i]
		switch {
		case b == 0x1b:
			i = skipEscape(raw, i)
			continue
		case b == '\n':
			out = append(out, '\n')
			lineStart = len(out)
		case b == '\r':
			if i+1 < len(raw) && raw[i+1] == '\n' {
				break // the '\n' ends the line
			}
			if i+1 < len(raw) { // a lone CR: the line is rewritten
				out = out[:lineStart]
			}
		case b == '\t':
			out = append(out, b)
		case b < 0x20 || b == 0x7f:
			// other C0 controls and DEL: dropped
		case b < utf8.RuneSelf:
			out = append(out, b)
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				if !invalid {
					out = append(out, "\uFFFD"...)
				}
				invalid = true
				i++
				continue
			}
			if r >= 0x80 && r < 0xa0 { // C1 controls
				i += size
				continue
			}
			out = append(out, raw[i:i+size]...)
			i += size
			invalid = false
			continue
		}
		invalid = false
		i++
	}
	return string(out)
}

// skipEscape returns the index just after the escape sequence that starts
// at raw[i] (an ESC). It understands CSI (ESC [ … final byte), OSC, DCS and
// the other string sequences (ending in BEL or ESC \), and two- or
// three-byte escapes; an unfinished sequence at the end is dropped whole.
func skipEscape(raw []byte, i int) int {
	i++ // ESC
	if i >= len(raw) {
		return i
	}
	switch c := raw[i]; {
	case c == '[': // CSI: parameters and intermediates, then a final byte 0x40–0x7e
		for i++; i < len(raw); i++ {
			if raw[i] >= 0x40 && raw[i] <= 0x7e {
				return i + 1
			}
			if raw[i] < 0x20 && raw[i] != 0x1b { // malformed: stop at a control
				return i
			}
			if raw[i] == 0x1b {
				return i
			}
		}
		return i
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_': // string sequences
		for i++; i < len(raw); i++ {
			if raw[i] == 0x07 {
				return i + 1
			}
			if raw[i] == 0x1b {
				if i+1 < len(raw) && raw[i+1] == '\\' {
					return i + 2
				}
				return i
			}
		}
		return i
	case c >= 0x20 && c <= 0x2f: // intermediates (charset selection): ESC ( B
		for i++; i < len(raw) && raw[i] >= 0x20 && raw[i] <= 0x2f; i++ {
		}
		if i < len(raw) {
			i++
		}
		return i
	default: // ESC and one final byte: ESC 7, ESC =, ESC M …
		return i + 1
	}
}
