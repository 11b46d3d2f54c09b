package rpcline

// Valid reports whether b is one JSON value, as json.Valid does, and how
// deep its objects and arrays nest (0 for a scalar). It reads b once,
// where json.Valid (a state machine called per byte) and a count of the
// nesting read every line twice, and cost more than the rest of taking a
// prompt; FuzzValid holds it to json.Valid. Like json.Valid, it does not
// check that strings are UTF-8.
func Valid(b []byte) (depth int, ok bool) {
	// open holds a bit per open object (1) or array (0), the innermost
	// last; past 256 levels it grows.
	var small [4]uint64
	open := small[:]
	d, i := 0, skipSpace(b, 0)
	inObject := false
value:
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if d == len(open)*64 {
			open = append(open, 0)
		}
		if c == '{' {
			open[d/64] |= 1 << (d % 64)
		} else {
			open[d/64] &^= 1 << (d % 64)
		}
		d++
		depth = max(depth, d)
		i = skipSpace(b, i+1)
		if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
			d--
			i++
			goto next
		}
		if c == '{' {
			goto key
		}
		goto value
	case c == '"':
		if i = validString(b, i); i < 0 {
			return 0, false
		}
	case c == '-' || c >= '0' && c <= '9':
		if i = validNumber(b, i); i < 0 {
			return 0, false
		}
	case c == 't':
		i = literal(b, i, "true")
	case c == 'f':
		i = literal(b, i, "false")
	case c == 'n':
		i = literal(b, i, "null")
	default:
		return 0, false
	}
	if i < 0 {
		return 0, false
	}
next: // a value ended at i
	i = skipSpace(b, i)
	if d == 0 {
		return depth, i == len(b)
	}
	if i >= len(b) {
		return 0, false
	}
	inObject = open[(d-1)/64]&(1<<((d-1)%64)) != 0
	switch {
	case b[i] == ',':
		i = skipSpace(b, i+1)
		if inObject {
			goto key
		}
		goto value
	case b[i] == '}' && inObject, b[i] == ']' && !inObject:
		d--
		i++
		goto next
	}
	return 0, false
key: // a member's key, then its colon, at i
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	if i = validString(b, i); i < 0 {
		return 0, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	goto value
}

// validString returns the index after the string that starts at b[i]
// (its opening quote), or -1 if it is not a valid JSON string.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

// validNumber returns the index after the number that starts at b[i], or
// -1 if it is not a valid JSON number.
func validNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digits(b, i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// literal returns the index after word at b[i], or -1 if it is not there.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
