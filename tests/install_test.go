package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
)

// The tests here run clihostd as the shipped unit does: as an unprivileged user (setpriv), whose
// installs cannot run apt-get. `clihostctl install` as root (the test process: sudo) then runs the
// package manager itself and the daemon checks and records the result. The package is a real .deb
// built here and installed by the real apt-get from its path, so nothing leaves the machine.

// daemonUserName is the unprivileged user the daemon runs as in these tests.
const daemonUserName = "clihostinst"

// probeBin is the command the test package installs into /usr/bin.
const probeBin = "clihost-apt-probe"

// needRoot skips a test that needs root (it runs daemons as other users) and the Debian tools,
// except in CI, where it fails.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	fixture.NeedRoot(t)
	fixture.Need(t, tools...)
}

// daemonUser returns the uid and gid of the tests' unprivileged daemon user, creating it (a system
// user without a home) when it does not exist.
func daemonUser(t *testing.T) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(daemonUserName)
	for try := 0; err != nil && try < 20; try++ { // useradd fails while another holds /etc/passwd's lock
		out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", daemonUserName).CombinedOutput()
		if u, err = user.Lookup(daemonUserName); err != nil && try == 19 {
			t.Fatalf("useradd %s: %v\n%s", daemonUserName, aerr, out)
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// unitDaemon is a clihostd running as the unprivileged user, on bundles, with the binaries and
// every directory in a tree that user can reach.
type unitDaemon struct {
	*daemonProc
	root     string // the tree: bin/, bundles/, state/, run/, ws/
	ctlBin   string // clihostctl, executable by every user
	uid, gid int
}

// startUnitDaemon starts clihostd as the daemon user with --group set to that user's group.
func startUnitDaemon(t *testing.T, root string) *unitDaemon {
	t.Helper()
	uid, gid := daemonUser(t)
	d := &unitDaemon{root: root, uid: uid, gid: gid, ctlBin: filepath.Join(root, "bin", "clihostctl")}
	for _, dir := range []string{"state", "run", "ws"} {
		p := filepath.Join(root, dir)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	daemonBin := filepath.Join(root, "bin", "clihostd")
	for src, dst := range map[string]string{bin.daemon: daemonBin, bin.ctl: d.ctlBin} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dst, string(b))
		if err := os.Chmod(dst, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := &daemonProc{state: filepath.Join(root, "state"), socket: filepath.Join(root, "run", "clihostd.sock"),
		ws: filepath.Join(root, "ws")}
	p.cmd = exec.Command("setpriv", "--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--",
		daemonBin, "--state", p.state, "--socket", p.socket, "--http", "127.0.0.1:0", "--workspace", p.ws,
		"--bundles", filepath.Join(root, "bundles"), "--group", daemonUserName)
	p.cmd.Env = []string{"PATH=" + systemPath, "HOME=" + p.state, "CLIHOST_BUNDLES="}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.proc = fixture.Start(t, p.cmd)
	p.log = fixture.Follow(stderr)
	p.waitFor(t, "clihostd ready")
	d.daemonProc = p
	return d
}

// as runs clihostctl against the daemon as uid:gid (no supplementary groups), or as root when uid
// is 0, with the bundles of the tree (unless args name others) and sudo's kind of environment.
func (d *unitDaemon) as(t *testing.T, uid, gid int, args ...string) result {
	t.Helper()
	argv := append([]string{"--socket", d.socket}, args...)
	if !slices.Contains(args, "--bundles") {
		argv = append([]string{"--bundles", filepath.Join(d.root, "bundles")}, argv...)
	}
	cmd := exec.Command(d.ctlBin, argv...)
	if uid != 0 {
		cmd = exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--clear-groups", "--", d.ctlBin}, argv...)...)
	}
	cmd.Dir = d.root
	cmd.Env = []string{"PATH=" + systemPath, "HOME=/root", "TERM=dumb"}
	o, err := fixture.Run(cmd)
	if err != nil {
		t.Fatalf("run clihostctl: %v", err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

// installTree makes the test's tree: readable by every user, and only root may change it (so
// clihostctl, as root, accepts its bundles).
func installTree(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "clihost-install-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// probeDeb builds the Debian package clihost-apt-probe 2.5.0 (/usr/bin/clihost-apt-probe, a script
// answering --version) in dir, makes sure it is not installed, and purges it after the test.
func probeDeb(t *testing.T, dir string) string {
	t.Helper()
	pkg := filepath.Join(dir, "debroot")
	writeFile(t, filepath.Join(pkg, "DEBIAN", "control"), "Package: "+probeBin+"\nVersion: 2.5.0\nArchitecture: all\n"+
		"Maintainer: clihost tests <tests@clihost.invalid>\nDescription: clihost install test package\n")
	script := filepath.Join(pkg, "usr", "bin", probeBin)
	writeFile(t, script, "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '"+probeBin+" 2.5.0'; else echo \"probe $*\"; fi\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	deb := filepath.Join(dir, probeBin+"_2.5.0_all.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	purge := func() { _ = exec.Command("dpkg", "--purge", probeBin).Run() }
	purge()
	t.Cleanup(purge)
	return deb
}

// probeInstalled reports whether dpkg has the probe package installed.
func probeInstalled() bool {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", probeBin).Output()
	return err == nil && strings.Contains(string(out), "install ok installed")
}

// bundleWith writes bundle id with bin and the install entries (YAML flow lines) into the tree.
func bundleWith(t *testing.T, root, id, bin, parse string, entries ...string) {
	t.Helper()
	dir := filepath.Join(root, "bundles", id)
	writeFile(t, filepath.Join(dir, "CLI.md"), `---
name: `+id+`
id: `+id+`
description: A CLI installed by a package manager, for the install tests.
version: 1.0.0
bin: "`+bin+`"
install:
  - `+strings.Join(entries, "\n  - ")+`
version_check: { cmd: "`+bin+` --version", parse: '`+parse+`', range: ">=1" }
sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: true, spawn: [sh] }
  env: { pass: [] }
commands:
  greet: ./tools/greet/TOOL.md
---
`)
	writeFile(t, filepath.Join(dir, "tools", "greet", "TOOL.md"), `---
name: Greet
id: `+id+`.greet
description: Greets someone.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { who: { type: string } }, required: [who] }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [greet, "${input.who}"] }
---
`)
}

// TestUnitDaemonSudoInstall: a daemon running as an unprivileged user cannot run apt-get. Its own
// user asking gets the sudo hint (text and --json) and nothing is installed; root asking
// (`sudo clihostctl install`) gets the package installed by apt-get, run in clihostctl, and the
// daemon records it after its own version check: status shows it installed, with its version, and
// a call runs it.
func TestUnitDaemonSudoInstall(t *testing.T) {
	needRoot(t, "setpriv", "apt-get", "dpkg-deb")
	root := installTree(t)
	deb := probeDeb(t, root)
	bundleWith(t, root, "aptprobe", probeBin, probeBin+` (\d+\.\d+\.\d+)`, `{ method: apt, package: "`+deb+`" }`)
	d := startUnitDaemon(t, root)
	bundleDir := filepath.Join(root, "bundles", "aptprobe")
	// The hint names the daemon's bundle folder: clihostctl under sudo runs only bundles it loads.
	wantHint := "apt-get needs root: run sudo clihostctl --bundles " + bundleDir + " install aptprobe"

	if st := d.status(t, "aptprobe"); st.Install != "missing" {
		t.Fatalf("before the install: %+v", st)
	}
	r := d.as(t, d.uid, d.gid, "install", "aptprobe")
	if r.code != 1 || !strings.Contains(r.stderr, "install failed: "+wantHint) {
		t.Fatalf("the daemon's user: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = d.as(t, d.uid, d.gid, "install", "aptprobe", "--json")
	var ev control.InstallEvent
	if err := json.Unmarshal([]byte(r.stdout), &ev); err != nil || r.code != 1 || ev.Phase != "error" || ev.Error == nil ||
		ev.Error.Code != "needs_root" || ev.Message != wantHint ||
		len(ev.NeedsRoot) != 1 || ev.NeedsRoot[0] != (control.RootEntry{Index: 0, Method: "apt", Package: deb, Tool: "apt-get"}) {
		t.Fatalf("the daemon's user, --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if probeInstalled() {
		t.Fatal("the package was installed by a caller that is not root")
	}

	// Root runs package managers only from bundles only root can change: a bundle folder the
	// daemon's user may write (a compromised daemon could edit it) chooses nothing root installs.
	if err := os.Chown(bundleDir, d.uid, d.gid); err != nil {
		t.Fatal(err)
	}
	r = d.as(t, 0, 0, "install", "aptprobe")
	if r.code != 1 || !strings.Contains(r.stderr, "not running apt-get as root from bundle aptprobe@1: "+bundleDir+" does not belong to root") || probeInstalled() {
		t.Fatalf("root, bundle folder of the daemon's user: exit %d, installed %v\n%s%s", r.code, probeInstalled(), r.stdout, r.stderr)
	}
	if err := os.Chown(bundleDir, 0, 0); err != nil {
		t.Fatal(err)
	}
	// clihostctl must know the bundle itself: the daemon's word does not choose what root runs.
	r = d.as(t, 0, 0, "--bundles", filepath.Join(root, "ws"), "install", "aptprobe")
	if r.code != 1 || !strings.Contains(r.stderr, "clihostctl does not load bundle aptprobe (clihostd loaded it from "+filepath.Join(bundleDir, "CLI.md")+")") || probeInstalled() {
		t.Fatalf("root, bundle unknown to clihostctl: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = d.as(t, 0, 0, "install", "aptprobe")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "installed "+probeBin+" 2.5.0 with apt" ||
		!strings.Contains(r.stderr, "running install[0] (apt-get "+deb+") here as root") {
		t.Fatalf("root: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !probeInstalled() {
		t.Fatal("apt-get did not install the package")
	}
	st := d.status(t, "aptprobe")
	if st.Install != "installed" || st.Version != "2.5.0" || st.BinPath != "/usr/bin/"+probeBin || !st.Ready {
		t.Fatalf("after the install: %+v", st)
	}
	d.waitFor(t, `msg=installed bundle=aptprobe@1 method=apt bin=/usr/bin/`+probeBin+` version=2.5.0 run_by_uid=0`)
	r = d.ctl(t, "call", "aptprobe", "greet", "--input", `{"who": "world"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"value": "probe greet world\n"`) {
		t.Fatalf("call: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = d.as(t, 0, 0, "install", "aptprobe")
	if r.code != 0 || !strings.Contains(r.stdout, probeBin+" 2.5.0 is already installed at /usr/bin/"+probeBin) {
		t.Fatalf("root, again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestInstallRecordVerifies: the daemon records an install another process ran only for root or
// its own user, and only what it finds and checks itself. A record of a bundle whose binary is
// missing, of a binary that fails its version check, or of an entry that does not need root is
// refused and leaves nothing recorded; a group member may not ask at all.
func TestInstallRecordVerifies(t *testing.T) {
	needRoot(t, "setpriv", "curl")
	root := installTree(t)
	bundleWith(t, root, "ghost", "clihost-no-such-bin", `clihost-no-such-bin (\d+)`, `{ method: apt, package: clihost-no-such-package }`)
	bundleWith(t, root, "liar", "true", `true \(clihost\) (\d+)`, `{ method: apt, package: coreutils }`)
	bundleWith(t, root, "fetched", "hello", `hello (\d+)`, `{ method: download, url: "http://127.0.0.1:1/hello.tar.gz", extract_bin: hello, verify_sha256: "`+strings.Repeat("0", 64)+`" }`)
	d := startUnitDaemon(t, root)
	c := control.NewClient(d.socket)
	ctx := context.Background()

	for _, tc := range []struct {
		req  control.RecordRequest
		code errcode.Code
		msg  string
	}{
		{control.RecordRequest{Bundle: "ghost", Index: 0, Method: "apt"}, "not_installed",
			"clihostd does not find clihost-no-such-bin after install[0] (apt): the install finished but clihost-no-such-bin is not on PATH"},
		{control.RecordRequest{Bundle: "liar", Index: 0, Method: "apt"}, "version_mismatch", ""},
		{control.RecordRequest{Bundle: "fetched", Index: 0, Method: "download"}, "record_refused",
			"install[0] (download) of fetched@1 does not need root: clihostd runs it itself"},
		{control.RecordRequest{Bundle: "ghost", Index: 0, Method: "download"}, "record_refused",
			`ghost@1 has no install entry 0 with method "download"`},
		{control.RecordRequest{Bundle: "ghost", Index: 3, Method: "apt"}, "record_refused", ""},
	} {
		ev, err := c.RecordInstall(ctx, tc.req)
		if err != nil || ev.Phase != "error" || ev.Error == nil || ev.Error.Code != tc.code || !strings.Contains(ev.Message, tc.msg) {
			t.Errorf("record %+v: %+v (%+v), %v; want %s %q", tc.req, ev, ev.Error, err, tc.code, tc.msg)
		}
		if st := d.status(t, tc.req.Bundle); st.Install == "installed" || st.BinPath != "" {
			t.Errorf("after record %+v: %+v", tc.req, st)
		}
	}
	// The liar's binary exists (/usr/bin/true): its refusal is the daemon's own version check.
	if st := d.status(t, "liar"); st.Install != "version_mismatch" {
		t.Errorf("liar: %+v", st)
	}

	// A member of --group (nobody, with the daemon's group as its primary group) is admitted to the
	// socket, but may not record.
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("setpriv", "--reuid", nobody.Uid, "--regid", strconv.Itoa(d.gid), "--clear-groups", "--",
		"curl", "-s", "-w", "\n%{http_code}", "--unix-socket", d.socket, "-H", "Content-Type: application/json",
		"-d", `{"bundle":"liar","index":0,"method":"apt"}`, "http://clihostd"+control.PathInstallRecord).CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "\n403") || !strings.Contains(string(out), "only root or clihostd's own user may record an install") {
		t.Fatalf("record by a group member: %v\n%s", err, out)
	}
	out, err = exec.Command("setpriv", "--reuid", nobody.Uid, "--regid", strconv.Itoa(d.gid), "--clear-groups", "--",
		"curl", "-s", "-w", "\n%{http_code}", "--unix-socket", d.socket, "http://clihostd"+control.PathStatus+"?bundle=liar").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "\n200") {
		t.Fatalf("status by a group member (the positive control): %v\n%s", err, out)
	}
}

// TestSudoInstallKeepsOrder: root's install keeps the bundle's order. A download listed before apt
// is installed by the daemon and apt never runs; an entry root runs here that fails (dnf is not on
// PATH) is passed over and the daemon goes on with the next entry, a download.
func TestSudoInstallKeepsOrder(t *testing.T) {
	needRoot(t, "setpriv", "apt-get", "dpkg-deb")
	archive := helloTarGz(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	defer srv.Close()
	sum := sha256.Sum256(archive)
	download := `{ method: download, url: "` + srv.URL + `/hello.tar.gz", extract_bin: "hello-1.2.3/bin/hello", verify_sha256: "` + hex.EncodeToString(sum[:]) + `" }`
	if _, err := exec.LookPath("dnf"); err == nil {
		t.Skip("dnf is installed: the test needs a package manager that is missing")
	}
	root := installTree(t)
	deb := probeDeb(t, root)
	bundleWith(t, root, "first", "hello", `hello (\d+\.\d+\.\d+)`, download, `{ method: apt, package: "`+deb+`" }`)
	bundleWith(t, root, "second", "hello", `hello (\d+\.\d+\.\d+)`, `{ method: dnf, package: hello }`, download)
	d := startUnitDaemon(t, root)

	r := d.as(t, 0, 0, "install", "first")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "installed hello 1.2.3 with download" || probeInstalled() {
		t.Fatalf("download before apt: exit %d, package installed: %v\n%s%s", r.code, probeInstalled(), r.stdout, r.stderr)
	}
	r = d.as(t, 0, 0, "install", "second")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "installed hello 1.2.3 with download" ||
		!strings.Contains(r.stderr, "install[0] (dnf): dnf not found on PATH") {
		t.Fatalf("dnf (missing) before a download: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st := d.status(t, "second"); st.Install != "installed" || !strings.HasPrefix(st.BinPath, filepath.Join(root, "state")) {
		t.Fatalf("second: %+v", st)
	}
}
