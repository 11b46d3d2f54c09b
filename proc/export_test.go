package proc

// Test hooks: the capture buffer, without a process around it.

type Capture = capture

func NewCapture(head, tail int) *Capture             { return newCapture(head, tail) }
func (c *capture) Write(p []byte)                    { c.write(p) }
func (c *capture) ReadAt(since int64, max int) Chunk { return c.read(since, max) }
func (c *capture) Tail(n, max int) Chunk             { return c.tail(n, max) }
