package proc

// Ports returns the TCP ports the command's processes listen on, sorted,
// nil if none or once it is done: the listening sockets of
// /proc/net/tcp and tcp6 (in the leader's network namespace) whose inode
// one of its processes holds as a descriptor. It costs a readlink per
// descriptor of each of its processes. On systems without /proc
// (macOS), none.
func (p *Process) Ports() []int {
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.ports()
}
