package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

// Status implements control.Backend.
func (d *Engine) Status(ctx context.Context, name string) ([]control.BundleStatus, error) {
	st := d.cur.Load()
	// A bundle's status runs its version check unless one passed: a place among the peer's calls
	// (none for the daemon's own check after its start, warm).
	if peer := peerOf(ctx); peer != nil {
		var done func()
		var aerr *host.Error
		if ctx, done, aerr = st.host.Admit(ctx, host.Caller{Peer: callerID(peer)}); aerr != nil {
			return nil, scopeError(aerr)
		}
		defer done()
	}
	var out []control.BundleStatus
	for _, e := range st.reg.Entries() {
		b := e.Bundle
		if name != "" && b.ID() != name && b.Key() != name {
			continue
		}
		out = append(out, d.bundleStatus(ctx, st, e))
	}
	if name != "" && len(out) == 0 {
		_, err := st.reg.Get(name)
		return nil, err
	}
	return out, nil
}

func (d *Engine) bundleStatus(ctx context.Context, st *state, e *registry.Entry) control.BundleStatus {
	b := e.Bundle
	bs := control.BundleStatus{ID: b.ID(), Major: b.Major(), Key: b.Key(), File: b.File, Tools: len(b.Tools), Setup: "none", Auth: "none",
		Sandbox: d.probe(ctx, false).String(), Checked: time.Now().UTC()}
	if b.CLI != nil {
		bs.Name = b.CLI.Name
		bs.Limits = st.host.LimitMechanisms(b)
	}
	bs.Requires = d.requiresStatus(b)
	bs.Provider = d.providerStatus(ctx, b)
	if b.Findings.HasErrors() || !e.Indexed {
		bs.Install, bs.Reason = "invalid", "the bundle has lint errors and is not served; run: clihostctl lint "+b.Dir
		return bs
	}
	path, ver, err := st.host.Verify(ctx, b, d.workspace)
	switch {
	case err == nil:
		bs.Install, bs.BinPath, bs.Version, bs.Ready = "installed", path, ver, true
	case err.Code == errcode.VersionMismatch:
		bs.Install, bs.Reason = "version_mismatch", err.Message+"; "+err.Hint
	case err.Code == errcode.SandboxUnavailable, err.Code == errcode.VersionCheckFailed:
		bs.Install, bs.Reason = "unverified", err.Message+"; "+err.Hint
	default:
		bs.Install, bs.Reason = "missing", fmt.Sprintf("%s; run: clihostctl install %s", err.Message, b.ID())
	}
	scope := lifecycle.Scope{Bundle: b.Key(), Workspace: d.workspace, User: d.user}
	if len(b.CLI.Setup) > 0 {
		bs.Setup = "done"
		if pending, err := d.setup.Pending(b, scope); err != nil || len(pending) > 0 {
			bs.Setup = "pending"
			if bs.Ready {
				bs.Ready, bs.Reason = false, "setup is not complete; run: "+d.agentCommand(ctx, "setup", b.ID())
			}
		}
	}
	if slot, unset := d.unsetSecret(b, scope); unset && bs.Ready {
		bs.Ready, bs.Reason = false, fmt.Sprintf("the secret %s is not set; run: %s", slot.Slug, d.agentCommand(ctx, "secret set", secretArg(b, slot)))
	}
	if b.CLI.Auth != nil && b.CLI.Auth.Login != nil {
		a, err := d.auth.Get(b, scope)
		bs.Auth = string(a.Phase)
		if (err != nil || a.Phase != authstate.Authed) && bs.Ready {
			bs.Ready, bs.Reason = false, "not logged in; run: "+d.agentCommand(ctx, "login", b.ID())
		}
	}
	return bs
}

// requiresStatus measures b's requires.min_disk_mb and min_memory_mb as an install would; nil
// when b declares neither.
func (d *Engine) requiresStatus(b *manifest.Bundle) *control.RequiresStatus {
	r, refused, declared, err := install.CheckBundle(b, install.Options{StateDir: d.stateDir})
	if !declared {
		return nil
	}
	rs := &control.RequiresStatus{MinDiskMB: b.CLI.Requires.MinDiskMB, MinMemoryMB: b.CLI.Requires.MinMemoryMB, DiskPath: r.DiskPath,
		FreeDiskMB: r.FreeDiskMB, AvailableMemoryMB: r.AvailableMemoryMB, MemoryBound: r.MemoryBound}
	switch {
	case err != nil:
		rs.Problem, rs.Hint = err.Error(), "clihostd could not measure its free disk or memory"
	case refused != nil:
		rs.Problem, rs.Hint = refused.Message, refused.Hint
	}
	return rs
}

// agentCommand is the clihostctl command (setup or login) that prepares what status reports, the
// MCP agents' scope: the daemon's user in its --workspace. A caller that is another user runs it
// as the daemon's user (sudo -u clihost under the unit) or, on a root daemon, as root (sudo).
func (d *Engine) agentCommand(ctx context.Context, verb, id string) string {
	cmd := "clihostctl " + verb + " " + id + " --workspace " + shellWord(d.workspace)
	p, ok := control.PeerOf(ctx)
	switch {
	case !ok || p.UID == os.Geteuid():
		return cmd
	case os.Geteuid() == 0:
		return "sudo " + cmd
	default:
		return "sudo -u " + shellWord(d.user) + " " + cmd
	}
}

// shellWord is s as one word of a shell command line: as it is when it holds only characters no
// shell treats specially, else single-quoted.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:@%,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
