package acpserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// TestEditorHeadersNeverReachASecondHost pins issue 34's tenth item: the
// headers an editor gives an HTTP MCP server (an API key) go to that
// server's host only; a redirect to another host (here another port) is
// followed without them.
func TestEditorHeadersNeverReachASecondHost(t *testing.T) {
	seen := make(chan http.Header, 2)
	second := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
	}))
	defer second.Close()
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		http.Redirect(w, r, second.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer first.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	c := headerClient(base, first.URL+"/mcp", []acp.HttpHeader{{Name: "Authorization", Value: "Bearer editor-key"}, {Name: "X-Api-Key", Value: "k3y"}})
	resp, err := c.Get(first.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := <-seen; h.Get("Authorization") != "Bearer editor-key" || h.Get("X-Api-Key") != "k3y" {
		t.Errorf("the editor's server got %v, want its headers", h)
	}
	if h := <-seen; h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("the host it redirected to got Authorization %q, X-Api-Key %q; want neither", h.Get("Authorization"), h.Get("X-Api-Key"))
	}
}
