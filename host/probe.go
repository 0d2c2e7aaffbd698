package host

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/clihost/clihost/sandboxprobe"
)

// Probe states (package sandboxprobe's).
const (
	ProbeWorks       = sandboxprobe.Works
	ProbeOff         = sandboxprobe.Off
	ProbeUnavailable = sandboxprobe.Unavailable
)

// ProbeResult is what starting one real sandboxed process found (package sandboxprobe defines
// it, for the control API too).
type ProbeResult = sandboxprobe.Result

// probeTimeout bounds the probe's process; it exits at once when it runs at all.
const probeTimeout = 10 * time.Second

// probeHint is the hint of a probe that failed for a reason of the host rather than of a bundle.
const probeHint = "calls are refused until this is fixed: run clihostctl doctor; the sandbox needs Linux ≥ 6.2 with Landlock, " +
	"seccomp, and root or unprivileged user namespaces (see docs/operations.md, \"The kernel sandbox\"); an operator may run " +
	"clihostd --sandbox=off at their own risk"

// probeBundle is the bundle the probe runs as: it may read the workspace, as a tool such as jq
// does, and nothing else beyond the runtime's files; no network. One value, never changed: the
// policies kept between calls (Options.Policies) know a bundle by its pointer.
var probeBundle = &manifest.Bundle{CLI: &manifest.CLI{ID: "clihost-probe", Version: "1.0.0", Bin: "test",
	Sandbox: manifest.Sandbox{FS: &manifest.FS{Read: []string{"./**"}, Write: []string{}}}}}

// probeArgs make test(1) check that the process may read and search its working directory, the
// workspace: access(2) asks the permission bits and ACLs for the process's uid (Landlock does not
// take part), so a workspace the call's identity cannot use fails the probe as it fails calls.
var probeArgs = []string{"-r", ".", "-a", "-x", "."}

// Probe starts one trivial program (test -r . -a -x .) in workspace ws through the path every call
// takes: the identity a call in ws runs as, the sandbox compiled and planned as for a call
// (namespaces, masks, Landlock, seccomp, the uid change, the per-call limits, no network), started
// by the runner. It reports the state and, when it did not run, the exact error a call would get.
func (h *Host) Probe(ctx context.Context, ws string) (res ProbeResult) {
	start := time.Now()
	res = ProbeResult{State: ProbeUnavailable, Workspace: ws, UserNS: os.Geteuid() != 0, Checked: start.UTC(),
		Limits: h.LimitMechanisms(nil)}
	defer func() { res.Took = time.Since(start) }()
	if h.opts.Sandbox.Off {
		res.State = ProbeOff
		return res
	}
	id := h.runAs(ws, nil)
	res.UID, res.GID, res.User = id.UID, id.GID, userName(id.UID)
	dir := ws
	if _, e := h.identityFor(ws, nil, ""); e != nil && e.Code == errcode.WorkspaceDenied {
		// The sandbox may work although this identity may not use the workspace: probe it where
		// that identity may (as Verify does), and say what the workspace's calls will get.
		res.WorkspaceDenied, res.Hint = e.Message, e.Hint
		d, done, err := h.checkDir(id)
		if err != nil {
			res.Error = "a folder for the probe: " + err.Error()
			return res
		}
		defer done()
		dir = d
	}
	bin, err := testBinary()
	if err != nil {
		res.Error, res.Hint = err.Error(), "install coreutils (the probe runs test)"
		return res
	}
	env := []string{"PATH=/usr/bin:/bin"}
	plan, _, e := h.confine(probeBundle, nil, bin, Caller{Workspace: dir}, &env)
	if e != nil {
		res.Error, res.Hint = e.Message, probeHint
		return res
	}
	run, err := runner.Run(ctx, runner.Command{Path: bin, Args: probeArgs, Dir: dir, Env: env, Timeout: probeTimeout, Sandbox: plan})
	switch {
	case err != nil:
		res.Error, res.Hint = err.Error(), probeHint
	case run.ExitCode == 1 && len(run.Stderr) == 0:
		res.Error = fmt.Sprintf("uid %d%s cannot read and search the workspace %s: calls there fail", res.UID, paren(res.User), dir)
		res.Hint = "give that user the workspace (setfacl -m u:USER:rwX -R WS, or chown), run clihostd --agent-user NAME " +
			"with a user that has it, or start clihostd with a --workspace that user owns"
	case run.ExitCode != 0:
		res.Error = fmt.Sprintf("the probe (%s) exited %d in the sandbox: %s", bin, run.ExitCode, strings.TrimSpace(string(run.Stderr)))
		res.Hint = probeHint
	default:
		res.State = ProbeWorks
	}
	return res
}

// testBinary finds test, the probe's program.
func testBinary() (string, error) {
	for _, p := range []string{"/usr/bin/test", "/bin/test"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: the probe program test is not in /usr/bin or /bin", nsinit.ErrUnavailable)
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
