package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/offstage/offstage/internal/sandboxstep"
)

// sandboxEnv makes the binary re-executed the sandbox step (package
// sandboxstep, whose init function takes over).
const sandboxEnv = sandboxstep.Env

type stepSpec = sandboxstep.Spec

// sandboxHost is what this host offers a sandbox, found once.
type sandboxHost struct {
	abi      int   // Landlock ABI; 0 without Landlock
	abiErr   error // why there is none
	netnsErr error // why no network namespace can be made; nil if one can
}

var sandboxDetect struct {
	once sync.Once
	host sandboxHost
}

// detectSandbox asks the kernel for its Landlock ABI and starts the step
// once, in a new network namespace, to see that one can be made and its
// loopback brought up (unprivileged user namespaces may be refused by
// sysctl, AppArmor or a container's seccomp profile).
func detectSandbox() sandboxHost {
	sandboxDetect.once.Do(func() {
		h := &sandboxDetect.host
		h.abi, h.abiErr = ll.LandlockGetABIVersion()
		if h.abiErr != nil {
			h.abi = 0
			if errors.Is(h.abiErr, syscall.ENOSYS) || errors.Is(h.abiErr, syscall.EOPNOTSUPP) {
				h.abiErr = errors.New("this kernel has no Landlock, or it is not enabled at boot (lsm=landlock)")
			}
		}
		cmd := exec.Command("/proc/self/exe")
		cmd.Args = []string{"offstage-sandbox-probe"}
		cmd.Env = []string{sandboxEnv + "=" + sandboxstep.Probe}
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		netnsAttr(cmd.SysProcAttr)
		if out, err := cmd.CombinedOutput(); err != nil {
			msg := strings.TrimSpace(string(out))
			if msg == "" {
				msg = err.Error()
			}
			h.netnsErr = errors.New(msg)
		}
	})
	return sandboxDetect.host
}

// netnsAttr makes sys clone the child into a network namespace of its
// own: directly as root; otherwise inside a user namespace of its own,
// where the user keeps its uid and gid and, until the step drops it,
// the capability to bring lo up.
func netnsAttr(sys *syscall.SysProcAttr) {
	if os.Geteuid() == 0 {
		sys.Cloneflags |= syscall.CLONE_NEWNET
		return
	}
	const capNetAdmin = 12
	sys.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}}
	sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}}
	sys.AmbientCaps = append(sys.AmbientCaps, capNetAdmin)
}

// sandboxSetup is a sandbox planned for one Start.
type sandboxSetup struct {
	status SandboxStatus
	spec   stepSpec
	tmp    string // the command's own temporary directory, removed after it
}

// prepareSandbox plans cfg.Sandbox on this host and makes the command's
// temporary directory; a strict sandbox that cannot hold fails here.
// The step keeps descriptors 0 to the lifeline's, and no more.
var _ [lifelineFD + 1 - sandboxstep.KeepFDs]struct{}
var _ [sandboxstep.KeepFDs - lifelineFD - 1]struct{}

func prepareSandbox(cfg Config) (*sandboxSetup, error) {
	s := cfg.Sandbox
	if !s.On() {
		return nil, nil
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ws := s.Workspace
	if ws == "" && s.Mode == SandboxWorkspaceWrite {
		if ws = cfg.Dir; ws == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("proc: sandbox workspace: %w", err)
			}
			ws = wd
		}
	}
	status, spec, err := planSandbox(s, ws, detectSandbox())
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "offstage-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("proc: sandbox temporary directory: %w", err)
	}
	status.Writable = append([]string{tmp}, status.Writable...)
	spec.Write = append([]string{tmp}, spec.Write...)
	return &sandboxSetup{status: status, spec: spec, tmp: tmp}, nil
}

// CheckSandbox says what s enforces on this host, and fails as Start
// would where s is strict and a rule its mode needs cannot hold: a
// program checks its flags with it at start-up. Writable does not list
// the per-command temporary directory, which Start makes.
func CheckSandbox(s Sandbox) (SandboxStatus, error) {
	if !s.On() {
		return SandboxStatus{Mode: SandboxOff}, nil
	}
	if err := s.Validate(); err != nil {
		return SandboxStatus{}, err
	}
	if s.Workspace == "" && s.Mode == SandboxWorkspaceWrite {
		wd, err := os.Getwd()
		if err != nil {
			return SandboxStatus{}, fmt.Errorf("proc: sandbox workspace: %w", err)
		}
		s.Workspace = wd
	}
	st, _, err := planSandbox(s, s.Workspace, detectSandbox())
	if err == nil {
		st.Writable = append([]string{"$TMPDIR (its own)"}, st.Writable...)
	}
	return st, err
}

// planSandbox decides what holds of s on host h: the status told to the
// model and the step's rules. A strict sandbox missing a rule fails,
// saying what is missing.
func planSandbox(s Sandbox, workspace string, h sandboxHost) (SandboxStatus, stepSpec, error) {
	st := SandboxStatus{Mode: s.Mode, Network: s.Network}
	var sp stepSpec
	var missing []string
	abi := strconv.Itoa(h.abi)
	if s.Mode == SandboxWorkspaceWrite {
		for _, d := range append([]string{workspace}, s.Write...) {
			if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
				return st, sp, fmt.Errorf("proc: sandbox: %s is not a directory that exists; create it or leave it out of the writable places", d)
			}
			sp.Write = append(sp.Write, d)
		}
		st.Writable = append(st.Writable, sp.Write...)
	}
	switch {
	case h.abi == 0:
		missing = append(missing, fmt.Sprintf("the file system fence: no Landlock (%v)", h.abiErr))
	case h.abi < 3:
		st.Enforced = append(st.Enforced, "file system: Landlock ABI "+abi)
		missing = append(missing, "truncating files outside the fence (Landlock ABI 3 needed, have "+abi+")")
	default:
		st.Enforced = append(st.Enforced, "file system: Landlock ABI "+abi)
	}
	if !s.Network {
		switch {
		case h.netnsErr == nil:
			sp.Loopback = true
			st.Enforced = append(st.Enforced, "network: own network namespace (loopback only)")
		case h.abi >= 10:
			sp.NetTCP = true
			st.Enforced = append(st.Enforced, "network: Landlock TCP and UDP rules (no network namespace: "+h.netnsErr.Error()+")")
		case h.abi >= 4:
			sp.NetTCP = true
			st.Enforced = append(st.Enforced, "network: Landlock TCP rules")
			missing = append(missing, "cutting UDP and DNS (no network namespace: "+h.netnsErr.Error()+"; Landlock cuts UDP from ABI 10, have "+abi+")")
		default:
			missing = append(missing, "the network fence (no network namespace: "+h.netnsErr.Error()+"; Landlock cuts TCP from ABI 4, have "+abi+")")
		}
	}
	switch {
	case h.abi >= 6:
		sp.Abstract = !s.Network
		st.Enforced = append(st.Enforced, "signals and ptrace: Landlock scope")
	case h.abi >= 1:
		st.Gaps = append(st.Gaps, "signals: the command can signal processes of the same user outside it (Landlock ABI 6 scopes signals, have "+abi+"); ptrace is fenced")
	}
	if len(missing) > 0 && !s.BestEffort {
		return st, sp, fmt.Errorf("proc: the %s sandbox cannot hold on this host: it lacks %s; run with best effort (offstage: --sandbox-best-effort) to start anyway and be told what is not enforced, or turn the sandbox off", s.Mode, strings.Join(missing, "; and "))
	}
	st.NotEnforced = missing
	return st, sp, nil
}

// apply makes cmd start through the step, in a network namespace of its
// own when the network is off and one can be made.
func (sb *sandboxSetup) apply(cmd *exec.Cmd) error {
	spec, err := json.Marshal(sb.spec)
	if err != nil {
		return fmt.Errorf("proc: sandbox: %w", err)
	}
	if cmd.Err == nil { // else Start reports the lookup's failure
		cmd.Args = append([]string{"offstage-sandbox", cmd.Path}, cmd.Args...)
		cmd.Path = "/proc/self/exe"
	}
	cmd.Env = append(setEnv(cmd.Env, "TMPDIR", sb.tmp), sandboxEnv+"="+string(spec))
	if sb.spec.Loopback {
		netnsAttr(cmd.SysProcAttr)
	}
	return nil
}

// setEnv returns env with name set to value, replacing any earlier value.
func setEnv(env []string, name, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

func (sb *sandboxSetup) remove() {
	if sb != nil {
		os.RemoveAll(sb.tmp)
	}
}
