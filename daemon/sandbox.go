package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/rotate"
	"github.com/clihost/clihost/registry"
	"github.com/clihost/clihost/sandbox/cgroup"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// stateDamaged logs, once, that state.db was found damaged while the daemon runs. The daemon
// stays up: calls that need no state (no setup, login or secret) and the control API go on, the
// others fail with the store's error, and nothing reads or writes the file any more. Exiting
// instead would end every caller's in-flight call and gain nothing: a restart refuses the file
// (Open's consistency check) with the same advice.
func (d *Engine) stateDamaged(err error) {
	d.log.Error("STATE DATABASE DAMAGED: calls that need setup, login or secrets fail until it is restored; the others go on", "err", err)
}

// sandboxOptions turns the sandbox flags into the host's options, logging loudly when the sandbox
// is off or this host cannot build it (calls are then refused with sandbox_unavailable).
func sandboxOptions(log *slog.Logger, c Config, stateDir, socket string) (host.SandboxOptions, error) {
	// The state directory's secrets and records, never its bin/ (the installed CLIs run from there).
	o := host.SandboxOptions{Off: c.SandboxOff, ExtraDeny: []string{socket}, Limits: c.Limits, EgressMaxConns: c.EgressMaxConns, StateDir: stateDir}
	for _, name := range []string{"state.db", "token", "secrets.key"} {
		o.ExtraDeny = append(o.ExtraDeny, filepath.Join(stateDir, name))
	}
	o.ExtraDeny = append(o.ExtraDeny, rotate.Names(filepath.Join(stateDir, "audit.jsonl"), c.AuditKeep)...)
	if dir, ok := absentLocalBundles(c); ok {
		o.ExtraDeny = append(o.ExtraDeny, dir)
	}
	if filepath.IsAbs(c.Approvals) { // whoever writes the policy approves every call
		o.ExtraDeny = append(o.ExtraDeny, c.Approvals)
		o.Trusted = append(o.Trusted, c.Approvals) // and no workspace may hold it
	}
	if self, err := os.Executable(); err == nil { // its next run starts from there
		o.Trusted = append(o.Trusted, filepath.Dir(self))
	}
	o.Trusted = append(o.Trusted, podmanPaths()...)
	if c.AgentUser != "" {
		u, err := user.Lookup(c.AgentUser)
		if err != nil {
			return o, fmt.Errorf("--agent-user: %w", err)
		}
		if o.AgentUID, err = strconv.Atoi(u.Uid); err != nil || o.AgentUID == 0 {
			return o, fmt.Errorf("--agent-user %s: uid %s: bundle processes never run as root", c.AgentUser, u.Uid)
		}
		if o.AgentGID, err = strconv.Atoi(u.Gid); err != nil {
			return o, fmt.Errorf("--agent-user %s: gid %s: %w", c.AgentUser, u.Gid, err)
		}
	}
	for _, cidr := range c.EgressAdmit {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			return o, fmt.Errorf("--egress-admit: %w", err)
		}
		o.AdmitNets = append(o.AdmitNets, pfx.Masked())
	}
	for _, f := range strings.Split(c.EgressPorts, ",") {
		port, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || port < 1 || port > 65535 {
			return o, fmt.Errorf("--egress-ports: %q is not a port", f)
		}
		o.EgressPorts = append(o.EgressPorts, port)
	}
	// Whether the sandbox works is logged by the probe at start (Engine.probe).
	if o.Off {
		log.Warn("THE KERNEL SANDBOX IS OFF (--sandbox=off): every CLI runs with this daemon's full rights, without the bundles' filesystem, exec and network limits")
	} else {
		logLimits(log)
	}
	return o, nil
}

// podmanPaths are the folders of podman's configuration and image storage the daemon's engine:
// sandbox calls use, as its user (root: the system's): a tool writing containers.conf there gives
// every later container its volumes and hooks, and one writing the storage changes the images
// they run.
func podmanPaths() []string {
	if os.Geteuid() == 0 {
		return []string{"/etc/containers", "/var/lib/containers", "/usr/share/containers"}
	}
	var out []string
	if dir, err := os.UserConfigDir(); err == nil {
		out = append(out, filepath.Join(dir, "containers"))
	}
	data := os.Getenv("XDG_DATA_HOME")
	if !filepath.IsAbs(data) {
		if home, err := os.UserHomeDir(); err == nil {
			data = filepath.Join(home, ".local", "share")
		}
	}
	if filepath.IsAbs(data) {
		out = append(out, filepath.Join(data, "containers"))
	}
	return out
}

// DefaultSandboxPool is --sandbox-pool's default: two inits per CPU, at most 8.
func DefaultSandboxPool() int { return nsinit.DefaultPoolMax() }

// startPool starts the pool of sandbox inits calls take theirs from (Config.SandboxPool), when the
// sandbox is on and works here; without it every call starts its own init, which is slower but
// the same sandbox. It runs after reapLeftovers, which tags the inits (nsinit.SetOwner).
func (d *Engine) startPool() {
	n := d.cfg.SandboxPool
	if d.sandbox.Off || n <= 0 || nsinit.Check() != nil {
		return
	}
	d.sandbox.Pool = nsinit.NewPool(nsinit.PoolConfig{Max: n})
	d.log.Info("sandbox inits are started ahead of calls", "pool_max", n)
	go logZygote(d.log, d.sandbox.Pool)
}

// zygoteStartWait bounds logZygote's wait for the pool's zygote to start or fail.
const zygoteStartWait = 15 * time.Second

// logZygote says, once the pool's zygote has started or failed to (or zygoteStartWait passed),
// whether calls get the zygote's sandboxes or inits, which cost more per call (a warning with the
// reason). It returns without a word when the pool is closed first.
func logZygote(log *slog.Logger, pool *nsinit.Pool) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(zygoteStartWait); ; {
		select {
		case <-pool.Done():
			return
		case <-tick.C:
		}
		s := pool.Stats()
		switch {
		case s.ZygoteUp:
			log.Info("the sandbox zygote builds the calls' sandboxes (no program started per call)")
			return
		case s.ZygoteErr != "" || time.Now().After(deadline):
			log.Warn("no sandbox zygote: each call's sandbox starts an init, which costs more per call",
				"reason", cmp.Or(s.ZygoteErr, "it did not start within "+zygoteStartWait.String()),
				"hint", "calls run in the same sandbox, only slower; see docs/operations.md, The zygote")
			return
		}
	}
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

// absentLocalBundles is ./.cli (absolute) when it is where this daemon takes bundles from at its
// next start (no --bundles, no $CLIHOST_BUNDLES) and it does not exist now. It is then a deny path:
// a call that creates it in its workspace has it removed afterwards (sandbox.Sweep), so that no
// tool plants bundles, with sandboxes of their own choosing, for the daemon's next start. An
// existing ./.cli is loaded, and kept read-only in calls like every bundle source (host.confine).
func absentLocalBundles(c Config) (string, bool) {
	if len(c.Bundles) > 0 || os.Getenv(registry.EnvBundles) != "" {
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
