package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/internal/rotate"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/mcp"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/cgroup"
	"github.com/clihost/clihost/setup"
	"github.com/clihost/clihost/store"
)

// installRecord is what the store keeps about a bundle's installed binary.
type installRecord struct {
	Method      string    `json:"method"`
	BinPath     string    `json:"bin_path"`
	Version     string    `json:"version"`
	InstalledAt time.Time `json:"installed_at"`
}

// state is one generation of loaded bundles; a reload builds a new one and swaps it in.
type state struct {
	reg     *registry.Registry
	bundles control.BundlesLoaded // what reg serves, from where, and the warnings about it
	host    *host.Host
	mcp     http.Handler
}

type daemon struct {
	log        *slog.Logger
	cfg        config
	stateDir   string
	socketPath string
	sandbox    host.SandboxOptions // how bundle processes are confined
	tokenFile  string              // the default token's file
	tokens     *agenttoken.Store   // the MCP endpoints' bearer tokens: the default one and one per named agent
	auditPath  string
	audit      *rotate.File // one audit line per Write, rotated by size; safe for concurrent use
	store      *store.Store
	workspace  string
	httpURL    string
	cur        atomic.Pointer[state]
	metrics    *metrics
	installMu  sync.Mutex // one install at a time per daemon; install coalesces per bundle too
	setup      *setup.Engine
	auth       *authstate.Machine
	user       string // MCP calls run as this user's setup and login scope
	probes     probeCache
	approvals  *approval.Gate // outlives reloads: pending approvals and the key of their requestStates
}

// auditRecord appends one JSON record to the audit log.
func (d *daemon) auditRecord(v any) {
	line, err := json.Marshal(v)
	if err == nil {
		_, _ = d.audit.Write(append(line, '\n'))
	}
}

// start opens the state, loads the bundles and binds the listeners; serve runs them.
func start(ctx context.Context, log *slog.Logger, c config) (*daemon, error) {
	d := &daemon{log: log, cfg: c, metrics: newMetrics()}
	var err error
	if d.stateDir = c.stateDir; d.stateDir == "" {
		if d.stateDir, err = control.DefaultStateDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(d.stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if d.store, err = store.Open(d.stateDir, store.Options{OnDamaged: d.stateDamaged}); err != nil {
		return nil, err // ErrLocked says another clihostd runs
	}
	if err := d.reapLeftovers(); err != nil {
		return nil, err
	}
	d.tokenFile = filepath.Join(d.stateDir, "token")
	if d.tokens, err = agenttoken.Open(d.stateDir); err != nil {
		return nil, err
	}
	d.auditPath = filepath.Join(d.stateDir, "audit.jsonl")
	if d.audit, err = rotate.Open(d.auditPath, rotate.Options{MaxSize: int64(c.auditMaxSize), Keep: c.auditKeep}); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	secrets, err := store.OpenSecrets(d.store, filepath.Join(d.stateDir, "secrets.key"))
	if err != nil {
		return nil, err
	}
	d.setup = &setup.Engine{Store: d.store, Secrets: secrets}
	d.auth = &authstate.Machine{Store: d.store, Audit: d.auditRecord}
	d.user = daemonUser()
	policy, err := approval.LoadPolicy(c.approvals)
	if err != nil {
		return nil, fmt.Errorf("%w (fix it, or start with --approvals naming another file)", err)
	}
	d.approvals = approval.NewGate(policy).Served()
	log.Info("approval policy", "file", c.approvals, "rules", len(policy.Rules), "policies", len(policy.Policies))
	if d.workspace = c.workspace; d.workspace == "" {
		if d.workspace, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if d.workspace, err = filepath.Abs(d.workspace); err != nil {
		return nil, err
	}
	// Without symbolic links, as control requests name it (setup and login scopes key on it).
	if real, err := filepath.EvalSymlinks(d.workspace); err == nil {
		d.workspace = real
	}
	if d.socketPath = c.socket; d.socketPath == "" {
		d.socketPath = control.DefaultSocket(d.stateDir)
	}
	if d.sandbox, err = sandboxOptions(log, c, d.stateDir, d.socketPath); err != nil {
		return nil, err
	}
	if err := d.reload(); err != nil {
		return nil, err
	}
	d.probe(ctx, true) // logs what a real sandboxed process finds
	return d, nil
}

// stateDamaged logs, once, that state.db was found damaged while the daemon runs. The daemon
// stays up: calls that need no state (no setup, login or secret) and the control API go on, the
// others fail with the store's error, and nothing reads or writes the file any more. Exiting
// instead would end every caller's in-flight call and gain nothing: a restart refuses the file
// (Open's consistency check) with the same advice.
func (d *daemon) stateDamaged(err error) {
	d.log.Error("STATE DATABASE DAMAGED: calls that need setup, login or secrets fail until it is restored; the others go on", "err", err)
}

// sandboxOptions turns the sandbox flags into the host's options, logging loudly when the sandbox
// is off or this host cannot build it (calls are then refused with sandbox_unavailable).
func sandboxOptions(log *slog.Logger, c config, stateDir, socket string) (host.SandboxOptions, error) {
	// The state directory's secrets and records, never its bin/ (the installed CLIs run from there).
	o := host.SandboxOptions{Off: c.sandbox == "off", ExtraDeny: []string{socket}, Limits: c.limits, EgressMaxConns: c.maxConns, StateDir: stateDir}
	for _, name := range []string{"state.db", "token", "secrets.key"} {
		o.ExtraDeny = append(o.ExtraDeny, filepath.Join(stateDir, name))
	}
	o.ExtraDeny = append(o.ExtraDeny, rotate.Names(filepath.Join(stateDir, "audit.jsonl"), c.auditKeep)...)
	if dir, ok := absentLocalBundles(c); ok {
		o.ExtraDeny = append(o.ExtraDeny, dir)
	}
	if filepath.IsAbs(c.approvals) { // whoever writes the policy approves every call
		o.ExtraDeny = append(o.ExtraDeny, c.approvals)
	}
	if c.agentUser != "" {
		u, err := user.Lookup(c.agentUser)
		if err != nil {
			return o, fmt.Errorf("--agent-user: %w", err)
		}
		if o.AgentUID, err = strconv.Atoi(u.Uid); err != nil || o.AgentUID == 0 {
			return o, fmt.Errorf("--agent-user %s: uid %s: bundle processes never run as root", c.agentUser, u.Uid)
		}
		if o.AgentGID, err = strconv.Atoi(u.Gid); err != nil {
			return o, fmt.Errorf("--agent-user %s: gid %s: %w", c.agentUser, u.Gid, err)
		}
	}
	for _, cidr := range c.admit {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			return o, fmt.Errorf("--egress-admit: %w", err)
		}
		o.AdmitNets = append(o.AdmitNets, pfx.Masked())
	}
	for _, f := range strings.Split(c.ports, ",") {
		port, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || port < 1 || port > 65535 {
			return o, fmt.Errorf("--egress-ports: %q is not a port", f)
		}
		o.EgressPorts = append(o.EgressPorts, port)
	}
	// Whether the sandbox works is logged by the probe at start (daemon.probe).
	if o.Off {
		log.Warn("THE KERNEL SANDBOX IS OFF (--sandbox=off): every CLI runs with this daemon's full rights, without the bundles' filesystem, exec and network limits")
	} else {
		logLimits(log)
	}
	return o, nil
}

// logLimits says at start which mechanism holds the per-call memory, process and CPU limits, and
// warns when memory and process counts cannot be limited per call here.
func logLimits(log *slog.Logger) {
	m := cgroup.Default()
	mem, pids, cpu := m.Mechanism(cgroup.Memory), m.Mechanism(cgroup.Pids), m.Mechanism(cgroup.CPU)
	if mem == cgroup.None || pids == cgroup.None {
		log.Warn("per-call memory or process limits are NOT enforced on this host (no usable cgroup); only rlimits and tmpfs sizes apply",
			"memory", mem, "pids", pids, "reason", m.Reason())
		return
	}
	log.Info("per-call resource limits", "memory", mem, "pids", pids, "cpu", cpu)
}

// reload reads the bundle sources again and swaps the new generation in.
func (d *daemon) reload() error {
	reg, sum, err := loadBundles(d.log, d.cfg)
	if err != nil {
		return err
	}
	if d.cur.Load() != nil { // the first load is start's
		policy, err := approval.LoadPolicy(d.cfg.approvals)
		if err != nil {
			return err
		}
		d.approvals.SetPolicy(policy)
	}
	h := host.New(reg, host.Options{Audit: d.audit, Locate: d.locate, OnCall: d.metrics.observe, Setup: d.setup, Auth: d.auth,
		Sandbox: d.sandbox, Approvals: d.approvals})
	st := &state{reg: reg, bundles: sum, host: h, mcp: mcp.Handler(h, mcp.Options{Caller: host.Caller{Workspace: d.workspace, User: d.user}, Version: version, Agent: agentOf})}
	d.cur.Store(st)
	d.metrics.setBundles(sum.Loaded, sum.Refused)
	return nil
}

// locate names the installed copies of a bundle's binary: the one the store recorded, then the
// daemon's bin directory.
func (d *daemon) locate(b *manifest.Bundle) []string {
	var out []string
	var rec installRecord
	if _, ok, err := d.store.Get(store.BucketInstall, b.Key(), &rec); err == nil && ok && rec.BinPath != "" {
		out = append(out, rec.BinPath)
	}
	return append(out, filepath.Join(install.BinDir(d.stateDir, b.Key()), filepath.Base(b.CLI.Bin)))
}

// serve runs the control socket and the MCP listener until ctx ends, then drains in-flight calls.
func (d *daemon) serve(ctx context.Context) error {
	defer d.store.Close()
	defer d.audit.Close()
	gid := -1
	if d.cfg.group != "" {
		g, err := user.LookupGroup(d.cfg.group)
		if err != nil {
			return fmt.Errorf("--group %s: %w", d.cfg.group, err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	ctlLn, err := control.Listen(d.socketPath, gid)
	if err != nil {
		return err
	}
	defer os.Remove(d.socketPath)
	httpLn, err := net.Listen("tcp", d.cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w", d.cfg.httpAddr, err)
	}
	d.httpURL = "http://" + httpLn.Addr().String()

	// Every request's context, and so every call's, derives from calls: canceling it stops them all.
	calls, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	base := func(net.Listener) context.Context { return calls }
	ctlSrv := &http.Server{Handler: control.Handler(d, control.Admission{OwnerUID: os.Geteuid(), GroupID: gid}),
		ConnContext: control.ConnContext, BaseContext: base, ReadHeaderTimeout: 10 * time.Second}
	httpSrv := &http.Server{Handler: d.httpHandler(), BaseContext: base, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- ctlSrv.Serve(ctlLn) }()
	go func() { errc <- httpSrv.Serve(httpLn) }()

	d.log.Info("clihostd ready", "version", version, "state", d.stateDir, "socket", d.socketPath,
		"mcp", d.httpURL+"/mcp/{bundle}", "token_file", d.tokenFile, "workspace", d.workspace)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyReady)
	stopWatchdog := d.watchdog()
	defer stopWatchdog()
	go d.warm(ctx)
	go d.refreshLoop(ctx, time.Minute)
	stopWatch := d.watchBundles(ctx)
	defer stopWatch()

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errc:
			if !errors.Is(err, http.ErrServerClosed) {
				serveErr = err
			}
			break loop
		case <-hup:
			d.log.Info("reloading bundles (SIGHUP)")
			if err := d.reload(); err != nil {
				d.log.Error("reload failed; keeping the previous bundles", "err", err)
			}
		}
	}
	d.log.Info("clihostd stopping: draining calls", "drain_timeout", d.cfg.drain)
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	d.drain(cancelCalls, ctlSrv, httpSrv)
	if serveErr != nil {
		d.log.Error("clihostd stopped", "err", serveErr)
	} else {
		d.log.Info("clihostd stopped")
	}
	return serveErr
}

// stopWait bounds how long drain waits for the calls it canceled: the runner's grace between
// SIGTERM and SIGKILL (runner.DefaultGrace) and a margin. Sandboxes still running when the daemon
// exits die with it (see package sandbox/nsinit).
const stopWait = runner.DefaultGrace + 2*time.Second

// drain stops the servers from accepting connections and calls, waits for the calls in flight at
// most the drain timeout (--drain-timeout), then cancels those still running (each sandbox gets
// SIGTERM, and SIGKILL after the runner's grace; the init's exit kills everything else in it) and
// waits for them at most stopWait more. Connections still open then are closed.
func (d *daemon) drain(cancelCalls context.CancelFunc, srvs ...*http.Server) {
	var idle sync.WaitGroup
	for _, srv := range srvs {
		idle.Go(func() { _ = srv.Shutdown(context.Background()) })
	}
	done := make(chan struct{})
	go func() { idle.Wait(); close(done) }()
	wait := time.NewTimer(d.cfg.drain)
	defer wait.Stop()
	select {
	case <-done:
		return
	case <-wait.C:
	}
	d.log.Warn("drain timeout passed: canceling the calls still running", "drain_timeout", d.cfg.drain)
	cancelCalls()
	wait.Reset(stopWait)
	select {
	case <-done:
	case <-wait.C:
		d.log.Warn("calls still running after they were canceled: closing their connections", "waited", stopWait)
		for _, srv := range srvs {
			_ = srv.Close()
		}
	}
}

// agentKey marks an HTTP request's context with the name of the bearer token it carried.
type agentKey struct{}

// agentOf is the name of the token an MCP request carried (see httpHandler).
func agentOf(r *http.Request) string {
	name, _ := r.Context().Value(agentKey{}).(string)
	return name
}

// httpHandler serves MCP at /mcp/… and metrics at /metrics, both behind the bearer token.
func (d *daemon) httpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent, ok := d.tokens.Match(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="clihostd"`)
			http.Error(w, "missing or wrong bearer token; clihostctl token prints it", http.StatusUnauthorized)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), agentKey{}, agent))
		if r.URL.Path == "/metrics" {
			d.metrics.write(w)
			return
		}
		d.cur.Load().mcp.ServeHTTP(w, r)
	})
}

// watchdog pings systemd's watchdog at half its interval, when one is configured.
func (d *daemon) watchdog() func() {
	every, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil || every == 0 {
		return func() {}
	}
	t := time.NewTicker(every / 2)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyWatchdog)
			}
		}
	}()
	return func() { t.Stop(); close(done) }
}

// warm checks every bundle's binary in the background after start, so that status is fast and an
// install interrupted before a restart is found.
func (d *daemon) warm(ctx context.Context) {
	if _, err := d.Status(ctx, ""); err != nil {
		d.log.Warn("checking bundles after start", "err", err)
	}
}

// Status implements control.Backend.
func (d *daemon) Status(ctx context.Context, name string) ([]control.BundleStatus, error) {
	st := d.cur.Load()
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

func (d *daemon) bundleStatus(ctx context.Context, st *state, e *registry.Entry) control.BundleStatus {
	b := e.Bundle
	bs := control.BundleStatus{ID: b.ID(), Major: b.Major(), Key: b.Key(), File: b.File, Tools: len(b.Tools), Setup: "none", Auth: "none",
		Sandbox: d.probe(ctx, false).String(), Checked: time.Now().UTC()}
	if b.CLI != nil {
		bs.Name = b.CLI.Name
		bs.Limits = st.host.LimitMechanisms(b)
	}
	if b.Findings.HasErrors() || !e.Indexed {
		bs.Install, bs.Reason = "invalid", "the bundle has lint errors and is not served; run: clihostctl lint "+b.Dir
		return bs
	}
	path, ver, err := st.host.Verify(ctx, b, d.workspace)
	switch {
	case err == nil:
		bs.Install, bs.BinPath, bs.Version, bs.Ready = "installed", path, ver, true
	case err.Code == "version_mismatch":
		bs.Install, bs.Reason = "version_mismatch", err.Message+"; "+err.Hint
	case err.Code == "sandbox_unavailable":
		bs.Install, bs.Reason = "unverified", err.Message+"; "+err.Hint
	default:
		bs.Install, bs.Reason = "missing", fmt.Sprintf("%s; run: clihostctl install %s", err.Message, b.ID())
	}
	scope := authstate.Scope{Bundle: b.Key(), Workspace: d.workspace, User: d.user}
	if len(b.CLI.Setup) > 0 {
		bs.Setup = "done"
		if pending, err := d.setup.Pending(b, scope); err != nil || len(pending) > 0 {
			bs.Setup = "pending"
			if bs.Ready {
				bs.Ready, bs.Reason = false, "setup is not complete; run: "+d.agentCommand(ctx, "setup", b.ID())
			}
		}
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

// agentCommand is the clihostctl command (setup or login) that prepares what status reports, the
// MCP agents' scope: the daemon's user in its --workspace. A caller that is another user runs it
// as the daemon's user (sudo -u clihost under the unit) or, on a root daemon, as root (sudo).
func (d *daemon) agentCommand(ctx context.Context, verb, id string) string {
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

// Install implements control.Backend: it installs when the binary is missing or fails its version
// check, checks the version after installing, reinstalls once on a mismatch, and records the result.
func (d *daemon) Install(ctx context.Context, req control.InstallRequest, progress func(control.InstallEvent)) control.InstallEvent {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return control.InstallEvent{Phase: "error", Message: err.Error(), Error: &host.Error{Code: "not_found", Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}}
	}
	d.installMu.Lock()
	defer d.installMu.Unlock()
	progress(control.InstallEvent{Phase: "checking", Message: "checking " + b.CLI.Bin})
	if !req.Force {
		if path, ver, verr := st.host.Verify(ctx, b, d.workspace); verr == nil {
			return control.InstallEvent{Phase: "done", Message: fmt.Sprintf("%s %s is already installed at %s", b.CLI.Bin, ver, path), BinPath: path, Version: ver}
		}
	}
	var last *host.Error
	for attempt := 1; attempt <= 2; attempt++ {
		progress(control.InstallEvent{Phase: "installing", Message: fmt.Sprintf("installing %s (attempt %d)", b.CLI.Bin, attempt)})
		res, err := install.Install(ctx, b, install.Options{StateDir: d.stateDir, AllowUnverified: req.AllowUnverified,
			Privileged: os.Geteuid() == 0, HandOff: handOff(ctx, req), From: req.From, Log: d.log,
			Progress: func(done, total int64) { progress(control.InstallEvent{Phase: "progress", Done: done, Total: total}) }})
		if err != nil {
			return d.installError(b, res, err)
		}
		if _, err := d.store.Put(store.BucketInstall, b.Key(), installRecord{Method: res.Method, BinPath: res.BinPath, InstalledAt: time.Now().UTC()}); err != nil {
			return control.InstallEvent{Phase: "error", Message: "recording the install: " + err.Error()}
		}
		st.host.Forget(b)
		path, ver, verr := st.host.Verify(ctx, b, d.workspace)
		if verr == nil {
			_, _ = d.store.Put(store.BucketInstall, b.Key(), installRecord{Method: res.Method, BinPath: path, Version: ver, InstalledAt: time.Now().UTC()})
			d.log.Info("installed", "bundle", b.Key(), "method", res.Method, "bin", path, "version", ver)
			return control.InstallEvent{Phase: "done", Message: fmt.Sprintf("installed %s %s with %s", b.CLI.Bin, ver, res.Method), Method: res.Method, BinPath: path, Version: ver}
		}
		last = verr
		req.Force = true
	}
	return control.InstallEvent{Phase: "error", Message: last.Message, Error: last}
}

func installFailedHint(err error) string {
	var ce *install.ChecksumError
	if errors.As(err, &ce) {
		return "the download does not match the bundle's verify_sha256; nothing was installed. Report it to the bundle's author"
	}
	return "each install entry's reason is listed; install the CLI by hand, or fix the bundle's install entries"
}

// Call implements control.Backend.
func (d *daemon) Call(ctx context.Context, req control.CallRequest, input map[string]any, caller host.Caller) host.Envelope {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return host.Envelope{Error: &host.Error{Code: "not_found", Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}}
	}
	ws, herr := d.workspaceFor(caller)
	if herr != nil {
		return host.Envelope{Error: herr}
	}
	caller.Workspace = ws
	return st.host.Call(ctx, b, req.Tool, input, caller, host.CallOptions{Via: approval.ViaControl})
}

// PendingApprovals implements control.ApprovalBackend.
func (d *daemon) PendingApprovals() []approval.Pending { return d.approvals.List() }

// AnswerApproval implements control.ApprovalBackend; the answer is audited.
func (d *daemon) AnswerApproval(id string, approve bool, by string) (approval.Pending, error) {
	return d.cur.Load().host.AnswerApproval(id, approve, by)
}

// Token implements control.Backend.
func (d *daemon) Token() control.TokenInfo {
	tok, _ := d.tokens.Token(agenttoken.Default)
	return control.TokenInfo{Name: agenttoken.Default, Token: tok, MCPURL: d.httpURL + "/mcp/{bundle}", TokenFile: d.tokenFile}
}

// Tokens implements control.TokenBackend.
func (d *daemon) Tokens() []agenttoken.Info { return d.tokens.List() }

// CreateToken implements control.TokenBackend.
func (d *daemon) CreateToken(name string) (control.TokenInfo, error) {
	tok, err := d.tokens.Create(name)
	if err != nil {
		return control.TokenInfo{}, err
	}
	d.auditRecord(tokenChange{Type: "cli.token", Name: name, Change: "created", TS: time.Now().UTC().Format(time.RFC3339Nano)})
	return control.TokenInfo{Name: name, Token: tok, MCPURL: d.httpURL + "/mcp/{bundle}", TokenFile: d.tokens.File(name)}, nil
}

// RevokeToken implements control.TokenBackend.
func (d *daemon) RevokeToken(name string) error {
	if err := d.tokens.Revoke(name); err != nil {
		return err
	}
	d.auditRecord(tokenChange{Type: "cli.token", Name: name, Change: "revoked", TS: time.Now().UTC().Format(time.RFC3339Nano)})
	return nil
}

// tokenChange is the cli.token audit entry: an agent token was made or revoked.
type tokenChange struct {
	Type   string `json:"type"`
	Name   string `json:"name"`
	Change string `json:"change"`
	TS     string `json:"ts"`
}

// AuditFile implements control.Backend.
func (d *daemon) AuditFile() string { return d.auditPath }

// absentLocalBundles is ./.cli (absolute) when it is where this daemon takes bundles from at its
// next start (no --bundles, no $CLIHOST_BUNDLES) and it does not exist now. It is then a deny path:
// a call that creates it in its workspace has it removed afterwards (sandbox.Sweep), so that no
// tool plants bundles, with sandboxes of their own choosing, for the daemon's next start. An
// existing ./.cli is loaded, and kept read-only in calls like every bundle source (host.confine).
func absentLocalBundles(c config) (string, bool) {
	if len(c.bundles) > 0 || os.Getenv(registry.EnvBundles) != "" {
		return "", false
	}
	dir, err := filepath.Abs(registry.LocalDir)
	if err != nil {
		return "", false
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	return dir, true
}
