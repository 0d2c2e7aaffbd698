package deploy

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// unitFile is the shipped unit, relative to this package.
const unitFile = "../../deploy/clihostd.service"

// unit is the [Service] section of a systemd unit: each key's last value.
type unit map[string]string

// parseUnit reads the [Service] section of path (comments, blank lines and other sections skipped).
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		case section == "Service":
			if k, v, ok := strings.Cut(line, "="); ok {
				u[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// execStart is the unit's ExecStart with its absolute paths moved under root and the daemon
// replaced by the one built for the test; the flags stay as shipped. One flag is added: --http
// 127.0.0.1:0, so that the test does not take the default port 8931 from anything else on the host.
func (u unit) execStart(t *testing.T, root string) []string {
	t.Helper()
	words := strings.Fields(u["ExecStart"])
	if len(words) == 0 || filepath.Base(words[0]) != "clihostd" {
		t.Fatalf("%s: ExecStart %q does not run clihostd", unitFile, u["ExecStart"])
	}
	argv := []string{bin.daemon}
	for _, w := range words[1:] {
		if strings.HasPrefix(w, "/") {
			w = filepath.Join(root, w)
		}
		argv = append(argv, w)
	}
	return append(argv, "--http", "127.0.0.1:0")
}

// flagValue is the value of --name in argv.
func flagValue(argv []string, name string) string {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// mode parses an octal mode key (the default when absent).
func (u unit) mode(t *testing.T, key string, def os.FileMode) os.FileMode {
	t.Helper()
	v, ok := u[key]
	if !ok {
		return def
	}
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil {
		t.Fatalf("%s: %s=%s: %v", unitFile, key, v, err)
	}
	return os.FileMode(m)
}

// TestUnit starts clihostd the way systemd starts deploy/clihostd.service: as its User= and Group=
// with their supplementary groups (setpriv --init-groups), no new privileges and an empty bounding
// set, its UMask, STATE_DIRECTORY and RUNTIME_DIRECTORY made with the unit's modes and owner, a
// NOTIFY_SOCKET, and the unit's own ExecStart flags (paths moved under a temporary root). The
// operator's bundle folder holds one bundle; a member of the socket's group (alice) calls jq and
// that bundle in the unit's workspace; mallory, outside the group, is refused; root installs gh
// (sudo clihostctl install) and runs clihostctl doctor against it. The mount hardening (ProtectSystem=,
// ProtectHome=, PrivateTmp=, ReadWritePaths=) and Delegate= are systemd's and are not reproduced.
func TestUnit(t *testing.T) {
	need(t)
	fixture.Need(t, "jq")
	u := parseUnit(t, unitFile)
	if u["User"] != "clihost" || u["Group"] != "clihost" {
		t.Fatalf("%s: User=%s Group=%s; the test maps clihost to %s", unitFile, u["User"], u["Group"], svc.name)
	}
	root := base // svc's home, base/var/lib/clihost, is the unit's state directory, as useradd --home-dir makes it
	argv := u.execStart(t, root)
	if g := flagValue(argv, "--group"); g != "clihost" {
		t.Fatalf("%s: ExecStart's --group is %q; the test maps clihost to %s", unitFile, g, svcGroup)
	}
	for i := range argv {
		if argv[i] == "clihost" && i > 0 && argv[i-1] == "--group" {
			argv[i] = svcGroup
		}
	}
	what := "the systemd unit (User=" + svc.name + ", " + strings.Join(argv[1:], " ") + ")"

	// The operator's folders, as docs/operations.md makes them, except the workspace's mode: 2770
	// (not install -d's 0755), so that both the daemon and the group's members may use it (a caller
	// may name only a workspace it could read, write and search itself; setgid keeps files the
	// group's).
	bundles, ws := flagValue(argv, "--bundles"), flagValue(argv, "--workspace")
	mkdir(t, bundles, 0o755, 0, 0)
	writeBundles(t, bundles, markBundle())
	grp, err := lookupGroup(svcGroup)
	if err != nil {
		t.Fatal(err)
	}
	mkdir(t, ws, 0o2770, svc.uid, grp)
	writeFile(t, filepath.Join(ws, "data.json"), sampleJSON, 0o640, alice.uid, grp)
	// systemd's StateDirectory= and RuntimeDirectory=, owned by User= and Group=.
	state := filepath.Join(root, "var/lib", u["StateDirectory"])
	runtimeDir := filepath.Join(root, "run", u["RuntimeDirectory"])
	mkdir(t, state, u.mode(t, "StateDirectoryMode", 0o755), svc.uid, grp)
	mkdir(t, runtimeDir, u.mode(t, "RuntimeDirectoryMode", 0o755), svc.uid, grp)
	if state != svc.home {
		t.Fatalf("the state directory %s is not the service user's home %s", state, svc.home)
	}
	notify := notifySocket(t)

	d := startDaemon(t, daemonSpec{what: what, argv: u.setpriv(t, svc, grp, argv), dir: "/", env: append(userEnv(svc),
		"SHELL=/usr/sbin/nologin", "STATE_DIRECTORY="+state, "RUNTIME_DIRECTORY="+runtimeDir,
		"NOTIFY_SOCKET="+notify.LocalAddr().String(), "WATCHDOG_USEC=30000000")})
	t.Run("notifies systemd", func(t *testing.T) { expectReady(t, what, notify) })

	st := d.status(t, alice)
	expectCatalogPlus(t, what, st, "mark@1")
	// What status tells a member to run must prepare what it reports, the agents' scope: as the
	// daemon's user, in the daemon's workspace.
	for _, b := range st.bundles {
		want := "not logged in; run: sudo -u " + svc.name + " clihostctl login gh --workspace " + ws
		if b.Key == "gh@1" && b.Install == "installed" && b.Reason != want {
			t.Errorf("%s: status as %v says gh is %q, want %q", what, alice, b.Reason, want)
		}
	}
	// The operator's bundle is loaded with or without the catalog: it shows whether the sandbox works.
	uid, ok, mark := d.ranAs(t, alice, ws, "the operator's bundle from the --bundles folder runs in the sandbox")
	if ok && uid != svc.uid {
		t.Errorf("%s: the operator's bundle mark ran as uid %d; under a daemon that is not root it runs as the daemon's uid %d", what, uid, svc.uid)
	}
	expectSandboxTruthful(t, what, st, ok, mark)
	if working, text := sandboxReported(st); !working {
		t.Errorf("%s: status says the sandbox is %q; under the shipped unit it must work", what, text)
	}
	// What a CLI writes in the group's workspace stays the group's, whatever the unit's UMask=0077
	// (touch creates 0666 less the umask: 0660 with the workspace's 0007, 0600 with the unit's).
	shared := "shared-mark"
	if e := d.mustCall(t, alice, ws, "mark", "file", fmt.Sprintf(`{"name": %q}`, shared), "a CLI writes a file in the group's workspace"); e.OK {
		if fi, err := os.Lstat(filepath.Join(ws, shared)); err != nil || fi.Mode().Perm() != 0o660 {
			t.Errorf("%s: a file a CLI wrote in the group's 2770 workspace: %v %v, want mode 0660 (the group's members use it too)", what, fi, err)
		}
	}
	// Every CLI runs as the daemon's user with one HOME: a member's own login would serve every
	// caller (bob acting as alice on GitHub). Only the daemon's user logs the CLIs in.
	if r := ctl(t, alice, d.socket, "login", "gh", "--workspace", ws); r.code == 0 || !strings.Contains(r.stderr, "may not log it in or out") ||
		!strings.Contains(r.stderr, "sudo -u "+svc.name+" clihostctl login gh --workspace") {
		t.Errorf("%s: a member's clihostctl login gh: exit %d, stderr %q; want it refused (the login would be every caller's) with the operator's command", what, r.code, r.stderr)
	}
	jq := d.mustCall(t, alice, ws, "jq", "filter", jqInput, "a member of the socket's group calls the built-in jq in the unit's workspace")
	checkJQ(t, what, jq)
	d.expectZygoteServed(t)
	expectSocketRefused(t, what, mallory, d.call(t, mallory, ws, "jq", "filter", jqInput))

	// A repository a member made in the workspace: its .git is the member's, while the git bundle
	// runs as the daemon's user, who owns the workspace; git's ownership check must not refuse it.
	t.Run("git in a member's repository", func(t *testing.T) {
		fixture.Need(t, "git")
		git := func(args ...string) {
			run(t, alice, ws, append([]string{"git", "-c", "safe.directory=*", "-c", "user.name=T",
				"-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"}, args...)...)
		}
		git("init", "-q")
		git("add", "data.json")
		git("commit", "-q", "-m", "first")
		e := d.mustCall(t, alice, ws, "git", "status", `{}`, "a member's repository in the unit's workspace")
		// data.json is committed; what the operator's bundle wrote earlier is untracked.
		if got := e.text(); !strings.HasPrefix(got, "## main\n") || strings.Contains(got, "data.json") {
			t.Errorf("%s: git status in a member's repository printed %q, want the branch main and data.json committed", what, got)
		}
	})

	t.Run("sudo clihostctl install gh", func(t *testing.T) {
		fixture.Need(t, "gh")
		expectInstalled(t, what+": sudo clihostctl install gh (gh from Debian's apt)", ctl(t, nil, d.socket, "install", "gh", "--json"))
	})
	t.Run("clihostctl doctor", func(t *testing.T) { expectDoctor(t, what, d, svc) })
	t.Run("systemd-analyze verify", func(t *testing.T) { verifyUnit(t) })
}

// setpriv is argv started as systemd starts the unit's ExecStart: as a with group gid and a's
// supplementary groups, NoNewPrivileges= and CapabilityBoundingSet= applied, under UMask=.
func (u unit) setpriv(t *testing.T, a *account, gid int, argv []string) []string {
	t.Helper()
	sp := []string{"setpriv", "--reuid", strconv.Itoa(a.uid), "--regid", strconv.Itoa(gid), "--init-groups", "--inh-caps", "-all"}
	if u["NoNewPrivileges"] == "yes" {
		sp = append(sp, "--no-new-privs")
	}
	if v, ok := u["CapabilityBoundingSet"]; ok && v == "" {
		sp = append(sp, "--bounding-set", "-all")
	}
	umask := u["UMask"]
	if umask == "" {
		umask = "0022"
	}
	// setpriv cannot set the umask; a fixed sh -c sets it and execs argv (still the main PID).
	sp = append(sp, "--", "/bin/sh", "-c", `umask "$0" && exec "$@"`, umask)
	return append(sp, argv...)
}

// notifySocket is a datagram socket for NOTIFY_SOCKET that the service user may send to.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	dir, err := os.MkdirTemp(base, "notify-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); os.RemoveAll(dir) })
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	return c
}

// expectReady reads the notify socket until READY=1 (Type=notify), for at most 30s.
func expectReady(t *testing.T, what string, c *net.UnixConn) {
	t.Helper()
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var got []string
	for {
		n, err := c.Read(buf)
		if err != nil {
			t.Errorf("%s: no READY=1 on NOTIFY_SOCKET (Type=notify); got %q: %v", what, got, err)
			return
		}
		msg := string(buf[:n])
		got = append(got, msg)
		for _, l := range strings.Split(msg, "\n") {
			if l == "READY=1" {
				return
			}
		}
	}
}

// verifyUnit runs systemd-analyze verify on the shipped unit with ExecStart's binary replaced by
// the built one (it checks that the executable exists). It skips outside CI when systemd-analyze
// is missing.
func verifyUnit(t *testing.T) {
	fixture.Need(t, "systemd-analyze")
	data, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "clihostd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/clihostd", bin.daemon)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "clihostd.service") {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitFile, err, out)
	}
}
