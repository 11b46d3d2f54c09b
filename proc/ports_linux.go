package proc

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ports is Ports on Linux.
func (p *Process) ports() []int {
	inodes := map[string]bool{}
	for _, pid := range p.task.Pids() {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			link, err := os.Readlink(dir + e.Name())
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(link, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	var ports []int
	net := "/proc/" + strconv.Itoa(p.pid) + "/net/"
	for _, file := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(net + file)
		ports = appendListening(ports, b, inodes)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// appendListening adds the ports of the listening sockets of a
// /proc/net/tcp table whose inode is in inodes. (package tools has a copy
// that takes any inode, for the ports anything listens on.)
func appendListening(ports []int, table []byte, inodes map[string]bool) []int {
	for i, line := range bytes.Split(table, []byte{'\n'}) {
		f := bytes.Fields(line)
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
		if i == 0 || len(f) < 10 || string(f[3]) != tcpListen || !inodes[string(f[9])] {
			continue
		}
		_, hexPort, ok := bytes.Cut(f[1], []byte{':'})
		if port, err := strconv.ParseUint(string(hexPort), 16, 16); ok && err == nil {
			ports = append(ports, int(port))
		}
	}
	return ports
}
