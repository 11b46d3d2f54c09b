package origin

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAllowed(t *testing.T) {
	allowed := []string{"https://app.example"}
	for _, c := range []struct {
		origin string
		want   bool
	}{
		{"http://localhost:8080", true},
		{"https://127.0.0.1", true},
		{"http://127.9.9.9:1", true},
		{"http://[::1]:3000", true},
		{"https://app.example", true},
		{"https://app.example/", true},
		{"https://app.example.evil", false},
		{"http://localhost.evil.example", false},
		{"http://192.168.1.2", false},
		{"file://localhost", false},
		{"null", false},
		{"", false},
		{"http://%zz", false},
	} {
		if got := Allowed(c.origin, allowed); got != c.want {
			t.Errorf("Allowed(%q) = %v, want %v", c.origin, got, c.want)
		}
	}
}
