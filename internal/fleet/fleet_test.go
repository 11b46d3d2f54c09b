package fleet

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLastLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		cut  bool
		want string
	}{
		{"a\nb\nc\n", 2, false, "b\nc\n"},
		{"a\nb\nc", 2, false, "b\nc"},
		{"a\nb\n", 5, false, "a\nb\n"},
		{"art of a line\nb\nc\n", 5, true, "b\nc\n"},
		{"", 3, false, ""},
	} {
		if got := c.in[lastLines([]byte(c.in), c.n, c.cut):]; got != c.want {
			t.Errorf("last %d lines of %q = %q, want %q", c.n, c.in, got, c.want)
		}
	}
}

type owner struct{ secret string }

func (o owner) PeerSecret() string                        { return o.secret }
func (owner) Shell(string, string) (*proc.Process, bool) { return nil, false }
func (owner) Store() *journal.DB                          { return nil }

// TestPeersShowTheSecret: the owner serves output only to a request that
// shows its secret.
func TestPeersShowTheSecret(t *testing.T) {
	h := Handler(owner{secret: "s3cret"})
	for _, auth := range []string{"", "Bearer wrong", "Bearer ", "s3cret", "Bearer s3cre"} {
		r := httptest.NewRequest(http.MethodGet, OutputPath+"?session=x&id=shell:1", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, w.Code)
		}
	}
}
