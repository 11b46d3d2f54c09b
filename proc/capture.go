package proc

import "bytes"

// capture holds one output stream in bounded memory: the first bytes (the
// head) and a ring of the last bytes (the tail). Positions in the stream
// are cursors: cursor c is the c-th byte ever written, so a reader can ask
// for "everything since c" and learn exactly how much it missed when the
// ring moved on. It is not safe for concurrent use; Process guards it.
type capture struct {
	head  []byte // the first cap(head) bytes of the stream; grows to headCap
	ring  []byte // the last bytes: byte at cursor c is ring[c % size]; grows to size
	size  int64  // the ring's capacity
	limit int    // the head's capacity
	total int64  // bytes written so far: the cursor after the last byte
}

// Both buffers grow on demand, doubling from minGrow, so a command that
// prints a line costs a few KiB, not the caps.
const minGrow = 4 << 10

func newCapture(headBytes, tailBytes int) *capture {
	return &capture{limit: headBytes, size: int64(max(tailBytes, 1))}
}

// grown returns b with room for n more bytes, capacity at most limit.
func grown(b []byte, n, limit int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	c := min(limit, max(2*cap(b), len(b)+n, minGrow))
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

func (c *capture) write(p []byte) {
	if room := c.limit - len(c.head); room > 0 {
		n := min(room, len(p))
		c.head = append(grown(c.head, n, c.limit), p[:n]...)
	}
	if int64(len(p)) > c.size { // only the last size bytes can stay
		skip := int64(len(p)) - c.size
		c.total += skip
		p = p[skip:]
		if int64(len(c.ring)) < c.size { // jumped past the growing phase
			c.ring = make([]byte, c.size)
		}
	}
	if fill := c.size - int64(len(c.ring)); fill > 0 && c.total == int64(len(c.ring)) {
		n := int(min(fill, int64(len(p))))
		c.ring = append(grown(c.ring, n, int(c.size)), p[:n]...)
		c.total += int64(n)
		p = p[n:]
	}
	for len(p) > 0 {
		off := c.total % c.size
		n := copy(c.ring[off:], p)
		p = p[n:]
		c.total += int64(n)
	}
}

// ringStart is the cursor of the oldest byte the ring holds.
func (c *capture) ringStart() int64 {
	return c.total - int64(len(c.ring))
}

// Chunk is a piece of output returned by a read.
type Chunk struct {
	Data    []byte // the bytes, raw as the process wrote them; the caller owns them
	Start   int64  // cursor of Data[0]
	Next    int64  // cursor just after Data: pass it to the next read
	Skipped int64  // bytes between the requested cursor and Start that are no longer held
	Total   int64  // bytes written so far
}

// read returns up to limit bytes from cursor since on, contiguous. Bytes the
// head still holds are served from it; a read that falls in the gap
// between head and ring jumps to the ring and reports what it skipped. A
// negative limit reads nothing (Process.Read gives max <= 0 its meaning).
func (c *capture) read(since int64, limit int) Chunk {
	since = max(0, min(since, c.total))
	limit = max(limit, 0)
	ch := Chunk{Total: c.total}
	if rs := c.ringStart(); since < rs {
		if since < int64(len(c.head)) {
			end := min(int64(len(c.head)), since+int64(limit))
			ch.Data = bytes.Clone(c.head[since:end])
			ch.Start, ch.Next = since, end
			return ch
		}
		ch.Skipped = rs - since
		since = rs
	}
	end := min(c.total, since+int64(limit))
	ch.Data = c.copyRing(since, end)
	ch.Start, ch.Next = since, end
	return ch
}

// copyRing copies the held bytes [from, to) into a new slice.
func (c *capture) copyRing(from, to int64) []byte {
	out := make([]byte, to-from)
	size := c.size
	for n := 0; from < to; {
		off := from % size
		k := copy(out[n:], c.ring[off:min(size, off+to-from)])
		n += k
		from += int64(k)
	}
	return out
}

// tail returns the last n lines the ring holds (a final line without a
// newline counts as a line; a trailing newline does not start one), but no
// more than limit bytes.
func (c *capture) tail(n, limit int) Chunk {
	if n <= 0 || limit <= 0 {
		return Chunk{Start: c.total, Next: c.total, Total: c.total}
	}
	from := c.total - min(int64(limit), c.total-c.ringStart())
	held := c.copyRing(from, c.total)
	end, start := len(held), 0
	if end > 0 && held[end-1] == '\n' {
		end--
	}
	for range n {
		i := bytes.LastIndexByte(held[:end], '\n')
		if i < 0 {
			start = 0
			break
		}
		start, end = i+1, i
	}
	return Chunk{Data: held[start:], Start: from + int64(start), Next: c.total, Total: c.total}
}
