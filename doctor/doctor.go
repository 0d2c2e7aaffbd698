// Package doctor checks whether a host can run clihost and says what to fix: the kernel's sandbox
// features, the sandbox helper, the daemon (reachable, who it runs as, and a real sandboxed process
// it starts), its state directory and token, the bundles it serves and each one's readiness, and
// the systemd unit when one is installed. Each check is ok, warn or fail, with a message and a fix.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/sandbox/cgroup"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/clihost/clihost/sandboxprobe"
)

// Status is a check's outcome.
type Status string

// The outcomes, from best to worst.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one thing doctor looked at.
type Check struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Report is every check, in order.
type Report struct {
	Checks []Check `json:"checks"`
}

// Worst is the worst status of the report's checks (OK for none).
func (r Report) Worst() Status {
	worst := OK
	for _, c := range r.Checks {
		if c.Status == Fail {
			return Fail
		}
		if c.Status == Warn {
			worst = Warn
		}
	}
	return worst
}

// Healthy reports whether no check failed, and with strict, none warned either.
func (r Report) Healthy(strict bool) bool {
	w := r.Worst()
	return w == OK || w == Warn && !strict
}

// DefaultUnitPaths are where a systemd unit for clihostd is looked for.
var DefaultUnitPaths = []string{"/etc/systemd/system/clihostd.service", "/lib/systemd/system/clihostd.service", "/usr/lib/systemd/system/clihostd.service"}

// Options say where to look.
type Options struct {
	// Client talks to the daemon's control socket.
	Client *control.Client
	// BinDir is the folder of the clihost binaries (clihostctl's own): the helper must be there.
	BinDir string
	// UnitPaths are the candidate systemd unit files; nil means DefaultUnitPaths.
	UnitPaths []string
	// Systemctl runs `systemctl ARGS…` and returns its trimmed output and error; nil means the
	// real systemctl, when systemd runs (/run/systemd/system exists).
	Systemctl func(ctx context.Context, args ...string) (string, error)
}

// Run performs every check.
func Run(ctx context.Context, o Options) Report {
	var r Report
	add := func(cs ...Check) { r.Checks = append(r.Checks, cs...) }
	add(kernelChecks()...)
	add(memfdCheck())
	add(suidDumpableCheck(suidDumpableSysctl))
	add(hidepidCheck())
	add(helperCheck(o.BinDir))
	d, err := o.Client.Daemon(ctx, true)
	if err != nil {
		add(daemonDown(o.Client.Socket, err))
		add(cgroupCheck(nil))
	} else {
		add(daemonChecks(d)...)
		add(cgroupCheck(d.Sandbox.Limits))
		add(stateChecks(d)...)
		add(stateDBCheck(ctx, o.Client))
		add(bundleChecks(ctx, o.Client, d)...)
	}
	add(unitChecks(ctx, o)...)
	return r
}

// kernelChecks are the sandbox's kernel features, as this process sees them (nsinit.Probe):
// Landlock, namespaces (a user namespace unless root), seccomp.
func kernelChecks() []Check {
	s, err := nsinit.Probe()
	if err != nil {
		return []Check{{Name: "kernel", Status: Fail, Message: err.Error(),
			Fix: "run clihost on Linux ≥ 6.2 (amd64 or arm64) with Landlock enabled (lsm=…,landlock), seccomp, and unprivileged user namespaces " +
				"(sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1) or a root daemon"}}
	}
	return []Check{
		{Name: "landlock", Status: OK, Message: fmt.Sprintf("Landlock ABI v%d", s.LandlockABI)},
		usernsCheck(),
		{Name: "seccomp", Status: OK, Message: "seccomp filters with kill_process"},
	}
}

// The switches that keep unprivileged users from creating user namespaces.
var usernsSwitches = []struct {
	path string
	off  func(int) bool
	name string
}{
	{"/proc/sys/user/max_user_namespaces", func(n int) bool { return n == 0 }, "user.max_user_namespaces=0"},
	{"/proc/sys/kernel/unprivileged_userns_clone", func(n int) bool { return n == 0 }, "kernel.unprivileged_userns_clone=0"},
	{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", func(n int) bool { return n == 1 }, "kernel.apparmor_restrict_unprivileged_userns=1"},
}

// usernsCheck says whether unprivileged users may create user namespaces, which a non-root daemon
// (the systemd unit's) needs for every sandbox; a root daemon does not.
func usernsCheck() Check {
	for _, s := range usernsSwitches {
		data, err := os.ReadFile(s.path)
		if err != nil {
			continue // the kernel has no such switch
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && s.off(n) {
			return Check{Name: "user namespaces", Status: Warn,
				Message: s.name + ": unprivileged users cannot create user namespaces, so a non-root clihostd (the systemd unit) cannot build the sandbox; a root one can",
				Fix:     "allow them (sysctl -w " + strings.Replace(s.name, "=0", "=1", 1) + ", or an AppArmor profile for clihostd), or run clihostd as root with --agent-user"}
		}
	}
	return Check{Name: "user namespaces", Status: OK, Message: "unprivileged users may create them (a non-root clihostd builds its sandboxes in one)"}
}

// memfdSysctl is vm.memfd_noexec (Linux ≥ 6.3).
const memfdSysctl = "/proc/sys/vm/memfd_noexec"

// memfdCheck: a root daemon sets vm.memfd_noexec=2 in each sandbox; a non-root one cannot, and its
// seccomp filter refuses executable memfds instead.
func memfdCheck() Check {
	if _, err := os.Stat(memfdSysctl); err != nil {
		return Check{Name: "memfd_noexec", Status: Warn, Message: "the kernel has no vm.memfd_noexec (Linux < 6.3): a root clihostd cannot build the sandbox; a non-root one refuses executable memfds with seccomp",
			Fix: "upgrade the kernel to Linux ≥ 6.3, or run clihostd as an unprivileged user (the systemd unit does)"}
	}
	return Check{Name: "memfd_noexec", Status: OK, Message: "vm.memfd_noexec is available (a root daemon sets it to 2 in each sandbox; a non-root one refuses executable memfds with seccomp)"}
}

// suidDumpableSysctl is fs.suid_dumpable.
const suidDumpableSysctl = "/proc/sys/fs/suid_dumpable"

// suidDumpableCheck: while fs.suid_dumpable (read from path) is 1, a root daemon builds no sandbox
// (a process taking a call's uid could be traced by that uid while it shares root's memory, see
// nsinit's dumpable.go); a non-root one changes no ids and is not concerned.
func suidDumpableCheck(path string) Check {
	data, err := os.ReadFile(path)
	if err != nil {
		return Check{Name: "suid_dumpable", Status: Warn, Message: "cannot read fs.suid_dumpable: " + err.Error() + ": a root clihostd refuses every sandboxed call it cannot check"}
	}
	if v := strings.TrimSpace(string(data)); v == "1" {
		return Check{Name: "suid_dumpable", Status: Warn,
			Message: "fs.suid_dumpable is 1: a root clihostd refuses every sandboxed call (a process taking the caller's uid could be traced by that uid while it shares root's memory); a non-root one is not affected",
			Fix:     "sysctl -w fs.suid_dumpable=0 (or 2), and the same in /etc/sysctl.d to keep it"}
	}
	return Check{Name: "suid_dumpable", Status: OK, Message: "fs.suid_dumpable is not 1 (a root clihostd's sandboxed processes cannot be traced by their uid)"}
}

// cgroupCheck says what holds the per-call memory and process limits: the daemon's view (from its
// probe) when it runs, else this process's.
func cgroupCheck(limits []sandboxprobe.LimitMechanism) Check {
	mech := map[string]string{}
	reason := ""
	if limits != nil {
		for _, l := range limits {
			mech[l.Limit] = l.Mechanism
		}
	} else {
		m := cgroup.Detect()
		mech["memory"], mech["pids"], reason = string(m.Mechanism(cgroup.Memory)), string(m.Mechanism(cgroup.Pids)), m.Reason()
	}
	msg := fmt.Sprintf("per-call limits: memory %s, processes %s", enforcedBy(mech["memory"]), enforcedBy(mech["pids"]))
	if mech["memory"] == string(cgroup.None) || mech["pids"] == string(cgroup.None) {
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return Check{Name: "cgroups", Status: Warn, Message: msg + ": only rlimits and tmpfs sizes apply",
			Fix: "run clihostd under systemd with Delegate=yes (the shipped unit) on cgroup v2, or as root with the cgroup v1 memory and pids controllers mounted"}
	}
	return Check{Name: "cgroups", Status: OK, Message: msg}
}

// enforcedBy names the mechanism that holds a limit, or says it is not enforced.
func enforcedBy(mechanism string) string {
	if mechanism == "" || mechanism == string(cgroup.None) {
		return "NOT enforced"
	}
	return "by " + mechanism
}

// helperCheck looks for clihost-sandbox beside the binaries and compares its build with this one.
func helperCheck(binDir string) Check {
	p := filepath.Join(binDir, nsinit.HelperName)
	st, err := os.Stat(p)
	if err != nil {
		return Check{Name: "helper", Status: Warn, Message: fmt.Sprintf("%s not found: sandboxes start by re-executing clihostd, about 1.2× slower per call (docs/BENCHMARKS.md)", p),
			Fix: "install clihost-sandbox beside clihostd and clihostctl (go build -o " + binDir + " ./cmd/clihost-sandbox)"}
	}
	if err := trustworthy(p, st); err != nil {
		return Check{Name: "helper", Status: Fail, Message: err.Error() + ": clihostd will not use it",
			Fix: "chown root:root " + p + " and chmod 755 it and its folder"}
	}
	if msg := sameBuild(p); msg != "" {
		return Check{Name: "helper", Status: Warn, Message: msg, Fix: "install clihost-sandbox from the same build as clihostd and clihostctl"}
	}
	return Check{Name: "helper", Status: OK, Message: p + " (same build as clihostctl)"}
}

// trustworthy reports why a helper would be refused (see nsinit.UseHelper): owned by someone else
// than root and this user, or writable by group or others (it or its folder).
func trustworthy(p string, st os.FileInfo) error {
	for _, f := range []string{p, filepath.Dir(p)} {
		if f != p {
			var err error
			if st, err = os.Stat(f); err != nil {
				return err
			}
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			return fmt.Errorf("%s: no owner information", f)
		case sys.Uid != 0 && int(sys.Uid) != os.Geteuid():
			return fmt.Errorf("%s belongs to uid %d, neither root nor this user", f, sys.Uid)
		case st.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("%s is writable by group or others (%v)", f, st.Mode().Perm())
		}
	}
	return nil
}

// daemonDown is the check of a daemon that does not answer.
func daemonDown(socket string, err error) Check {
	if errors.Is(err, control.ErrNoDaemon) {
		return Check{Name: "daemon", Status: Fail, Message: fmt.Sprintf("clihostd is not running (no answer on %s)", socket),
			Fix: "start it: systemctl start clihostd (journalctl -u clihostd says why it stopped), or run clihostd; --socket or $CLIHOST_SOCKET names another socket"}
	}
	return Check{Name: "daemon", Status: Fail, Message: err.Error(),
		Fix: "run doctor as root, as the daemon's user, or as a member of its --group"}
}

// daemonChecks: who the daemon runs as, and what its sandbox probe found.
func daemonChecks(d control.DaemonStatus) []Check {
	who := Check{Name: "daemon", Status: OK, Message: fmt.Sprintf("clihostd %s, pid %d, runs as uid %d%s, workspace %s", d.Version, d.PID, d.UID, paren(d.User), d.Workspace)}
	probe := Check{Name: "sandbox probe", Status: OK}
	p := d.Sandbox
	switch p.State {
	case sandboxprobe.Works:
		how := "in a user namespace"
		if !p.UserNS {
			how = "from a root daemon"
		}
		probe.Message = fmt.Sprintf("clihostd started a sandboxed process as uid %d%s, %s, in %s", p.UID, paren(p.User), how, p.Workspace)
		if p.WorkspaceDenied != "" {
			probe.Status, probe.Fix = Fail, p.Hint
			probe.Message = fmt.Sprintf("clihostd started a sandboxed process as uid %d%s, %s, but MCP clients' calls are refused: %s",
				p.UID, paren(p.User), how, p.WorkspaceDenied)
		}
	case sandboxprobe.Off:
		probe.Status, probe.Message = Warn, "the kernel sandbox is OFF (clihostd --sandbox=off): CLIs run with the daemon's full rights"
		probe.Fix = "remove --sandbox=off from clihostd's command line"
	default:
		probe.Status, probe.Message, probe.Fix = Fail, "clihostd cannot start a sandboxed process: "+p.Error, p.Hint
	}
	return []Check{who, probe}
}

// stateChecks: the state directory is the daemon's and 0700 (0711 when per-user homes live in it;
// another mode is a warning); the token file is the daemon's and 0600 (another mode fails).
func stateChecks(d control.DaemonStatus) []Check {
	dir := fileCheck("state directory", d.StateDir, d.UID, []os.FileMode{0o700, 0o711}, "chmod 700 "+d.StateDir)
	if dir.Status == Fail && strings.Contains(dir.Message, " has mode ") {
		// Its secrets are files of their own mode (checked below for the token); a wider
		// directory lets others list them and read the installed binaries.
		dir.Status = Warn
	}
	tok := fileCheck("token file", d.TokenFile, d.UID, []os.FileMode{0o600}, "chmod 600 "+d.TokenFile+" (then restart clihostd: anyone could have read the token; delete the file to make a new one)")
	return []Check{dir, tok}
}

// fileCheck checks that path belongs to uid and has one of the modes.
func fileCheck(name, path string, uid int, modes []os.FileMode, fix string) Check {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrPermission) {
		return Check{Name: name, Status: Warn, Message: fmt.Sprintf("%s: cannot be checked by this user: %v", path, err), Fix: "run clihostctl doctor as root or as the daemon's user"}
	}
	if err != nil {
		return Check{Name: name, Status: Fail, Message: err.Error(), Fix: "restart clihostd: it creates it"}
	}
	owner := -1
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		owner = int(sys.Uid)
	}
	if owner != uid {
		return Check{Name: name, Status: Fail, Message: fmt.Sprintf("%s belongs to uid %d, not to the daemon's uid %d", path, owner, uid),
			Fix: fmt.Sprintf("chown %d %s", uid, path)}
	}
	for _, m := range modes {
		if st.Mode().Perm() == m {
			return Check{Name: name, Status: OK, Message: fmt.Sprintf("%s: mode %04o, owner uid %d", path, m, uid)}
		}
	}
	want := make([]string, len(modes))
	for i, m := range modes {
		want[i] = fmt.Sprintf("%04o", m)
	}
	return Check{Name: name, Status: Fail, Message: fmt.Sprintf("%s has mode %04o, want %s: others may read what it holds", path, st.Mode().Perm(), strings.Join(want, " or ")), Fix: fix}
}

// bundleChecks: how many bundles the daemon serves (a warning on none, and on each missing or
// empty folder), and each one's readiness with its fix.
func bundleChecks(ctx context.Context, c *control.Client, d control.DaemonStatus) []Check {
	b := d.Bundles
	sum := Check{Name: "bundles", Status: OK, Message: fmt.Sprintf("%d loaded (sources: %s)", b.Loaded, strings.Join(b.Sources, ", "))}
	if b.Refused > 0 {
		sum.Status, sum.Message = Warn, sum.Message+fmt.Sprintf("; %d refused", b.Refused)
		sum.Fix = "clihostd -check (with the daemon's flags) and clihostctl lint FOLDER say why"
	}
	out := []Check{sum}
	for _, w := range b.Warnings {
		out = append(out, Check{Name: "bundles", Status: Warn, Message: w,
			Fix: "put bundle folders (each with a CLI.md) in the daemon's --bundles folder, or serve the built-in catalog (no --no-catalog); then systemctl reload clihostd"})
	}
	st, err := c.Status(ctx, "")
	if err != nil {
		return append(out, Check{Name: "bundles", Status: Fail, Message: "bundle status: " + err.Error()})
	}
	for _, s := range st {
		out = append(out, readiness(s))
		if s.Requires != nil {
			out = append(out, requiresCheck(s.Key, *s.Requires))
		}
	}
	return out
}

// requiresCheck is one bundle's requires.min_disk_mb and min_memory_mb against what the daemon
// measured: a warning naming both amounts when the host falls short.
func requiresCheck(key string, r control.RequiresStatus) Check {
	name := "requires " + key
	if r.Problem != "" {
		return Check{Name: name, Status: Warn, Message: r.Problem, Fix: r.Hint}
	}
	var parts []string
	if r.MinDiskMB > 0 {
		parts = append(parts, fmt.Sprintf("min_disk_mb %d: %d MB free on the filesystem of %s", r.MinDiskMB, r.FreeDiskMB, r.DiskPath))
	}
	if r.MinMemoryMB > 0 {
		parts = append(parts, fmt.Sprintf("min_memory_mb %d: %d MB available (%s)", r.MinMemoryMB, r.AvailableMemoryMB, r.MemoryBound))
	}
	return Check{Name: name, Status: OK, Message: "met: " + strings.Join(parts, "; ")}
}

// readiness is one bundle's readiness check.
func readiness(s control.BundleStatus) Check {
	name := "bundle " + s.Key
	if s.Ready {
		return Check{Name: name, Status: OK, Message: fmt.Sprintf("ready: %s %s at %s", s.Name, s.Version, s.BinPath)}
	}
	msg := fmt.Sprintf("not ready (install %s, setup %s, auth %s)", s.Install, s.Setup, s.Auth)
	fix := ""
	if i := strings.LastIndex(s.Reason, "run: "); i >= 0 {
		msg += ": " + strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s.Reason[:i]), " or"), ";")
		fix = s.Reason[i+len("run: "):]
	} else if s.Reason != "" {
		msg += ": " + s.Reason
	}
	if s.Install == "missing" {
		// A catalog CLI nobody installed is a choice, not a fault: its tools answer not_installed.
		return Check{Name: name, Status: OK, Message: "not installed (its tools answer not_installed)", Fix: fix}
	}
	return Check{Name: name, Status: Warn, Message: msg, Fix: fix}
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
