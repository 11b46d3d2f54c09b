package proc

// Test hooks: the capture buffer, without a process around it; the
// keeper's diagnostics; the defaults, which the documentation states.

type KeeperInfo = keeperInfo

func Keeper() KeeperInfo { return keeperStatus() }

// Defaults returns the zero Config with its defaults filled in.
func Defaults() Config { return Config{}.withDefaults() }

const DefaultTailBytes = defaultTailBytes

type Capture = capture

func NewCapture(head, tail int) *Capture             { return newCapture(head, tail) }
func (c *capture) Write(p []byte)                    { c.write(p) }
func (c *capture) ReadAt(since int64, max int) Chunk { return c.read(since, max) }
func (c *capture) Tail(n, max int) Chunk             { return c.tail(n, max) }
