package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/access"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/setup"
	"github.com/clihost/clihost/store"
)

// scopeFor resolves a request's bundle and scope, and the caller with its workspace resolved (see
// workspaceFor).
func (d *Engine) scopeFor(req control.ScopeRequest, c host.Caller) (*manifest.Bundle, lifecycle.Scope, *host.Host, host.Caller, *host.Error) {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return nil, lifecycle.Scope{}, nil, c, &host.Error{Code: errcode.NotFound, Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}
	}
	c.Workspace = req.Workspace
	ws, herr := d.workspaceFor(c)
	if herr != nil {
		return nil, lifecycle.Scope{}, nil, c, herr
	}
	c.Workspace = ws
	return b, lifecycle.Scope{Bundle: b.Key(), Workspace: ws, User: c.User}, st.host, c, nil
}

// loginScopeFor is scopeFor for the login requests (login, its info, logout): the scope is the
// login user's (host.LoginUser). A daemon that is not root runs every CLI as its own user with one
// HOME, so a CLI's login is that user's and serves every caller: only that user may log it in or
// out (root's clihostctl refuses to run a login such a daemon chose); anyone else would put their
// own account where every caller's calls use it.
func (d *Engine) loginScopeFor(req control.ScopeRequest, c host.Caller) (*manifest.Bundle, lifecycle.Scope, *host.Host, host.Caller, *host.Error) {
	b, s, h, c, herr := d.scopeFor(req, c)
	if herr != nil {
		return b, s, h, c, herr
	}
	if os.Geteuid() != 0 && c.Peer != nil && c.Peer.UID != os.Geteuid() {
		return nil, s, nil, c, sharedLoginError(b, c.User, d.workspace)
	}
	s.User = host.LoginUser(c.User)
	return b, s, h, c, nil
}

// sharedLoginError refuses a login by a caller other than a non-root daemon's own user.
func sharedLoginError(b *manifest.Bundle, caller, ws string) *host.Error {
	me := daemonUser()
	return &host.Error{Code: errcode.LoginRefused, Category: "permission",
		Message: fmt.Sprintf("this clihostd runs as %s, not root: every CLI runs as %s with one HOME, so %s's login is %s's and serves every caller; %s may not log it in or out",
			me, me, b.ID(), me, caller),
		Hint: fmt.Sprintf("the operator logs it in for everyone: sudo -u %s clihostctl login %s --workspace %s "+
			"(for logins of each user's own, run clihostd as root: each caller's CLIs then run as that caller)", me, b.ID(), ws)}
}

// workspaceFor resolves the workspace a control-socket caller names (the daemon's --workspace when
// it names none) to an absolute path without symbolic links, and refuses it with workspace_denied
// unless the caller could read, write and search it itself (as its uid and groups; the kernel
// decides when the daemon is root). Root callers may name any workspace but one that holds or lies
// in the state directory, the daemon's own folder or its approval policy, or holds its temporary
// folder (ownedOverlap), which no caller may name.
func (d *Engine) workspaceFor(c host.Caller) (string, *host.Error) {
	ws := c.Workspace
	if ws == "" {
		ws = d.workspace
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return "", &host.Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("workspace %q: %v", ws, err)}
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil || !isDir(real) {
		if c.Peer != nil && c.Peer.UID != 0 {
			// Not resolvable by the daemon: say what the caller's own check says, if it refuses.
			if cerr := access.CheckDir(abs, access.Who{UID: c.Peer.UID, GID: c.Peer.GID, Groups: c.Peer.Groups}); cerr != nil {
				return "", host.WorkspaceDenied(abs, *c.Peer, cerr)
			}
		}
		return "", &host.Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("workspace %q is not a directory", ws), Hint: "pass an existing directory as the workspace"}
	}
	if c.Peer != nil && c.Peer.UID != 0 {
		// The resolved path, the one the call will use: checking the path as named and then
		// resolving it again let a caller who owns a symbolic link on it point it at its own
		// folder for the check and at another user's for the call. The sandbox then refuses the
		// call when the path resolves differently when it is compiled (host: workspace changed).
		if cerr := access.CheckDir(real, access.Who{UID: c.Peer.UID, GID: c.Peer.GID, Groups: c.Peer.Groups}); cerr != nil {
			return "", host.WorkspaceDenied(abs, *c.Peer, cerr)
		}
	}
	if e := ownedOverlap(real, d.stateDir, d.sandbox); e != nil {
		return "", e
	}
	return real, nil
}

// ownedOverlap refuses a workspace that overlaps what the daemon runs or trusts
// or holds its temporary folder (host.OwnedOrTempOverlap); nil when the sandbox is
// off (every CLI may then write anything the daemon's user may).
func ownedOverlap(ws, stateDir string, o host.SandboxOptions) *host.Error {
	if o.Off {
		return nil
	}
	return host.OwnedOrTempOverlap(ws, stateDir, o.Trusted...)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// scopeError is a scope request's refusal as the API's plain errors carry it.
func scopeError(e *host.Error) error {
	if e.Hint == "" {
		return fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	return fmt.Errorf("%s: %s; %s", e.Code, e.Message, e.Hint)
}

// scopeCaller is who a stored scope's own commands (a background refresh) run for: the scope's
// user when it is a user other than root and the daemon's own (its logins were made as itself),
// else no one (the daemon's own work).
func (d *Engine) scopeCaller(name string) *host.CallerID {
	if name == d.user {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil
		}
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil
	}
	id := &host.CallerID{UID: uid, GID: gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && g != gid {
				id.Groups = append(id.Groups, g)
			}
		}
	}
	return id
}

func stepInfo(b *manifest.Bundle, status []setup.StepStatus) []control.SetupStep {
	done := map[string]bool{}
	for _, s := range status {
		done[s.ID] = s.Done
	}
	var out []control.SetupStep
	for _, s := range b.CLI.Setup {
		cs := control.SetupStep{ID: s.ID, Kind: s.Kind, Type: s.Type, Prompt: s.Prompt, Description: s.Description, Default: s.Default, Done: done[s.ID]}
		if s.Options != nil {
			cs.Options = s.Options.Static
		}
		out = append(out, cs)
	}
	return out
}

// SetupInfo implements control.Backend.
func (d *Engine) SetupInfo(ctx context.Context, req control.ScopeRequest, peer control.Caller) (control.SetupInfo, error) {
	_, done, aerr := d.admit(ctx, peer)
	if aerr != nil {
		return control.SetupInfo{}, scopeError(aerr)
	}
	defer done()
	b, s, _, _, herr := d.scopeFor(req, hostCaller(peer))
	if herr != nil {
		return control.SetupInfo{}, scopeError(herr)
	}
	status, err := d.setup.Status(b, s)
	if err != nil {
		return control.SetupInfo{}, err
	}
	return control.SetupInfo{Bundle: b.Key(), Workspace: s.Workspace, Steps: stepInfo(b, status)}, nil
}

// visitor relays external/oauth steps' callback URLs and device codes to clihostctl; prompts were
// answered up front.
type visitor struct{ emit func(control.SetupEvent) }

func (v visitor) Ask(_ context.Context, step manifest.SetupStep, _ []setup.Choice) (string, error) {
	return "", fmt.Errorf("step %s needs an answer: pass --value %s=VALUE", step.ID, step.ID)
}

func (v visitor) Visit(_ context.Context, step manifest.SetupStep, url string) error {
	v.emit(control.SetupEvent{Phase: "visit", Step: step.ID, URL: url})
	return nil
}

// ShowDeviceCode implements setup.DeviceCodeShower: the verification URI and user code go to
// clihostctl like a visit.
func (v visitor) ShowDeviceCode(_ context.Context, step manifest.SetupStep, uri, code string) error {
	v.emit(control.SetupEvent{Phase: "visit", Step: step.ID, URL: uri, UserCode: code})
	return nil
}

// Setup implements control.Backend.
func (d *Engine) Setup(ctx context.Context, req control.SetupRequest, peer control.Caller, emit func(control.SetupEvent)) control.SetupEvent {
	ctx, done, aerr := d.admit(ctx, peer) // its version check and its steps run the bundle's programs
	if aerr != nil {
		return control.SetupEvent{Phase: "error", Error: aerr}
	}
	defer done()
	b, s, h, c, herr := d.scopeFor(req.ScopeRequest, hostCaller(peer))
	if herr != nil {
		return control.SetupEvent{Phase: "error", Error: herr}
	}
	env, verr := h.LifecycleEnv(ctx, b, c)
	if verr != nil {
		return control.SetupEvent{Phase: "error", Error: verr}
	}
	opts := setup.RunOptions{Values: req.Values, Force: req.Force}
	if c.Peer != nil && c.Peer.UID != 0 {
		// The callbacks answer only the caller's own browser (root's setup: any user's).
		opts.CallbackUIDs = []int{c.Peer.UID}
	}
	status, err := d.setup.Run(ctx, b, s, env, visitor{emit}, opts)
	if err != nil {
		e := &callresult.Error{Code: errcode.SetupFailed, Message: err.Error()}
		var se *setup.StepError
		if errors.As(err, &se) {
			e = &callresult.Error{Code: se.Code, Message: se.Message, Hint: se.Hint}
		}
		return control.SetupEvent{Phase: "error", Steps: stepInfo(b, status), Error: e}
	}
	d.log.Info("setup complete", "bundle", b.Key(), "user", c.User, "workspace", s.Workspace)
	return control.SetupEvent{Phase: "done", Steps: stepInfo(b, status)}
}

// LoginInfo implements control.Backend.
func (d *Engine) LoginInfo(ctx context.Context, req control.ScopeRequest, peer control.Caller) (control.LoginInfo, error) {
	ctx, done, aerr := d.admit(ctx, peer) // the version check runs the bundle's binary
	if aerr != nil {
		return control.LoginInfo{}, scopeError(aerr)
	}
	defer done()
	b, s, h, c, herr := d.loginScopeFor(req, hostCaller(peer))
	if herr != nil {
		return control.LoginInfo{}, scopeError(herr)
	}
	if b.CLI.Auth == nil || b.CLI.Auth.Login == nil {
		return control.LoginInfo{}, fmt.Errorf("bundle %s declares no login", b.Key())
	}
	words, err := argv.Split(b.CLI.Auth.Login.Cmd)
	if err != nil {
		return control.LoginInfo{}, err
	}
	lenv, verr := h.LifecycleEnv(ctx, b, c)
	if verr != nil {
		return control.LoginInfo{}, fmt.Errorf("%s: %s", verr.Message, verr.Hint)
	}
	if filepath.Base(words[0]) != filepath.Base(b.CLI.Bin) {
		return control.LoginInfo{}, fmt.Errorf("login.cmd %q does not run the bundle's bin %q", b.CLI.Auth.Login.Cmd, b.CLI.Bin)
	}
	words[0] = lenv.BinPath
	info := control.LoginInfo{Bundle: b.Key(), Argv: words, Interactive: b.CLI.Auth.Login.Interactive, Workspace: s.Workspace,
		Sandbox: lenv.Sandbox, RequiresCallbackURL: b.CLI.Auth.Login.RequiresCallbackURL}
	for _, kv := range lenv.Env {
		if home, ok := strings.CutPrefix(kv, "HOME="); ok {
			info.Home = home
		}
	}
	if e := b.CLI.Sandbox.Env; e != nil {
		info.EnvPass, info.EnvSet = e.Pass, e.Set
	}
	if p := lenv.Egress; p != nil {
		info.Egress = &control.EgressPolicy{Allow: p.Allow, Ports: p.Ports, AdmitNets: p.AdmitNets, MaxConns: p.MaxConns}
	}
	return info, nil
}

// Login implements control.Backend: the person ran login.cmd in their terminal; the daemon now
// polls completes_when.
func (d *Engine) Login(ctx context.Context, req control.ScopeRequest, peer control.Caller) control.AuthResult {
	ctx, done, aerr := d.admit(ctx, peer) // the login's checks run the bundle's programs, up to ten minutes
	if aerr != nil {
		return control.AuthResult{Error: aerr}
	}
	defer done()
	b, s, h, c, herr := d.loginScopeFor(req, hostCaller(peer))
	if herr != nil {
		return control.AuthResult{Error: herr}
	}
	env, verr := h.LifecycleEnv(ctx, b, c)
	if verr != nil {
		return control.AuthResult{Error: verr}
	}
	if req.WaitSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(min(req.WaitSeconds, 600))*time.Second)
		defer cancel()
	}
	st, err := d.auth.Login(ctx, b, s, env, func(context.Context, []string) error { return nil })
	res := control.AuthResult{Phase: string(st.Phase), Reason: st.Reason}
	if err != nil {
		res.Error = &callresult.Error{Code: errcode.AuthRequired, Message: err.Error(), Hint: "run clihostctl login again"}
	}
	return res
}

// Logout implements control.Backend.
func (d *Engine) Logout(ctx context.Context, req control.ScopeRequest, peer control.Caller) control.AuthResult {
	_, done, aerr := d.admit(ctx, peer)
	if aerr != nil {
		return control.AuthResult{Error: aerr}
	}
	defer done()
	b, s, _, _, herr := d.loginScopeFor(req, hostCaller(peer))
	if herr != nil {
		return control.AuthResult{Error: herr}
	}
	if err := d.auth.Logout(b, s); err != nil {
		return control.AuthResult{Error: &callresult.Error{Code: errcode.Internal, Message: err.Error()}}
	}
	st, _ := d.auth.Get(b, s)
	return control.AuthResult{Phase: string(st.Phase), Reason: st.Reason}
}

// daemonUser is the user MCP calls are made as: the daemon's own, so that setup and login done by
// its operator with clihostctl apply to them.
func daemonUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}

// refreshLoop runs due auth refreshes in the background (AIP-29: refresh runs eagerly while authed),
// checking every interval until ctx ends. A failed refresh moves the scope to unauthed.
func (d *Engine) refreshLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.refreshDue(ctx)
		}
	}
}

func (d *Engine) refreshDue(ctx context.Context) {
	st := d.cur.Load()
	for _, b := range st.reg.Bundles() {
		if b.CLI == nil || b.CLI.Auth == nil || b.CLI.Auth.Refresh == nil || b.Findings.HasErrors() {
			continue
		}
		_ = d.store.List(store.BucketAuth, store.ScopePrefix(b.Key()), func(key string, _ store.Record) error {
			bundle, ws, user, ok := store.ParseScopeKey(key)
			if !ok {
				return nil
			}
			s := lifecycle.Scope{Bundle: bundle, Workspace: ws, User: user}
			if wait, due := d.auth.Due(b, s); !due || wait > 0 {
				return nil
			}
			env, verr := st.host.LifecycleEnv(ctx, b, host.Caller{Workspace: s.Workspace, User: user, Peer: d.scopeCaller(user)})
			if verr != nil {
				return nil
			}
			if a, err := d.auth.BeforeCall(ctx, b, s, env); err != nil || a.Phase != authstate.Authed {
				d.log.Warn("background refresh failed; the scope is logged out", "bundle", b.Key(), "user", user, "reason", a.Reason)
			} else {
				d.log.Info("refreshed login", "bundle", b.Key(), "user", user)
			}
			return nil
		})
	}
}
