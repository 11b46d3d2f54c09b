package guesses

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// TestOwnerIn reads a socket's owner from tables as the kernel writes
// them, an IPv4 one and an IPv6 one, on this host's byte order.
func TestOwnerIn(t *testing.T) {
	v4 := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 47 1 0 100 0 0 10 0\n" +
		"   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 48 1 0 100 0 0 10 0\n"
	v6 := "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 00000000000000000000000001000000:9C41 00000000000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 49 1 0 100 0 0 10 0\n"
	if !littleEndian() {
		v4 = strings.ReplaceAll(v4, "0100007F", "7F000001")
		v6 = strings.ReplaceAll(v6, "00000000000000000000000001000000", "00000000000000000000000000000001")
	}
	for _, c := range []struct {
		table          string
		client, server string
		uid            int
		ok             bool
	}{
		{v4, "127.0.0.1:40000", "127.0.0.1:8080", 1000, true},
		{v4, "[::ffff:127.0.0.1]:40000", "127.0.0.1:8080", 1000, true}, // mapped, as a dual-stack listener sees it
		{v4, "127.0.0.1:40001", "127.0.0.1:8080", 0, false},
		{v4, "127.0.0.1:8080", "0.0.0.0:0", 0, true}, // the listener itself (root's)
		{v6, "[::1]:40001", "[::1]:8080", 1001, true},
		{v6, "[::1]:40000", "[::1]:8080", 0, false},
		{"garbage\n\n1: zz:zz yy:yy 01 a b c 7\n", "127.0.0.1:40000", "127.0.0.1:8080", 0, false},
	} {
		uid, ok := ownerIn(strings.NewReader(c.table), netip.MustParseAddrPort(c.client), netip.MustParseAddrPort(c.server))
		if uid != c.uid || ok != c.ok {
			t.Errorf("ownerIn(%s → %s) = %d, %v; want %d, %v", c.client, c.server, uid, ok, c.uid, c.ok)
		}
	}
}

func littleEndian() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 1
}

// TestKeyOverLoopback: a request over loopback counts under its host and
// the uid of the process that connected (this one); one from elsewhere
// under its host alone.
func TestKeyOverLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, Key(r)) })}
	go srv.Serve(ln)
	defer srv.Close()
	res, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if want := fmt.Sprintf("127.0.0.1 (uid %d)", os.Getuid()); string(body) != want {
		t.Errorf("Key over loopback = %q, want %q", body, want)
	}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.1:40000"
	if got := Key(r); got != "10.0.0.1" {
		t.Errorf("Key from 10.0.0.1 = %q", got)
	}
}
