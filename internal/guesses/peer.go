package guesses

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
)

// Key is what the wrong tokens of r count under: the host it came from,
// and for a connection over loopback, which every user of the machine
// shares, the user that owns the client's socket too, where the system
// says (Linux), so that one local user's wrong tokens do not lock another
// user's client out (an outsider's finding: ten wrong tokens from any
// local user refused the right token of every other for a minute).
func Key(r *http.Request) string {
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return r.RemoteAddr
		}
		return host
	}
	host := client.Addr().Unmap().String()
	if !client.Addr().Unmap().IsLoopback() {
		return host
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if local == nil {
		return host
	}
	if uid, ok := socketOwner(client, local.AddrPort()); ok {
		return host + " (uid " + strconv.Itoa(uid) + ")"
	}
	return host
}
