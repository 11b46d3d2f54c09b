package mcpserver_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/offstage/offstage/internal/guesses"
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

// TestWrongTokensAreCountedPerHost: after guesses.Max wrong bearer tokens
// from one host within a minute, that host's requests are refused with
// 429, the right token too, while another host's right token gets in; a
// right token is not counted. Every wrong token got a 401 at once, so a
// short token could be guessed at network speed (an outsider's finding).
func TestWrongTokensAreCountedPerHost(t *testing.T) {
	reached := 0
	h := mcpserver.Authorized("t0k3n", nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ }))
	try := func(from, token string) int {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = from + ":40000"
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 20 {
		if code := try("10.0.0.1", "t0k3n"); code != http.StatusOK {
			t.Fatalf("the right token: %d", code)
		}
	}
	for i := range 10 {
		if code := try("10.0.0.1", "guess"+strconv.Itoa(i)); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, code)
		}
	}
	if code := try("10.0.0.1", "guess-11"); code != http.StatusTooManyRequests {
		t.Errorf("the 11th wrong token within a minute: %d, want 429", code)
	}
	if code := try("10.0.0.1", "t0k3n"); code != http.StatusTooManyRequests {
		t.Errorf("the right token from a host refused for guessing: %d, want 429 until the minute has passed", code)
	}
	if code := try("10.0.0.2", "t0k3n"); code != http.StatusOK || reached != 21 {
		t.Errorf("another host's right token: %d (handler reached %d times, want 21)", code, reached)
	}
}

// guessEnv makes the test binary a client that sends guesses.Max+1 wrong
// tokens to the URL it holds, and prints the status of each.
const guessEnv = "MCPSERVER_TEST_GUESS"

func guessTokens() {
	var codes []string
	for i := range guesses.Max + 1 {
		r, _ := http.NewRequest(http.MethodPost, os.Getenv(guessEnv), nil)
		r.Header.Set("Authorization", fmt.Sprintf("Bearer guess%d", i))
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		codes = append(codes, fmt.Sprint(res.StatusCode))
	}
	fmt.Println(strings.Join(codes, " "))
	os.Exit(0)
}
