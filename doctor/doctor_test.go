package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandboxprobe"
)

// TestHealthy: exit status follows the worst check; --strict fails on warnings.
func TestHealthy(t *testing.T) {
	for _, tc := range []struct {
		checks         []Check
		normal, strict bool
		worst          Status
	}{
		{nil, true, true, OK},
		{[]Check{{Status: OK}, {Status: Warn}}, true, false, Warn},
		{[]Check{{Status: Warn}, {Status: Fail}, {Status: OK}}, false, false, Fail},
	} {
		r := Report{Checks: tc.checks}
		if r.Worst() != tc.worst || r.Healthy(false) != tc.normal || r.Healthy(true) != tc.strict {
			t.Errorf("%+v: worst %s healthy %v strict %v", tc.checks, r.Worst(), r.Healthy(false), r.Healthy(true))
		}
	}
}

// TestFileCheck: the token must be the daemon's and 0600, the state directory 0700 or 0711; a
// token readable by others fails with the chmod that fixes it.
func TestFileCheck(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c := fileCheck("token file", tok, os.Geteuid(), []os.FileMode{0o600}, "chmod 600 "+tok); c.Status != OK {
		t.Fatalf("0600: %+v", c)
	}
	if err := os.Chmod(tok, 0o644); err != nil {
		t.Fatal(err)
	}
	c := fileCheck("token file", tok, os.Geteuid(), []os.FileMode{0o600}, "chmod 600 "+tok)
	if c.Status != Fail || c.Message != tok+" has mode 0644, want 0600: others may read what it holds" || c.Fix != "chmod 600 "+tok {
		t.Fatalf("0644: %+v", c)
	}
	if c := fileCheck("token file", tok, os.Geteuid()+1, []os.FileMode{0o644}, ""); c.Status != Fail || !strings.Contains(c.Message, "not to the daemon's uid") {
		t.Fatalf("another owner: %+v", c)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if c := fileCheck("state directory", dir, os.Geteuid(), []os.FileMode{0o700, 0o711}, ""); c.Status != OK {
		t.Fatalf("0711 state directory: %+v", c)
	}
}

// TestReadiness: a bundle that is installed but not ready is a warning whose fix is the command its
// reason names; one nobody installed is no fault (ok, with the install command as its fix).
func TestReadiness(t *testing.T) {
	c := readiness(control.BundleStatus{Key: "gh@1", Install: "version_mismatch", Setup: "none", Auth: "unknown",
		Reason: "/usr/bin/gh: \"gh --version\" failed with exit code 1; run: clihostctl install gh --force"})
	if c.Status != Warn || c.Fix != "clihostctl install gh --force" ||
		c.Message != `not ready (install version_mismatch, setup none, auth unknown): /usr/bin/gh: "gh --version" failed with exit code 1` {
		t.Fatalf("%+v", c)
	}
	c = readiness(control.BundleStatus{Key: "gh@1", Install: "missing", Setup: "none", Auth: "unknown",
		Reason: "gh is not installed: not found on PATH; run: clihostctl install gh"})
	if c.Status != OK || c.Fix != "clihostctl install gh" || c.Message != "not installed (its tools answer not_installed)" {
		t.Fatalf("%+v", c)
	}
	c = readiness(control.BundleStatus{Key: "jq@1", Name: "jq", Version: "1.6.0", BinPath: "/usr/bin/jq", Ready: true})
	if c.Status != OK || c.Message != "ready: jq 1.6.0 at /usr/bin/jq" {
		t.Fatalf("%+v", c)
	}
}

// TestUnitChecks reads a unit like the shipped one: a missing --bundles folder is a warning, a
// missing workspace, user or binary fails, and systemd's answer decides whether it is active.
func TestUnitChecks(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "clihostd")
	if err := fixture.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	unitFile := filepath.Join(dir, "clihostd.service")
	text := "[Service]\nExecStart=" + bin + " --bundles " + filepath.Join(dir, "bundles") + " --workspace=" + ws +
		" --group root\n# User=nobody-at-all\nUser=root\nGroup=root\nReadWritePaths=" + ws + "\n"
	if err := os.WriteFile(unitFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	inactive := func(context.Context, ...string) (string, error) { return "inactive", errors.New("exit status 3") }
	got := unitChecks(context.Background(), Options{UnitPaths: []string{filepath.Join(dir, "none"), unitFile}, BinDir: dir, Systemctl: inactive})
	want := []Check{
		{Name: "systemd unit", Status: OK, Message: unitFile},
		{Name: "systemd unit", Status: Warn, Message: "--bundles " + filepath.Join(dir, "bundles") + " does not exist: the daemon serves the rest without it",
			Fix: "mkdir -p " + filepath.Join(dir, "bundles") + " and put bundle folders there"},
		{Name: "systemd unit", Status: Fail, Message: ws + " (--workspace or ReadWritePaths=) does not exist: the daemon cannot start or calls fail",
			Fix: "mkdir -p " + ws + " && chown root " + ws},
		{Name: "systemd unit", Status: Fail, Message: "clihostd.service is inactive", Fix: "systemctl enable --now clihostd; journalctl -u clihostd -e says why it stopped"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d checks %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("check %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "User=root", "User=no-such-user-clihost", 1)
	if err := os.WriteFile(unitFile, []byte(strings.Replace(text, bin, filepath.Join(dir, "gone"), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	active := func(context.Context, ...string) (string, error) { return "active", nil }
	got = unitChecks(context.Background(), Options{UnitPaths: []string{unitFile}, BinDir: dir, Systemctl: active})
	var msgs []string
	for _, c := range got {
		msgs = append(msgs, string(c.Status)+" "+c.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, w := range []string{"fail ExecStart runs " + filepath.Join(dir, "gone") + ", which is not an executable file",
		"fail User=no-such-user-clihost does not exist", "ok clihostd.service is active"} {
		if !strings.Contains(all, w) {
			t.Errorf("missing %q in\n%s", w, all)
		}
	}
	if got := unitChecks(context.Background(), Options{UnitPaths: []string{filepath.Join(dir, "none")}}); len(got) != 1 || got[0].Status != OK {
		t.Fatalf("no unit: %+v", got)
	}
}

// TestParseExecStart: --flag VALUE and --flag=VALUE, repeated flags, systemd's prefixes.
func TestParseExecStart(t *testing.T) {
	bin, flags := parseExecStart("-/usr/local/bin/clihostd --bundles /a --bundles=/b --check --workspace /w")
	if bin != "/usr/local/bin/clihostd" || strings.Join(flags["--bundles"], ",") != "/a,/b" || strings.Join(flags["--workspace"], ",") != "/w" {
		t.Fatalf("%s %v", bin, flags)
	}
}

// TestStateChecks: a state directory wider than 0711 is a warning (its files keep their own
// modes), a token file readable by others fails.
func TestStateChecks(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	got := stateChecks(control.DaemonStatus{UID: os.Geteuid(), StateDir: dir, TokenFile: tok})
	if len(got) != 2 || got[0].Status != Warn || got[0].Fix != "chmod 700 "+dir || got[1].Status != Fail {
		t.Fatalf("%+v", got)
	}
}

// TestProbeChecks: a working probe is ok; one whose workspace the daemon's calls may not use is a
// failure carrying the fix (every MCP call there is refused); a probe that failed fails with its hint.
func TestProbeChecks(t *testing.T) {
	works := sandboxprobe.Result{State: sandboxprobe.Works, UID: 65534, User: "nobody", Workspace: "/srv/ws"}
	denied := works
	denied.WorkspaceDenied, denied.Hint = "uid 65534 (nobody) may not use the workspace /root/p", "run clihostd --agent-user NAME"
	failed := sandboxprobe.Result{State: sandboxprobe.Unavailable, Error: "clone: no space left on device", Hint: "run clihostctl doctor"}
	for _, tc := range []struct {
		p    sandboxprobe.Result
		want Status
		fix  string
	}{{works, OK, ""}, {denied, Fail, "run clihostd --agent-user NAME"}, {failed, Fail, "run clihostctl doctor"}} {
		c := daemonChecks(control.DaemonStatus{Sandbox: tc.p})[1]
		if c.Name != "sandbox probe" || c.Status != tc.want || c.Fix != tc.fix {
			t.Errorf("%+v: %+v, want %s with fix %q", tc.p, c, tc.want, tc.fix)
		}
	}
}

// TestCgroupCheckSaysWhatIsNotEnforced: a limit no cgroup holds reads "NOT enforced", not "by none".
func TestCgroupCheckSaysWhatIsNotEnforced(t *testing.T) {
	none := []sandboxprobe.LimitMechanism{{Limit: "memory", Mechanism: "none"}, {Limit: "pids", Mechanism: "none"}}
	c := cgroupCheck(none)
	if c.Status != Warn || c.Message != "per-call limits: memory NOT enforced, processes NOT enforced: only rlimits and tmpfs sizes apply" {
		t.Fatalf("no cgroup: %+v", c)
	}
	v2 := []sandboxprobe.LimitMechanism{{Limit: "memory", Mechanism: "cgroup v2"}, {Limit: "pids", Mechanism: "cgroup v2"}}
	if c := cgroupCheck(v2); c.Status != OK || c.Message != "per-call limits: memory by cgroup v2, processes by cgroup v2" {
		t.Fatalf("cgroup v2: %+v", c)
	}
}

// TestRequiresLine: a bundle's requires.min_disk_mb / min_memory_mb is one line, a warning with
// the daemon's hint when the host falls short, else the amounts it found.
func TestRequiresLine(t *testing.T) {
	c := requiresCheck("big@1", control.RequiresStatus{MinDiskMB: 500, DiskPath: "/var/lib/clihost/bin", FreeDiskMB: 7,
		Problem: "this host does not meet the bundle's requirements: 7 MB free on the filesystem of /var/lib/clihost/bin, the bundle's requires.min_disk_mb is 500 MB",
		Hint:    "free at least 493 MB on the filesystem of /var/lib/clihost/bin, then install again"})
	if c.Name != "requires big@1" || c.Status != Warn || !strings.Contains(c.Message, "7 MB free") || !strings.Contains(c.Fix, "493 MB") {
		t.Errorf("short: %+v", c)
	}
	c = requiresCheck("big@1", control.RequiresStatus{MinDiskMB: 5, MinMemoryMB: 64, DiskPath: "/s/bin", FreeDiskMB: 900, AvailableMemoryMB: 2048, MemoryBound: "MemAvailable"})
	if c.Status != OK || c.Message != "met: min_disk_mb 5: 900 MB free on the filesystem of /s/bin; min_memory_mb 64: 2048 MB available (MemAvailable)" {
		t.Errorf("met: %+v", c)
	}
}

// TestSuidDumpableCheck: fs.suid_dumpable=1 is a warning naming the fix (a root daemon refuses its
// calls then); 0 and 2 are fine, and a file that cannot be read is a warning.
func TestSuidDumpableCheck(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content string
		want    Status
	}{{"0\n", OK}, {"2\n", OK}, {"1\n", Warn}} {
		path := filepath.Join(dir, "suid_dumpable")
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got := suidDumpableCheck(path)
		if got.Status != c.want || c.want == Warn && !strings.Contains(got.Fix, "sysctl -w fs.suid_dumpable=0") {
			t.Errorf("fs.suid_dumpable %q: %+v, want %s", c.content, got, c.want)
		}
	}
	if got := suidDumpableCheck(filepath.Join(dir, "missing")); got.Status != Warn {
		t.Errorf("an unreadable fs.suid_dumpable: %+v, want a warning", got)
	}
}
