// Package daemon is clihostd's engine: it keeps the loaded bundles (one generation at a time,
// swapped in by Reload), their lifecycle state in the store, the agent tokens, the approval gate
// and the audit log, and implements control.Backend and its optional backends
// (control.StateBackend, control.ApprovalBackend, control.TokenBackend) over them. Serve runs the
// control socket and the MCP listener; cmd/clihostd only parses flags and wires an Engine up.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/authstate"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/internal/inflight"
	"github.com/clihost/clihost/internal/rotate"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/setup"
	"github.com/clihost/clihost/store"
)

// DefaultEgressMaxConns is the egress connections one call may hold at once unless
// Config.EgressMaxConns says otherwise.
const DefaultEgressMaxConns = egress.DefaultMaxConns

// DefaultMaxCalls and DefaultMaxCallsPerCaller bound the calls a daemon runs at once, in total and
// for one caller (a control socket's user, an MCP agent's token), unless Config says otherwise.
const (
	DefaultMaxCalls          = 64
	DefaultMaxCallsPerCaller = 16
)

// Config is how an Engine is set up; cmd/clihostd fills it from its flags, whose names the
// errors about a field use.
type Config struct {
	StateDir  string   // --state; "" is control.DefaultStateDir
	Socket    string   // --socket; "" is control.DefaultSocket(StateDir)
	Bundles   []string // --bundles: bundle folders served beside the catalog
	NoCatalog bool     // --no-catalog: serve only Bundles
	Workspace string   // --workspace: where MCP clients' tools run; "" is the current directory
	HTTPAddr  string   // --http: the MCP and metrics listener
	Group     string   // --group: a group whose members may use the control socket

	SandboxOff     bool             // --sandbox=off: bundle processes run with the daemon's full rights
	AgentUser      string           // --agent-user: who bundle processes run as when the daemon is root
	EgressAdmit    []string         // --egress-admit: CIDR ranges allowed names may resolve to
	EgressPorts    string           // --egress-ports: comma-separated destination ports
	EgressMaxConns int              // --egress-max-conns: egress connections one call may hold at once
	Limits         isolation.Limits // --limit-*: per-call resource limits (host.LimitFlags)
	SandboxPool    int              // --sandbox-pool: the most sandbox inits kept started ahead of calls; 0: none

	AuditMaxSize int64         // --audit-max-size: the audit log's size before it is rotated
	AuditKeep    int           // --audit-keep: rotated audit logs kept
	Approvals    string        // --approvals: the approval policy file
	DrainTimeout time.Duration // --drain-timeout: how long Serve waits for calls in flight when ctx ends
	// MaxCalls (--max-calls) and MaxCallsPerCaller (--max-calls-per-caller) bound the calls
	// running at once, in total and for one caller (inflight); 0 is no bound.
	MaxCalls, MaxCallsPerCaller int

	// BreakerThreshold is how many consecutive failed calls open a provider's circuit breaker, and
	// BreakerCooldown how long it stays open before a probe call; 0 is the default of each.
	BreakerThreshold int
	BreakerCooldown  time.Duration

	Version string // the daemon's version, in status, MCP and the log
}

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

// Engine is the daemon: New opens its state and loads its bundles, Serve serves them, Close
// releases the state. Its methods implement control.Backend and are safe for concurrent use.
type Engine struct {
	log        *slog.Logger
	cfg        Config
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
	reloadMu   sync.Mutex // one reload at a time (SIGHUP, the bundle watcher)
	setup      *setup.Engine
	auth       *authstate.Machine
	user       string // MCP calls run as this user's setup and login scope
	probes     probeCache
	approvals  *approval.Gate // outlives reloads: pending approvals and the key of their requestStates
	closeOnce  sync.Once
	breakers   breakers          // the provider bundles' circuit breakers; outlive reloads
	inFlight   *inflight.Limiter // the calls running at once; outlives reloads
	policies   *sandbox.Cache    // the sandbox policies of recent calls; outlives reloads

	page pageSessions // the status page's login codes and sessions (statuspage.go)
}

var (
	_ control.Backend         = (*Engine)(nil)
	_ control.StateBackend    = (*Engine)(nil)
	_ control.ApprovalBackend = (*Engine)(nil)
	_ control.TokenBackend    = (*Engine)(nil)
	_ control.ProviderBackend = (*Engine)(nil)
)

// auditRecord appends one JSON record to the audit log.
func (d *Engine) auditRecord(v any) {
	line, err := json.Marshal(v)
	if err == nil {
		_, _ = d.audit.Write(append(line, '\n'))
	}
}

// New opens the state directory (taking the store's lock: ErrLocked says another clihostd runs),
// kills the sandboxes a previous daemon on it left, loads the approval policy and the bundles and
// probes the sandbox once. Serve then serves them; Close releases what New opened.
func New(ctx context.Context, log *slog.Logger, c Config) (*Engine, error) {
	d := &Engine{log: log, cfg: c, metrics: newMetrics(), inFlight: inflight.New(c.MaxCalls, c.MaxCallsPerCaller),
		policies: sandbox.NewCache()}
	if err := d.open(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Engine) open(ctx context.Context) error {
	c := d.cfg
	var err error
	if d.stateDir = c.StateDir; d.stateDir == "" {
		if d.stateDir, err = control.DefaultStateDir(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(d.stateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if d.store, err = store.Open(d.stateDir, store.Options{OnDamaged: d.stateDamaged}); err != nil {
		return err // ErrLocked says another clihostd runs
	}
	if err := d.reapLeftovers(); err != nil {
		return err
	}
	d.tokenFile = filepath.Join(d.stateDir, "token")
	if d.tokens, err = agenttoken.Open(d.stateDir); err != nil {
		return err
	}
	d.auditPath = filepath.Join(d.stateDir, "audit.jsonl")
	if d.audit, err = rotate.Open(d.auditPath, rotate.Options{MaxSize: c.AuditMaxSize, Keep: c.AuditKeep}); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	secrets, err := store.OpenSecrets(d.store, filepath.Join(d.stateDir, "secrets.key"))
	if err != nil {
		return err
	}
	d.setup = &setup.Engine{Store: d.store, Secrets: secrets}
	d.auth = &authstate.Machine{Store: d.store, Audit: d.auditRecord}
	d.user = daemonUser()
	policy, err := approval.LoadPolicy(c.Approvals)
	if err != nil {
		return fmt.Errorf("%w (fix it, or start with --approvals naming another file)", err)
	}
	d.approvals = approval.NewGate(policy).Served() // logged with the bundles it applies to, by Reload
	if d.workspace, err = resolveWorkspace(c.Workspace); err != nil {
		return err
	}
	if d.socketPath = c.Socket; d.socketPath == "" {
		d.socketPath = control.DefaultSocket(d.stateDir)
	}
	if d.sandbox, err = sandboxOptions(d.log, c, d.stateDir, d.socketPath); err != nil {
		return err
	}
	if e := ownedOverlap(d.workspace, d.stateDir, d.sandbox); e != nil {
		return fmt.Errorf("--workspace: %s (%s)", e.Message, e.Hint)
	}
	d.startPool()
	if err := d.Reload(); err != nil {
		return err
	}
	d.probe(ctx, true) // logs what a real sandboxed process finds
	return nil
}

// resolveWorkspace is the daemon's workspace (the current directory when ws is "") as an absolute
// path without symbolic links, as control requests name it (setup and login scopes key on it).
func resolveWorkspace(ws string) (string, error) {
	var err error
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return "", err
		}
	}
	if ws, err = filepath.Abs(ws); err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	return ws, nil
}

// Close releases the state database's lock and closes the audit log. It is safe to call more than
// once; the Engine must not be used after it.
func (d *Engine) Close() {
	d.closeOnce.Do(func() {
		if d.sandbox.Pool != nil {
			d.sandbox.Pool.Close()
		}
		runner.Cleanup(5 * time.Second) // the last calls' sandboxes exit and their groups go

		if d.store != nil {
			_ = d.store.Close()
		}
		if d.audit != nil {
			_ = d.audit.Close()
		}
	})
}

// Check loads the bundles of c once and logs each as loaded or refused, each warning (a missing or
// empty folder, no bundles at all) and the approval policy. It fails when a bundle is refused, none
// is loaded or the policy does not parse: a daemon that would serve nothing fails its check.
func Check(log *slog.Logger, c Config) error {
	reg, sum, err := loadBundles(log, c)
	if err != nil {
		log.Error("loading bundles failed", "err", err)
		return fmt.Errorf("loading bundles: %w", err)
	}
	policy, perr := approval.LoadPolicy(c.Approvals)
	if perr != nil {
		log.Error("approval policy refused", "err", perr)
	} else {
		logPolicy(log, policy, reg, nil)
	}
	switch {
	case perr != nil:
		return perr
	case sum.Refused > 0:
		return fmt.Errorf("%d bundles refused", sum.Refused)
	case sum.Loaded == 0:
		return errors.New("no bundles loaded")
	}
	return nil
}
