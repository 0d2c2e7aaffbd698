package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/rotate"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/spf13/pflag"
)

// EnvAudit names the environment variable that sets the audit log path.
const EnvAudit = "CLIHOST_AUDIT"

// hostOptions are the flags of the commands that run tools.
type hostOptions struct {
	workspace string
	audit     string
	sandbox   host.SandboxOptions // Limits: --limit-*, the per-call resource limits of in-process calls
	approvals string              // --approvals: the approval policy of in-process calls
}

func (o *hostOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.workspace, "workspace", "", "the directory tools run in (default: the current directory)")
	fs.StringVar(&o.audit, "audit", "", "append audit lines here, rotated at 64 MiB with 5 rotated files kept; - for stderr (default: $CLIHOST_AUDIT, else ~/.local/state/clihost/audit.jsonl)")
	fs.StringVar(&o.approvals, "approvals", approval.DefaultPolicyFile(), "the approval policy of calls run here without a daemon (docs/operations.md, Approvals)")
	for _, f := range host.LimitFlags(&o.sandbox.Limits) {
		fs.Var(f.Value, f.Name, f.Usage)
	}
}

// inProcessFlags says whether fs (a command's flags, nil for none) was given --approvals or a
// --limit-* flag: they hold calls run in this process, never the daemon's.
func (o *hostOptions) inProcessFlags(fs *pflag.FlagSet) bool {
	if fs == nil {
		return false
	}
	given := fs.Changed("approvals")
	for _, f := range host.LimitFlags(&isolation.Limits{}) {
		given = given || fs.Changed(f.Name)
	}
	return given
}

// openHost builds a Host over the configured bundles with the audit log open. close releases it.
func (o *hostOptions) openHost(g *globalOptions) (h *host.Host, caller host.Caller, closeFn func(), err error) {
	reg, err := g.registry()
	if err != nil {
		return nil, caller, nil, err
	}
	ws, err := o.workspaceDir()
	if err != nil {
		return nil, caller, nil, err
	}
	audit, auditPath, closeAudit, err := openAudit(o.audit, g.io.ErrOut)
	if err != nil {
		return nil, caller, nil, err
	}
	if abs, err := filepath.Abs(o.approvals); err == nil && o.approvals != "" {
		o.approvals = abs // masked in every sandbox
	}
	policy, err := approval.LoadPolicy(o.approvals)
	if err != nil {
		closeAudit()
		return nil, caller, nil, err
	}
	deny := clihostPaths()
	if filepath.IsAbs(o.approvals) {
		deny = append(deny, o.approvals)
	}
	if auditPath != "" {
		deny = append(deny, rotate.Names(auditPath, host.AuditKeep)...)
	}
	caller = host.Caller{Workspace: ws, User: currentUser()}
	// The default state directory keeps the homes of uids without one (a root clihostctl's agent).
	state, _ := control.DefaultStateDir()
	return host.New(reg, host.Options{Audit: audit, Sandbox: host.SandboxOptions{ExtraDeny: deny, Limits: o.sandbox.Limits, StateDir: state},
		Approvals: approval.NewGate(policy)}), caller, closeAudit, nil
}

// openAPI is openHost through the Go API (package clihost): the Host in-process calls run on, with
// the same bundles, workspace, audit log, approval policy, masked paths, limits and homes.
func (o *hostOptions) openAPI(ctx context.Context, g *globalOptions) (h *clihost.Host, closeFn func(), err error) {
	ws, err := o.workspaceDir()
	if err != nil {
		return nil, nil, err
	}
	audit, auditPath, closeAudit, err := openAudit(o.audit, g.io.ErrOut)
	if err != nil {
		return nil, nil, err
	}
	deny := clihostPaths()
	if auditPath != "" {
		deny = append(deny, rotate.Names(auditPath, host.AuditKeep)...)
	}
	// The default state directory keeps the homes of uids without one (a root clihostctl's agent).
	state, _ := control.DefaultStateDir()
	h, err = clihost.New(ctx, g.bundleOption(), clihost.WithWorkspace(ws), clihost.WithAudit(audit), clihost.WithApprovalPolicy(o.approvals),
		clihost.WithDeny(deny...), clihost.WithLimits(o.sandbox.Limits), clihost.WithHomeDir(state))
	if err != nil {
		closeAudit()
		return nil, nil, err
	}
	return h, func() { h.Close(); closeAudit() }, nil
}

// clihostPaths are clihost's own files that a sandboxed tool must never see: the default state
// directory's database, token, secrets key and audit log (not its bin/, where installed CLIs run
// from), and the control socket.
func clihostPaths() []string {
	state, err := control.DefaultStateDir()
	if err != nil {
		return nil
	}
	paths := []string{control.DefaultSocket(state)}
	for _, name := range []string{"state.db", "token", "secrets.key"} {
		paths = append(paths, filepath.Join(state, name))
	}
	return append(paths, rotate.Names(filepath.Join(state, "audit.jsonl"), host.AuditKeep)...)
}

// openBundle opens a host (see openHost) and the named bundle for commands that run its tools.
// closeFn releases the host.
func (o *hostOptions) openBundle(g *globalOptions, name string) (h *host.Host, b *manifest.Bundle, caller host.Caller, closeFn func(), err error) {
	h, caller, closeFn, err = o.openHost(g)
	if err != nil {
		return nil, nil, caller, nil, err
	}
	if b, err = h.Bundle(name); err != nil {
		closeFn()
		return nil, nil, caller, nil, err
	}
	return h, b, caller, closeFn, nil
}

// workspaceDir is --workspace (default: the current directory), absolute; it must be a directory.
func (o *hostOptions) workspaceDir() (string, error) {
	ws := o.workspace
	if ws == "" {
		var err error
		if ws, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return "", usageError{fmt.Errorf("workspace %s is not a directory", ws)}
	}
	return ws, nil
}

// openAudit opens the audit log at path (default: $CLIHOST_AUDIT, else
// ~/.local/state/clihost/audit.jsonl, the daemon's default), rotated as clihostd rotates it by
// default (host.AuditMaxSize, host.AuditKeep), and returns it with its path ("" for stderr or a device, which are never rotated).
func openAudit(path string, stderr io.Writer) (io.Writer, string, func(), error) {
	if path == "" {
		path = os.Getenv(EnvAudit)
	}
	if path == "" {
		state := os.Getenv("XDG_STATE_HOME")
		if state == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, "", nil, fmt.Errorf("no audit path: set --audit or %s: %w", EnvAudit, err)
			}
			state = filepath.Join(home, ".local", "state")
		}
		path = filepath.Join(state, "clihost", "audit.jsonl")
	}
	if path == "-" {
		return stderr, "", func() {}, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", nil, fmt.Errorf("audit log: %w", err)
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, "", nil, fmt.Errorf("audit log: %w", err)
	}
	f, err := rotate.Open(path, rotate.Options{MaxSize: host.AuditMaxSize, Keep: host.AuditKeep})
	if err != nil {
		return nil, "", nil, fmt.Errorf("audit log: %w", err)
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		// A device (/dev/null, /dev/stderr) is written, never rotated, and not masked: the
		// sandbox provides its own /dev.
		return f, "", func() { f.Close() }, nil
	}
	return f, path, func() { f.Close() }, nil
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return fmt.Sprint(os.Getuid())
}
