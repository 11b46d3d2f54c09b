package guesses

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net/netip"
	"os"
	"strconv"
)

// socketOwner returns the uid that owns the TCP socket connected from
// client to server, in this process's network namespace: the one
// /proc/net/tcp (or tcp6) lists with client as its local address and
// server as its remote one.
func socketOwner(client, server netip.AddrPort) (uid int, ok bool) {
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		uid, ok = ownerIn(f, client, server)
		f.Close()
		if ok {
			return uid, true
		}
	}
	return 0, false
}

// ownerIn reads a /proc/net/tcp table for the socket from client to
// server: "sl local_address rem_address st … uid …", each address the
// hex of its bytes in 32-bit words of the host's order, a colon and the
// hex port.
func ownerIn(r io.Reader, client, server netip.AddrPort) (uid int, ok bool) {
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 8 {
			continue
		}
		local, lok := procAddr(f[1])
		remote, rok := procAddr(f[2])
		if !lok || !rok || local != client || remote != server {
			continue
		}
		n, err := strconv.Atoi(string(f[7]))
		return n, err == nil
	}
	return 0, false
}

// procAddr parses an address as /proc/net/tcp writes it, "0100007F:1F90"
// (127.0.0.1:8080 on a little-endian host), unmapped.
func procAddr(b []byte) (netip.AddrPort, bool) {
	hexIP, hexPort, found := bytes.Cut(b, []byte(":"))
	if !found || len(hexIP) != 8 && len(hexIP) != 32 {
		return netip.AddrPort{}, false
	}
	var raw [16]byte
	words := raw[:len(hexIP)/2]
	if _, err := hex.Decode(words, hexIP); err != nil {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(words); i += 4 { // each word in the host's order
		binary.NativeEndian.PutUint32(words[i:], binary.BigEndian.Uint32(words[i:]))
	}
	port, err := strconv.ParseUint(string(hexPort), 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addr, _ := netip.AddrFromSlice(words)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}
