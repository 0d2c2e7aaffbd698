package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// nobody is the unprivileged uid and gid the tests run daemons as.
const nobody = 65534

// nobodyDir returns a new directory (state and workspace) that nobody owns, in a place nobody can
// reach, and lets nobody run the built binaries.
func nobodyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "clihost-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, p := range []string{dir, filepath.Join(dir, "state"), filepath.Join(dir, "ws"), filepath.Join(dir, "home")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(bin.daemon), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// daemonState is status --json's "daemon" part, as far as these tests read it.
type daemonState struct {
	UID     int
	Sandbox struct {
		State, Error, Hint, User string
		UID                      int
		UserNS                   bool `json:"user_namespace"`
	}
	Bundles struct {
		Loaded   int
		Sources  []string
		Warnings []string
	}
}

func (d *daemonProc) daemonState(t *testing.T) (daemonState, string) {
	t.Helper()
	r := d.ctl(t, "status", "--json")
	var st struct{ Daemon daemonState }
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	text := d.ctl(t, "status")
	return st.Daemon, text.stdout
}

// TestProbeUnderAnUnprivilegedDaemon runs clihostd as nobody, as the systemd unit runs it as its
// own user: at start it logs that a real sandboxed process ran in a user namespace as nobody, and
// status (text and JSON) says the same, from the probe, with the uid.
func TestProbeUnderAnUnprivilegedDaemon(t *testing.T) {
	needRoot(t)
	dir := nobodyDir(t)
	d := startDaemonWith(t, filepath.Join(dir, "state"), filepath.Join(dir, "ws"), func(c *exec.Cmd) {
		c.Env = []string{"PATH=" + systemPath, "HOME=" + filepath.Join(dir, "home"), "CLIHOST_BUNDLES="}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	})
	line := d.logged(t, "kernel sandbox")
	if !strings.Contains(line, `msg="kernel sandbox works" uid=65534 gid=65534 user=nobody user_namespace=true`) {
		t.Fatalf("start log: %s", line)
	}
	st, text := d.daemonState(t)
	if st.UID != nobody || st.Sandbox.State != "on" || st.Sandbox.UID != nobody || !st.Sandbox.UserNS || st.Sandbox.Error != "" {
		t.Fatalf("status --json daemon: %+v", st)
	}
	if !strings.HasPrefix(text, "sandbox: works (a sandboxed process ran as uid 65534 (nobody), in a user namespace,") {
		t.Fatalf("status:\n%s", text)
	}
}

// limitedEnv, set in the environment of this test binary, makes it limitedMain.
const limitedEnv = "CLIHOST_TEST_LIMITED_USERNS"

// limitedMain is this test binary started in a new user namespace U1 mapping uids and gids 0-65535
// onto the host's, where it is root: it caps the user namespaces U1 may hold at one (the
// per-namespace sysctl user.max_user_namespaces) and starts its arguments as nobody in a new user
// namespace U2 inside U1, which uses that one. The program there (clihostd) sees its own
// namespace's limit, which is unlimited, so a feature check passes; the sandbox's user namespace,
// which it creates inside U2, also counts against U1's cap, and the kernel refuses it (ENOSPC).
func limitedMain() {
	if os.Getenv(limitedEnv) == "" {
		return
	}
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("1"), 0); err != nil {
		fmt.Fprintln(os.Stderr, "limitedMain:", err)
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, limitedEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = usernsAttr()
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitedMain:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// usernsAttr starts a process in a new user namespace that maps uids and gids 0-65535 onto the
// same ids of its parent's namespace.
func usernsAttr() *syscall.SysProcAttr {
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
	return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, GidMappingsEnableSetgroups: true}
}

// TestProbeReportsASandboxThatCannotBeBuilt runs an unprivileged clihostd where the kernel refuses
// the user namespace every sandbox needs (limitedMain), although the kernel's features are all
// there: the start log has the ERROR with the kernel's reason and a hint, and status says
// "unavailable" with the same reason, not "on".
func TestProbeReportsASandboxThatCannotBeBuilt(t *testing.T) {
	needRoot(t)
	dir := nobodyDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemonWith(t, filepath.Join(dir, "state"), filepath.Join(dir, "ws"), func(c *exec.Cmd) {
		c.Args = append([]string{self}, append([]string{c.Path}, c.Args[1:]...)...)
		c.Path = self
		c.Env = []string{"PATH=" + systemPath, "HOME=" + filepath.Join(dir, "home"), "CLIHOST_BUNDLES=", limitedEnv + "=1"}
		c.SysProcAttr = usernsAttr()
	})
	line := d.logged(t, "kernel sandbox")
	if !strings.Contains(line, `level=ERROR msg="kernel sandbox does NOT work: every call will be refused"`) ||
		!strings.Contains(line, "no space left on device") || !strings.Contains(line, "uid=65534") || !strings.Contains(line, "hint=") {
		t.Fatalf("start log: %s", line)
	}
	st, text := d.daemonState(t)
	if st.Sandbox.State != "unavailable" || !strings.Contains(st.Sandbox.Error, "no space left on device") || st.Sandbox.Hint == "" {
		t.Fatalf("status --json daemon: %+v", st)
	}
	if !strings.HasPrefix(text, "WARNING: kernel sandbox unavailable: ") || !strings.Contains(text, "no space left on device") {
		t.Fatalf("status:\n%s", text)
	}
}

// TestZeroBundlesIsAWarningEverywhere: a daemon that serves nothing (--no-catalog and an empty
// folder) says so at start, on every reload, in status (text and JSON) and in its metrics; its
// -check fails; a missing folder is named. Once a bundle appears in the folder the warnings go.
func TestZeroBundlesIsAWarningEverywhere(t *testing.T) {
	empty, missing := t.TempDir(), filepath.Join(t.TempDir(), "missing")
	r := runBin(t, bin.daemon, "", "-check", "--no-catalog", "--bundles", empty, "--bundles", missing)
	if r.code != 1 || !strings.Contains(r.stderr, `level=WARN msg="no bundles loaded" sources=`+empty+" hint=") ||
		!strings.Contains(r.stderr, "bundle folder "+missing+" does not exist") || !strings.Contains(r.stderr, "bundle folder "+empty+" is empty") {
		t.Fatalf("-check of nothing: exit %d\n%s", r.code, r.stderr)
	}
	// Beside the catalog an empty folder (as the docs create /etc/clihost/bundles) is a note, not a
	// warning: a fresh install's doctor --strict must be able to pass.
	if r := runBin(t, bin.daemon, "", "-check", "--bundles", empty); r.code != 0 || strings.Contains(r.stderr, "no bundles loaded") ||
		strings.Contains(r.stderr, "level=WARN") || !strings.Contains(r.stderr, `level=INFO msg="bundle folder is empty" folder=`+empty) {
		t.Fatalf("-check of an empty folder beside the catalog: exit %d\n%s", r.code, r.stderr)
	}

	d := startDaemon(t, t.TempDir(), "--no-catalog", "--bundles", empty)
	d.logged(t, `msg="no bundles loaded" sources=`+empty)
	st, text := d.daemonState(t)
	if st.Bundles.Loaded != 0 || len(st.Bundles.Warnings) != 2 || !strings.HasPrefix(st.Bundles.Warnings[1], "no bundles loaded (searched: "+empty+")") {
		t.Fatalf("status --json: %+v", st.Bundles)
	}
	if !strings.Contains(text, "bundles: 0 loaded (sources: "+empty+")\n") || !strings.Contains(text, "WARNING: no bundles loaded") {
		t.Fatalf("status:\n%s", text)
	}
	if m := d.metrics(t); !strings.Contains(m, "\nclihost_bundles 0\n") || !strings.Contains(m, "\nclihost_sandbox_works 1\n") {
		t.Fatalf("metrics:\n%s", m)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "reloading bundles (SIGHUP)")
	d.waitFor(t, `msg="no bundles loaded"`)

	for p, c := range fixture.True() {
		writeFile(t, filepath.Join(empty, p), c)
	}
	d.waitFor(t, "reloading bundles (files changed)")
	d.waitFor(t, `bundle loaded" bundle=true@1`)
	if st, text := d.daemonState(t); st.Bundles.Loaded != 1 || len(st.Bundles.Warnings) != 0 || strings.Contains(text, "WARNING") {
		t.Fatalf("after a bundle appeared: %+v\n%s", st.Bundles, text)
	}
}

// TestBundlesFolderAddsToTheCatalog: the unit's --bundles FOLDER serves the folder's bundles and
// the built-in catalog (it replaced the catalog before, so that a fresh install served nothing).
func TestBundlesFolderAddsToTheCatalog(t *testing.T) {
	dir := fixture.Write(t, fixture.True())
	d := startDaemon(t, t.TempDir(), "--bundles", dir)
	if st := d.status(t, "true"); st.Key != "true@1" {
		t.Fatalf("the folder's bundle: %+v", st)
	}
	if st := d.status(t, "gh"); st.Key != "gh@1" {
		t.Fatalf("the catalog's gh: %+v", st)
	}
	st, _ := d.daemonState(t)
	if st.Bundles.Loaded != 17 || len(st.Bundles.Sources) != 2 || st.Bundles.Sources[0] != dir || st.Bundles.Sources[1] != "the built-in catalog" {
		t.Fatalf("bundles: %+v", st.Bundles)
	}
}

// logged returns the first line the daemon logged that contains what, waiting for it when there
// is none yet.
func (d *daemonProc) logged(t *testing.T, what string) string {
	t.Helper()
	for _, l := range d.log.All() {
		if strings.Contains(l, what) {
			return l
		}
	}
	return d.waitFor(t, what)
}

// metrics reads the daemon's /metrics with its token.
func (d *daemonProc) metrics(t *testing.T) string {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(d.state, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return fixture.Metrics(t, d.mcp, strings.TrimSpace(string(tok)))
}
