package dashboard_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offstage/offstage/cmd/offstage/internal/dashboard"
	"github.com/offstage/offstage/journal"
)

// A credential: how a request tries to get in.
type credential struct {
	name string
	set  func(*http.Request)
}

func bearerOf(tok string) credential {
	return credential{"Authorization: Bearer " + tok, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }}
}

func cookieOf(name, value string) credential {
	return credential{"cookie " + name, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "offstage_dashboard", Value: value}) }}
}

// loginCookie is the cookie an attacker computes for a token it knows
// or guesses (the empty one): the HMAC the dashboard sets.
func loginCookie(tok string) string {
	mac := hmac.New(sha256.New, []byte(tok))
	mac.Write([]byte("offstage dashboard login"))
	return hex.EncodeToString(mac.Sum(nil))
}

// try sends a stream's GET and a real cancel request for id with cred,
// and returns their status codes.
func try(t *testing.T, c *http.Client, base, session, id string, cred credential) (events, cancel int) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ui/events", nil)
	cred.set(req)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events = resp.StatusCode
	stop() // the stream would go on
	resp.Body.Close()
	form := url.Values{"session": {session}, "id": {id}, "reason": {"forged"}}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/ui/api/cancel", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Offstage-Action", "cancel")
	cred.set(req)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return events, resp.StatusCode
}

// TestForgedCredentialsAreRefused pins issue 34's sixth item: the
// dashboard's tests sent no credential or a wrong login only, so a
// dashboard that let any cookie or any Bearer token in passed them. A
// forged cookie and a wrong token reach neither the stream nor the stop
// button (the task keeps running); the cookie a login sets, and the
// token, do.
func TestForgedCredentialsAreRefused(t *testing.T) {
	f := newFleet(t, true)
	id := f.ticker(t, "keeps running", 50*time.Millisecond)
	other := f.ticker(t, "stopped with the login's cookie", 50*time.Millisecond)
	c := f.srv.Client()
	// What gets in: the token, and the cookie a login with it sets (first:
	// the wrong tokens below use up the host's tries for a minute).
	if ev, _ := try(t, c, f.srv.URL, f.session, "no-such-task", bearerOf(token)); ev != http.StatusOK {
		t.Errorf("the token: /ui/events %d, want 200", ev)
	}
	if ev, cancel := try(t, c, f.srv.URL, f.session, other, cookieOf("of a login", loginCookie(token))); ev != http.StatusOK || cancel != http.StatusOK {
		t.Errorf("the login's cookie: /ui/events %d, /ui/api/cancel %d; want 200 and 200", ev, cancel)
	}
	// A wrong token is refused: 401, or 429 once the host has sent ten.
	refused := func(code int) bool { return code == http.StatusUnauthorized || code == http.StatusTooManyRequests }
	for _, cred := range []credential{
		cookieOf("forged", "forged"),
		cookieOf("of another token", loginCookie("another token")),
		cookieOf("empty", ""),
		bearerOf("wrong"),
		bearerOf(""),
		bearerOf(token + "x"),
		{"Authorization: Basic with the token", func(r *http.Request) { r.SetBasicAuth("", token) }},
		{"a wrong token beside the right cookie", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer wrong")
			r.AddCookie(&http.Cookie{Name: "offstage_dashboard", Value: loginCookie(token)})
		}},
	} {
		if ev, cancel := try(t, c, f.srv.URL, f.session, id, cred); !refused(ev) || !refused(cancel) {
			t.Errorf("%s: /ui/events %d, /ui/api/cancel %d; want both refused", cred.name, ev, cancel)
		}
	}
	f.mu.Lock()
	canceled := f.canceled
	f.mu.Unlock()
	if slices.ContainsFunc(canceled, func(c string) bool { return strings.HasPrefix(c, id+" ") }) {
		t.Fatalf("a forged request stopped a task: %v", canceled)
	}
}

// TestAnEmptyTokenRefusesEverything: subtle.ConstantTimeCompare of two
// empty values is 1, so a dashboard given no token must refuse before it
// compares: an empty Bearer, the cookie of the empty token (anyone can
// compute it) and a login with the empty token all get 401.
func TestAnEmptyTokenRefusesEverything(t *testing.T) {
	f := newFleet(t, true)
	id := f.ticker(t, "keeps running", 50*time.Millisecond)
	dash := dashboard.New(t.Context(), dashboard.Options{Store: f.store, Token: "", Cancel: func(context.Context, string, string, string, string) (_ journal.Task, _ error) {
		t.Error("a request reached Cancel with no token configured")
		return
	}})
	defer dash.Close()
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", dash))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := srv.Client()
	for _, cred := range []credential{bearerOf(""), cookieOf("of the empty token", loginCookie("")), cookieOf("empty", ""), {"nothing", func(*http.Request) {}}} {
		if ev, cancel := try(t, c, srv.URL, f.session, id, cred); ev != http.StatusUnauthorized || cancel != http.StatusUnauthorized {
			t.Errorf("%s: /ui/events %d, /ui/api/cancel %d; want 401 and 401", cred.name, ev, cancel)
		}
	}
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.PostForm(srv.URL+"/ui/login", url.Values{"token": {""}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) > 0 {
		t.Errorf("login with the empty token: %d, cookies %v; want 401 and none", resp.StatusCode, resp.Cookies())
	}
}
