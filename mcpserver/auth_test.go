package mcpserver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/offstage/offstage/mcpserver"
)

// TestAnEmptyTokenRefusesEverything pins issue 34's sixth item:
// subtle.ConstantTimeCompare(nil, []byte{}) is 1, so a server given no
// token must refuse before it compares; "Authorization: Bearer " with
// nothing after it, a bare "Bearer", and no header all get 401.
func TestAnEmptyTokenRefusesEverything(t *testing.T) {
	reached := false
	h := mcpserver.Authorized("", nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	for _, auth := range []string{"", "Bearer", "Bearer ", "bearer  ", "Basic "} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || reached {
			t.Errorf("Authorization %q with no token configured: %d (handler reached: %v), want 401", auth, w.Code, reached)
		}
	}
	// And the rule still lets the token in, so the refusals above are
	// the empty token's.
	h = mcpserver.Authorized("t0k3n", nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer t0k3n")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if !reached {
		t.Error("the right token did not get in")
	}
}
