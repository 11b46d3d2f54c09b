package mcpserver_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/offstage/offstage/internal/guesses"
	"github.com/offstage/offstage/mcpserver"
)

// TestAnotherUsersWrongTokensDoNotLockOutTheClient: over loopback, which
// every user of a machine shares, wrong tokens count per user. Another
// user's guesses.Max+1 wrong tokens get that user 429, and the client's
// right token still gets in; before, they locked every local client out
// for a minute (an outsider's finding). The client's own wrong tokens
// still lock it out. It needs root, to run the other user's client.
func TestAnotherUsersWrongTokensDoNotLockOutTheClient(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("OFFSTAGE_REQUIRE_ROOT") != "" {
			t.Fatal("OFFSTAGE_REQUIRE_ROOT is set, but the test does not run as root")
		}
		t.Skip("needs root, to run a client as another user")
	}
	reached := 0
	srv := httptest.NewServer(mcpserver.Authorized("t0k3n", nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached++ })))
	defer srv.Close()
	try := func(token string) int {
		r, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		res, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}

	// The other user runs a copy of this binary it may execute.
	dir, err := os.MkdirTemp("", "guesser")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "guesser")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), guessEnv+"="+srv.URL+"/mcp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	want := strings.TrimSpace(strings.Repeat("401 ", guesses.Max) + "429")
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("another user's %d wrong tokens: %q (%v), want %q", guesses.Max+1, out, err, want)
	}
	if code := try("t0k3n"); code != http.StatusOK || reached != 1 {
		t.Errorf("the client's right token after another user's guesses: %d, want 200", code)
	}
	for i := range guesses.Max {
		if code := try(fmt.Sprint("mine", i)); code != http.StatusUnauthorized {
			t.Fatalf("the client's wrong token %d: %d, want 401", i+1, code)
		}
	}
	if code := try("t0k3n"); code != http.StatusTooManyRequests {
		t.Errorf("the client's right token after its own %d wrong ones: %d, want 429", guesses.Max, code)
	}
}
