package mcpserver

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPHandler serves MCP's streamable HTTP transport. Running commands
// over HTTP is remote command execution by design, so it is locked down:
//
//   - every request must carry "Authorization: Bearer TOKEN" (compared in
//     constant time); others get 401 and start nothing;
//   - a request with an Origin header must come from a loopback origin
//     (http://localhost, 127.0.0.1, [::1], any port) or one of
//     allowedOrigins ("https://example.com"); others get 403. This is the
//     DNS-rebinding defence the MCP specification asks for.
//
// Binding to loopback is the caller's job (the CLI does it unless told
// otherwise). Idle sessions end after an hour.
func (s *Service) HTTPHandler(token string, allowedOrigins []string) http.Handler {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" {
			return s.probe // an existing session: the SDK finds its server itself
		}
		return s.Server()
	}, &mcp.StreamableHTTPOptions{Logger: s.cfg.Logger, SessionTimeout: time.Hour})
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="offstage"`)
			http.Error(w, "401 Unauthorized: send Authorization: Bearer <token> (see the token offstage mcp printed, or OFFSTAGE_MCP_TOKEN)", http.StatusUnauthorized)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !originAllowed(origin, allowedOrigins) {
			http.Error(w, "403 Forbidden: origin "+origin+" is not allowed", http.StatusForbidden)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})
}

func originAllowed(origin string, allowed []string) bool {
	if slices.Contains(allowed, strings.TrimSuffix(origin, "/")) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
