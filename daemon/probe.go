package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// probeMaxAge is how long a sandbox probe's result stands before status runs it again.
const probeMaxAge = 30 * time.Second

// probeCache holds the last sandbox probe; its lock also keeps two probes from running at once.
type probeCache struct {
	mu   sync.Mutex
	last host.ProbeResult
}

// probe returns what one real sandboxed process in the daemon's workspace found: the last result
// when it is younger than probeMaxAge (unless fresh), else a new one. A new result whose state or
// error differs from the last is logged.
func (d *Engine) probe(ctx context.Context, fresh bool) host.ProbeResult {
	d.probes.mu.Lock()
	defer d.probes.mu.Unlock()
	last := d.probes.last
	if !fresh && !last.Checked.IsZero() && time.Since(last.Checked) < probeMaxAge {
		return last
	}
	p := d.cur.Load().host.Probe(ctx, d.workspace)
	if last.Checked.IsZero() || p.State != last.State || p.Error != last.Error {
		logProbe(d.log, p)
	}
	d.probes.last = p
	d.metrics.setProbe(p)
	return p
}

// logProbe says what the sandbox probe found: INFO when a sandboxed process ran, with whom it ran
// as and what holds the limits; ERROR with the reason and a hint when it did not (every call
// fails then). With the sandbox off, sandboxOptions has warned already.
func logProbe(log *slog.Logger, p host.ProbeResult) {
	switch p.State {
	case host.ProbeWorks:
		args := []any{"uid", p.UID, "gid", p.GID, "user", p.User, "user_namespace", p.UserNS, "workspace", p.Workspace}
		for _, l := range p.Limits {
			if l.Limit == "memory" || l.Limit == "pids" {
				args = append(args, l.Limit, l.Mechanism)
			}
		}
		log.Info("kernel sandbox works", args...)
		if exe, ok := nsinit.Starter(); !ok {
			log.Info("no "+nsinit.HelperName+" helper beside clihostd: each sandbox starts from clihostd itself, about 1.2× slower per call",
				"searched", filepath.Join(filepath.Dir(exe), nsinit.HelperName),
				"hint", "build both into one folder (go run cannot): go build -o DIR/ ./cmd/clihostd ./cmd/clihost-sandbox")
		}
	case host.ProbeUnavailable:
		log.Error("kernel sandbox does NOT work: every call will be refused", "err", p.Error, "uid", p.UID, "user", p.User,
			"user_namespace", p.UserNS, "workspace", p.Workspace, "hint", p.Hint)
	}
}

// Daemon implements control.Backend.
func (d *Engine) Daemon(ctx context.Context, probe bool) control.DaemonStatus {
	return control.DaemonStatus{Version: d.cfg.Version, PID: os.Getpid(), UID: os.Geteuid(), GID: os.Getegid(), User: daemonUser(),
		StateDir: d.stateDir, Socket: d.socketPath, TokenFile: d.tokenFile, Workspace: d.workspace,
		Sandbox: d.probe(ctx, probe), Bundles: d.cur.Load().bundles}
}
