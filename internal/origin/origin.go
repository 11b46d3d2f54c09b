// Package origin holds the one Origin-header policy of offstage's HTTP
// faces (the MCP endpoint and the dashboard): the defence against DNS
// rebinding, where a page on another site makes a browser send requests
// to a server on loopback.
package origin

import (
	"net"
	"net/url"
	"slices"
	"strings"
)

// Allowed says whether a request's Origin header names a loopback origin
// (http or https on localhost, 127.0.0.0/8 or ::1) or one of allowed,
// compared without a trailing slash. A request without an Origin header
// is not a browser's cross-site request; callers let it through before
// asking.
func Allowed(origin string, allowed []string) bool {
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
