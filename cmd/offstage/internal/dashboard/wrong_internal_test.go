package dashboard

import (
	"strconv"
	"testing"
	"time"
)

// The count of wrong tokens is per host, ends with its minute, and
// remembers a bounded number of hosts.
func TestWrongLoginsWindow(t *testing.T) {
	var l wrongLogins
	t0 := time.Now()
	for range maxWrongLogins {
		l.add("a", t0)
	}
	if l.allow("a", t0.Add(time.Second)) || !l.allow("b", t0) {
		t.Error("a has 10 wrong tokens: refused; b has none: allowed")
	}
	if !l.allow("a", t0.Add(wrongWindow)) {
		t.Error("a minute on, a may try again")
	}
	for i := range maxWrongHosts + 100 {
		l.add(strconv.Itoa(i), t0.Add(2*wrongWindow))
	}
	if n := len(l.hosts); n > maxWrongHosts {
		t.Errorf("%d hosts remembered, want at most %d", n, maxWrongHosts)
	}
}
