package proc

// ThroughStep says whether p, sandboxed, was started through the step
// rather than forked from a fenced thread.
func (p *Process) ThroughStep() bool { return p.sandbox != nil && !p.sandbox.thread }
