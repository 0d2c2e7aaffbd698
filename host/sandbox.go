package host

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// SandboxOptions say how the host confines the processes it starts for bundles: tool calls,
// version checks, setup and login commands.
type SandboxOptions struct {
	// Off runs bundle processes without the kernel sandbox. Only an operator sets it (clihostd
	// --sandbox=off); every envelope then carries SandboxOffWarning. Nothing a caller sends can set it.
	Off bool
	// ExtraDeny are absolute paths masked in every sandbox, such as clihostd's control socket and
	// state directory.
	ExtraDeny []string
	// AgentUID and AgentGID are who bundle processes run as when the host runs as root and no
	// control-socket caller other than root asked (MCP agents, root callers, the host's own work);
	// clihost never runs a CLI as root. Zero: the workspace's owner when that is not root, else
	// nobody. See identityFor.
	AgentUID, AgentGID int
	// StateDir is the daemon's state directory (clihostd --state; clihostctl's default one when it
	// calls in-process): a uid without a usable home of its own gets <StateDir>/homes/<uid>, and no
	// home may overlap it. Empty: such a uid's home is /nonexistent.
	StateDir string
	// Trusted are absolute files or folders outside StateDir that the host later runs or trusts,
	// such as clihostd's approval policy and its own folder: a workspace that is, holds or lies in
	// one is refused (OwnedOverlap).
	Trusted []string
	// AdmitNets are address ranges egress may reach although they are loopback, private,
	// link-local or metadata addresses (which are refused otherwise): an operator setting, for test
	// hosts on a private network.
	AdmitNets []netip.Prefix
	// EgressPorts are the destination ports a bundle's egress hosts may be reached on; empty means
	// DefaultEgressPorts.
	EgressPorts []int
	// EgressMaxConns caps the egress connections one call holds at once, all its proxies and its
	// transparent capture together (clihostd --egress-max-conns); below 1 means
	// egress.DefaultMaxConns.
	EgressMaxConns int
	// Limits are the operator's per-call resource limits (clihostd --limit-*): a zero field takes
	// DefaultLimits's value, a negative one means no limit. Bundles and tools may narrow them.
	Limits isolation.Limits
	// Pool, when set, starts tools' processes in sandbox inits started ahead of their calls
	// (nsinit.Pool): a daemon keeps one for its lifetime. Nil starts every sandbox when it is needed.
	Pool *nsinit.Pool
}

// DefaultEgressPorts are HTTP, HTTPS and SSH (git).
var DefaultEgressPorts = []int{80, 443, 22}

// egressPolicy returns the egress policy of a call whose compiled policy is pol, logging its
// decisions to the audit log under callID, aggregated and capped per call (see auditLog.egress),
// with secrets (the values the process received) redacted from the names and reasons; nil when
// the bundle declares no egress (no network).
func (h *Host) egressPolicy(pol *sandbox.Policy, cliID, callID string, secrets ...string) *egress.Policy {
	if pol == nil || len(pol.Egress) == 0 {
		return nil
	}
	r := newRedactor(secrets) // a name looked up can be made of a secret: the classic DNS way out
	ports := h.opts.Sandbox.EgressPorts
	if len(ports) == 0 {
		ports = DefaultEgressPorts
	}
	return &egress.Policy{Allow: pol.Egress, Ports: ports, AdmitNets: h.opts.Sandbox.AdmitNets, MaxConns: h.opts.Sandbox.EgressMaxConns,
		Log: func(d egress.Decision) {
			rec := EgressDecision{Type: "cli.egress", CallID: callID, CLIID: cliID, Host: r.text(d.Host), Port: d.Port,
				Allowed: d.Allowed, Reason: r.text(d.Reason), Via: d.Via, TS: timestamp(time.Now())}
			if d.Allowed && d.Addr.IsValid() {
				rec.Addr = d.Addr.String()
			}
			h.audit.egress(callID, rec)
		},
		End: func() { h.audit.sessionEnd(callID) }}
}

// SandboxOffWarning is added to every envelope when the operator turned the sandbox off.
const SandboxOffWarning = "the kernel sandbox is OFF on this host (clihostd --sandbox=off): this CLI ran with the full rights of " +
	"the host user, without the bundle's filesystem, exec and network limits"

// probeOnce caches whether this host can build the sandbox at all.
var probeOnce = sync.OnceValue(nsinit.Check)

// SandboxAvailable reports whether this host can build the kernel sandbox: nil, or an error naming
// the missing piece. The kernel is probed once per process.
func SandboxAvailable() error { return probeOnce() }

// confine compiles the sandbox of one process of bundle b (tool nil: the bundle's own commands)
// running bin in c's workspace (absolute) for c, and returns the plan runner needs, with HOME set
// in *env to the home ~ stands for unless the manifest set it (and the workspace as git's
// safe.directory when the process's uid does not own it), and the policy (for Sweep). The ~ and
// workspace write roots the bundle declares as subtrees (~/.gemini/**, ./out/**) are created first
// when missing (makeWriteRoots, makeWorkspaceRoots): the sandbox can only grant a folder that exists. It returns a
// nil plan when the operator turned the sandbox off; workspace_denied when the uid the process
// would run as may not use the workspace, or the workspace holds or lies in the state directory or
// the folder of the host's executable (OwnedOverlap); sandbox_unavailable when this host cannot build the
// sandbox or the bundle's sandbox cannot be enforced here.
func (h *Host) confine(b *manifest.Bundle, tool *manifest.ToolEntry, bin string, c Caller, env *[]string) (*isolation.Plan, *sandbox.Policy, *Error) {
	plan, pol, e := h.confineFor(b, tool, bin, c, env, false)
	if e == nil && pol != nil {
		if e = takeSnapshot(b, pol); e != nil {
			return nil, nil, e
		}
	}
	return plan, pol, e
}

// takeSnapshot applies the git rule before a call: it records the writable roots' git metadata,
// so that sweep can judge what the call changes (a root too large to check refuses the call: it
// could not be checked after).
func takeSnapshot(b *manifest.Bundle, pol *sandbox.Policy) *Error {
	if err := pol.SnapshotGit(0); err != nil {
		return sandboxError(b, err)
	}
	return nil
}

// snapshot is takeSnapshot on a goroutine of its own, so that a call's sandbox is built while it
// runs: the call's program starts once it is taken (gate, runner.Command.Gate).
type snapshot struct {
	done chan struct{}
	err  *Error // set before done is closed
}

// snapshotBeside starts takeSnapshot of pol (nil: none to take, the sandbox is off).
func snapshotBeside(b *manifest.Bundle, pol *sandbox.Policy) *snapshot {
	s := &snapshot{done: make(chan struct{})}
	if pol == nil {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		s.err = takeSnapshot(b, pol)
	}()
	return s
}

// wait returns once the snapshot is taken, with the error that refuses the call.
func (s *snapshot) wait() *Error {
	<-s.done
	return s.err
}

// gate is the runner's Command.Gate: nil once the snapshot is taken, else why the call is refused
// (wait has the call's error).
func (s *snapshot) gate() error {
	if e := s.wait(); e != nil {
		return errors.New(e.Message)
	}
	return nil
}

// confineFor is confine; dry (a dry run, DryRun) changes nothing on disk: the ~ write roots are not
// created (a missing one is left out of the policy, as the sandbox would leave it out had it not
// been created) and the git rule's snapshot is not taken.
func (h *Host) confineFor(b *manifest.Bundle, tool *manifest.ToolEntry, bin string, c Caller, env *[]string, dry bool) (*isolation.Plan, *sandbox.Policy, *Error) {
	ws := c.Workspace
	if h.opts.Sandbox.Off {
		return nil, nil, nil
	}
	if err := probeOnce(); err != nil {
		return nil, nil, &Error{Code: errcode.SandboxUnavailable, Message: err.Error(),
			Hint: "run clihost on Linux ≥ 6.2 with Landlock enabled (lsm=landlock), as root or with unprivileged user namespaces; an operator may run clihostd --sandbox=off at their own risk"}
	}
	who, idErr := h.identityFor(ws, c.Peer, bin) // on a root host, also whether that uid may run bin
	if idErr != nil {
		return nil, nil, idErr
	}
	// The host's own work may run in the kept home of the uid it runs as (checkDir), which lies in
	// the state directory; no caller names that workspace (clihostd refuses it first).
	if owned := OwnedOverlap(ws, h.opts.Sandbox.StateDir, h.opts.Sandbox.Trusted...); owned != nil && !h.ownKeptHome(ws, who.home) {
		return nil, nil, owned
	}
	if !dry {
		if err := makeWriteRoots(who.home, who.id, homeWriteRoots(b, tool), os.Geteuid() == 0); err != nil {
			return nil, nil, &Error{Code: errcode.Internal, Message: err.Error(), Hint: "check the home " + who.home + " of uid " + strconv.Itoa(who.id.UID)}
		}
	}
	if err := makeWorkspaceRoots(ws, who.id, workspaceWriteRoots(b, tool), os.Geteuid() == 0); err != nil {
		return nil, nil, &Error{Code: errcode.Internal, Message: err.Error(), Hint: "check the workspace's folders and their owners"}
	}
	pathVar, _ := h.opts.LookupEnv("PATH")
	pol, err := h.opts.Policies.Compile(sandbox.Input{Bundle: b, Tool: tool, Binary: bin, Workspace: ws, Home: who.home,
		PATH: pathVar, LookupEnv: h.opts.LookupEnv, ExtraDeny: h.opts.Sandbox.ExtraDeny, Protect: append(ProtectedPaths(h.reg.Bundles(), bin), h.reg.Dirs()...)})
	if err != nil {
		return nil, nil, sandboxError(b, err)
	}
	if c.Peer != nil && pol.Workspace() != filepath.Clean(ws) {
		return nil, nil, workspaceChanged(ws, pol.Workspace())
	}
	if e := writableBy(pol.Writable, who.id); e != nil {
		return nil, nil, e
	}
	plan, _ := pol.Plan(who.id)
	plan.NetworkKey = callerKey(c) // the zygote may reuse a network namespace this caller's calls left clean
	plan.Limits = h.limitsFor(b, tool)
	plan.Umask = sharedUmask(ws)
	*env = withHome(*env, who.home, h.opts.LookupEnv)
	*env = safeDirectory(*env, ws, who.id.UID)
	if !hasVar(*env, "PATH") {
		// `#!/usr/bin/env node` scripts (npm's CLIs) and CLIs that run their exec.spawn helpers
		// by name look them up on PATH; Landlock decides what may actually run.
		*env = append(*env, "PATH="+absolutePath(pathVar))
	}
	return &plan, pol, nil
}

// sharedUmask is the umask of a process in workspace ws: 0o007 when ws is shared with its group
// (the group may read, write and search it, as the unit's clihost:clihost 2770 workspace), so that
// what a CLI writes there stays usable by the group's members whatever the daemon's own umask
// (the unit's 0077); else 0, the daemon's.
func sharedUmask(ws string) int {
	if st, err := os.Stat(ws); err == nil && st.IsDir() && st.Mode().Perm()&0o070 == 0o070 {
		return 0o007
	}
	return 0
}

// withHome gives env the HOME ~ stands for: home, unless the manifest set HOME to a value of its
// own. A HOME that env.pass copied from the host is the host's home, not the process's (on a root
// host root's, which the uid the process runs as cannot read: gh then fails reading
// /root/.config/gh), so it is replaced too.
func withHome(env []string, home string, lookup func(string) (string, bool)) []string {
	hostHome, _ := lookup("HOME")
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			if v == hostHome && v != home {
				env[i] = "HOME=" + home
			}
			return env
		}
	}
	return append(env, "HOME="+home)
}

// ProtectedPaths are the paths no call may change although a workspace may hold them
// (sandbox.Input.Protect): the folder of every bundle of bundles loaded from disk (its manifests
// and vendored binaries, which later calls read back: a tool rewriting its own CLI.md would choose
// its next sandbox), every vendored binary (wherever its install entry points) and bin, the binary
// the call runs. The embedded catalog has no folder; the daemon's state directory is masked
// (SandboxOptions.ExtraDeny). confine adds the folders bundles are loaded from (registry Dirs): a
// call adding a bundle there would choose that bundle's sandbox.
func ProtectedPaths(bundles []*manifest.Bundle, bin string) []string {
	out := []string{bin}
	for _, b := range bundles {
		if b.CLI == nil || !filepath.IsAbs(b.OSDir) {
			continue
		}
		out = append(out, b.OSDir)
		for _, m := range b.CLI.Install {
			if m.Method == manifest.MethodVendored {
				out = append(out, filepath.Join(b.OSDir, filepath.FromSlash(m.Path)))
			}
		}
	}
	return out
}

// maxSweepWarnings bounds the warnings one sweep reports (and so the cli.sweep audit lines of one
// process): a call that plants thousands of repositories gets them all neutralised, and a count.
const maxSweepWarnings = 32

// sweep removes what a finished call created at deny paths the kernel could not mask and
// neutralises the git metadata it wrote that would make git run a program (see sandbox.Sweep),
// and returns the warnings the caller must see, at most maxSweepWarnings and a count of the rest.
func sweep(pol *sandbox.Policy) []string {
	if pol == nil {
		return nil
	}
	removed, git, err := sandbox.Sweep(pol)
	var out []string
	for _, p := range removed {
		out = append(out, fmt.Sprintf("removed %s, which the CLI created: it is a path your own tools would run later (editor tasks, git hooks), outside the sandbox", p))
	}
	for _, f := range git {
		out = append(out, gitWarning(f))
	}
	if err != nil {
		out = append(out, "could not check the paths the sandbox protects after the call: "+err.Error())
	}
	if len(out) > maxSweepWarnings {
		more := len(out) - maxSweepWarnings
		out = append(out[:maxSweepWarnings], fmt.Sprintf("… and %d more files the CLI wrote were removed or moved aside (*.clihost-quarantined*)", more))
	}
	return out
}

// gitWarning describes one file the git rule neutralised.
func gitWarning(f sandbox.GitFinding) string {
	if f.Action == "rewritten" {
		msg := fmt.Sprintf("rewrote the git config %s, which the CLI wrote, without ", f.Path)
		if len(f.Dropped) > 0 {
			msg += strings.Join(f.Dropped, ", ")
		} else {
			msg += "its unusual syntax"
		}
		return msg + fmt.Sprintf(" (git would run programs named there); the original is in %s", f.Moved)
	}
	if f.Action == "made readable" {
		return fmt.Sprintf("gave the directory %s back its owner's read, write and search permission (u+rwx): %s", f.Path, f.Why)
	}
	if f.Action == "restored" {
		return fmt.Sprintf("moved %s, which the CLI changed, to %s and put back what was there before the call: %s", f.Path, f.Moved, f.Why)
	}
	return fmt.Sprintf("moved %s, which the CLI wrote, to %s: %s", f.Path, f.Moved, f.Why)
}

// sandboxError is the envelope error of a sandbox that could not be compiled or built.
func sandboxError(b *manifest.Bundle, err error) *Error {
	msg := err.Error()
	if !errors.Is(err, nsinit.ErrUnavailable) {
		msg = nsinit.ErrUnavailable.Error() + ": " + msg
	}
	hint := "the call was refused, not run; check the bundle's sandbox block (clihostctl inspect " + b.ID() + ") and that the paths it needs exist"
	if nsinit.MayHaveRun(err) {
		// Not refused: the host lost the sandbox while (or after) its program ran.
		hint = "the command may have run, part of the way, before the sandbox was lost; a sandbox blocked in the kernel (a file system that does not answer: FUSE, NFS) is left to end on its own, and on clihostd it counts among your calls in flight until it does (--max-calls-per-caller); check the file systems the tool reads"
	}
	if strings.Contains(msg, nsinit.ErrSuidDumpable.Error()) { // the sandbox's report carries its text
		hint = "the call was refused, not run: this root host's fs.suid_dumpable is 1 (a kernel debugging setting); set it to 0 or 2 (sysctl -w fs.suid_dumpable=0, and in /etc/sysctl.d to keep it) and call again"
	}
	return &Error{Code: errcode.SandboxUnavailable, Message: msg, Hint: hint}
}

// absolutePath keeps the absolute entries of a PATH value (a relative one would resolve against the
// workspace); with none left it is the usual system path.
func absolutePath(pathVar string) string {
	var dirs []string
	for _, d := range filepath.SplitList(pathVar) {
		if filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	if len(dirs) == 0 {
		return "/usr/local/bin:/usr/bin:/bin"
	}
	return strings.Join(dirs, string(filepath.ListSeparator))
}

// hasVar reports whether env (KEY=VALUE) sets name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}
