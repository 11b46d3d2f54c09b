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
	l.take("a", t0)
	l.forgive("a") // a right token is not counted
	for i := range maxWrongLogins {
		if !l.take("a", t0) {
			t.Fatalf("try %d refused", i+1)
		}
	}
	if l.take("a", t0.Add(time.Second)) || !l.take("b", t0) {
		t.Error("a has 10 wrong tokens: refused; b has none: allowed")
	}
	if !l.take("a", t0.Add(wrongWindow)) {
		t.Error("a minute on, a may try again")
	}
	for i := range maxWrongHosts + 100 {
		l.take(strconv.Itoa(i), t0.Add(2*wrongWindow))
	}
	if n := len(l.hosts); n > maxWrongHosts {
		t.Errorf("%d hosts remembered, want at most %d", n, maxWrongHosts)
	}
}
