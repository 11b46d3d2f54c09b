package guesses

import (
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The count of wrong tokens is per host, ends with its window, and
// remembers a bounded number of hosts.
func TestWindow(t *testing.T) {
	var c Counter
	t0 := time.Now()
	c.Take("a", t0)
	c.Forgive("a") // a right token is not counted
	for i := range Max {
		if !c.Take("a", t0) {
			t.Fatalf("try %d refused", i+1)
		}
	}
	if c.Take("a", t0.Add(time.Second)) || !c.Take("b", t0) {
		t.Error("a has 10 wrong tokens: refused; b has none: allowed")
	}
	if !c.Take("a", t0.Add(Window)) {
		t.Error("a window on, a may try again")
	}
	for i := range maxHosts + 100 {
		c.Take(strconv.Itoa(i), t0.Add(2*Window))
	}
	if n := c.remembered(); n > maxHosts {
		t.Errorf("%d hosts remembered, want at most %d", n, maxHosts)
	}
}
