package proc

import (
	"strings"

	"github.com/offstage/offstage/proc/internal/contain"
	"github.com/offstage/offstage/proc/internal/sandbox"
)

// Test hooks: the capture buffer, without a process around it; the
// keeper's diagnostics; the defaults, which the documentation states.

type KeeperInfo = contain.KeeperInfo

func Keeper() KeeperInfo { return contain.KeeperStatus() }

// LooksLikePrompt is the rule WaitingForInput's doc states.
func LooksLikePrompt(line string) bool { return looksLikePrompt(line) }

// Defaults returns the zero Config with its defaults filled in.
func Defaults() Config { return Config{}.withDefaults() }

const DefaultTailBytes = defaultTailBytes

type Capture = capture

func NewCapture(head, tail int) *Capture             { return newCapture(head, tail) }
func (c *capture) Write(p []byte)                    { c.write(p) }
func (c *capture) ReadAt(since int64, max int) Chunk { return c.read(since, max) }
func (c *capture) Tail(n, max int) Chunk             { return c.tail(n, max) }

// V1Dirs returns where this host's v1 cgroups (for limits) are made,
// whether or not they exist.
func V1Dirs() []string {
	info := Containment()
	if info.Dir == "" {
		return nil
	}
	var dirs []string
	for _, base := range contain.V1Bases() {
		dirs = append(dirs, base+info.Dir[strings.LastIndexByte(info.Dir, '/'):])
	}
	return dirs
}

// DrainSpareCgroups removes the empty cgroups kept for the next commands,
// as spareIdle without a command would; it returns how many there were.
func DrainSpareCgroups() int { return contain.DrainSpares() }

// SandboxStep, while on, makes every sandboxed Start go through the
// re-executed step, as it does where this process cannot fence a thread
// of its own for it.
func SandboxStep(on bool) { sandbox.ForceStep(on) }

// PromptStalled says whether p's prompt watch left it stalled without a
// goroutine (firstLook), for its next output to list it again.
func PromptStalled(p *Process) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.promptStalled
}
