package tools

import (
	"bytes"
	"os"
	"slices"
	"strconv"
)

// listeningPorts returns the TCP ports anything listens on in this
// process's network namespace, sorted: whoever holds them, offstage's
// tasks or not (/proc/net/tcp and tcp6). proc.Process.Ports reads the
// same tables for one command's sockets.
func listeningPorts() []int {
	var ports []int
	for _, file := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile("/proc/net/" + file)
		ports = appendListening(ports, b)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// appendListening adds the ports of the listening sockets of a
// /proc/net/tcp table.
func appendListening(ports []int, table []byte) []int {
	for i, line := range bytes.Split(table, []byte{'\n'}) {
		f := bytes.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
		if i == 0 || len(f) < 10 || string(f[3]) != tcpListen {
			continue
		}
		_, hexPort, ok := bytes.Cut(f[1], []byte{':'})
		if port, err := strconv.ParseUint(string(hexPort), 16, 16); ok && err == nil {
			ports = append(ports, int(port))
		}
	}
	return ports
}
