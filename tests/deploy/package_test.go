package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// buildPackages builds the .deb and the .rpm with deploy/pkg (nfpm), as a release would, into a
// folder of t's, and returns their paths.
func buildPackages(t *testing.T) (deb, rpm string) {
	t.Helper()
	out := t.TempDir()
	if err := os.Chmod(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "-C", "../../deploy/pkg", "run", ".", "-out", out, "-version", "1.2.3~test")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	o, err := fixture.Run(cmd)
	if err != nil || o.Code != 0 {
		t.Fatalf("go -C deploy/pkg run .: %v: exit %d\n%s%s", err, o.Code, o.Stdout, o.Stderr)
	}
	deb, rpm = filepath.Join(out, "clihost_1.2.3~test_amd64.deb"), filepath.Join(out, "clihost-1.2.3~test-1.x86_64.rpm")
	for _, p := range []string{deb, rpm} {
		if !strings.Contains(o.Stdout, p) {
			t.Fatalf("deploy/pkg did not report %s:\n%s", p, o.Stdout)
		}
	}
	return deb, rpm
}

// packageFiles are the files both packages install: the helper beside clihostd and clihostctl
// (both look for it beside their own executable), the unit, the sysusers.d entry, the bundles
// folder and the approval policy, a configuration file.
var packageFiles = []string{
	"/usr/bin/clihostd", "/usr/bin/clihostctl", "/usr/bin/clihost-sandbox",
	"/usr/lib/systemd/system/clihostd.service", "/usr/lib/sysusers.d/clihost.conf",
	"/etc/clihost/bundles", "/etc/clihost/approvals.yaml",
}

// TestPackages installs the .deb the way an operator does (dpkg -i, as apt install ./clihost_*.deb
// does) in a container booted with this host's systemd (/usr an overlay of the host's, so the
// package's files land in the container only): the postinst creates the user clihost and the
// workspace, enables and starts clihostd.service, which answers clihostctl status as the user
// clihost; doctor finds the helper beside the binaries and the unit active; dpkg -r stops the
// service and keeps the conffile, dpkg --purge removes it and the daemon's state. The .rpm's file
// list, configuration files and scriptlets are read with rpm -qp.
func TestPackages(t *testing.T) {
	need(t)
	fixture.Need(t, "systemd-nspawn", "nsenter", "pgrep", "rpm")
	deb, rpmFile := buildPackages(t)

	t.Run("rpm", func(t *testing.T) { checkRPM(t, rpmFile) })

	m := bootContainer(t, "--overlay=/usr::/usr", "--bind-ro="+filepath.Dir(deb)+":/mnt/clihost-pkg")
	const ctl = "/usr/bin/clihostctl" // not the test's own build bound at /usr/local/bin
	// The volatile /var has no dpkg database: an empty one, as on a fresh system.
	m.must(t, "", "sh", "-c", "mkdir -p /var/lib/dpkg/info /var/lib/dpkg/updates && touch /var/lib/dpkg/status /var/lib/dpkg/available")
	in := "/mnt/clihost-pkg/" + filepath.Base(deb)
	if r := m.run(t, "", "dpkg", "-i", in); r.code != 0 {
		t.Fatalf("dpkg -i %s: %v", in, r)
	}
	for _, p := range packageFiles {
		m.must(t, "", "test", "-e", p)
	}
	if v := m.must(t, "", ctl, "version").stdout; !strings.Contains(v, "1.2.3~test") {
		t.Errorf("the packaged clihostctl does not report the package's version 1.2.3~test: %q", v)
	}
	if got := strings.TrimSpace(m.must(t, "", "stat", "-c", "%U:%G %a", "/srv/clihost/workspace").stdout); got != "clihost:clihost 2770" {
		t.Errorf("/srv/clihost/workspace is %q after the install, want clihost:clihost 2770", got)
	}
	if got := strings.TrimSpace(m.run(t, "", "systemctl", "is-enabled", "clihostd").stdout); got != "enabled" {
		t.Errorf("clihostd.service is %q after the install, want enabled", got)
	}
	// This machine's image forbids starting services from maintainer scripts (policy-rc.d exits
	// 101, as in a Docker image): the postinst honours it and starts nothing.
	if m.run(t, "", "test", "-x", "/usr/sbin/policy-rc.d").code == 0 {
		if state := m.waitState(t); state != "inactive" {
			t.Errorf("clihostd.service is %q after dpkg -i under a policy-rc.d that forbids starting services", state)
		}
		// A host booted with systemd has none: the same package again (an upgrade's postinst) starts it.
		m.must(t, "", "rm", "/usr/sbin/policy-rc.d")
		if r := m.run(t, "", "dpkg", "-i", in); r.code != 0 {
			t.Fatalf("dpkg -i %s again: %v", in, r)
		}
	}
	if state := m.waitState(t); state != "active" {
		t.Fatalf("clihostd.service is %q after dpkg -i, want active:\n%s\njournal:\n%s",
			state, m.run(t, "", "systemctl", "status", "--no-pager", "clihostd").stdout, m.journal(t))
	}
	m.waitJournal(t, "kernel sandbox works")
	if r := m.as(t, "clihost", "", ctl, "status"); r.code != 0 {
		t.Errorf("clihostctl status as clihost, against the packaged service: %v", r)
	}
	doctor := m.run(t, "", ctl, "doctor")
	for _, want := range []string{
		"ok    helper: /usr/bin/clihost-sandbox (same build as clihostctl)",
		"ok    sandbox probe", "ok    systemd unit: clihostd.service is active",
	} {
		if !strings.Contains(doctor.stdout, want) {
			t.Errorf("clihostctl doctor after dpkg -i does not say %q:\n%s", want, doctor.stdout)
		}
	}
	if doctor.code != 0 || strings.Contains(doctor.stdout, "FAIL") {
		t.Errorf("clihostctl doctor after dpkg -i is not healthy: %v", doctor)
	}

	m.must(t, "", "dpkg", "-r", "clihost")
	if state := m.waitState(t); state == "active" {
		t.Errorf("clihostd.service is still active after dpkg -r")
	}
	if r := m.run(t, "", "test", "-e", "/usr/bin/clihostd"); r.code == 0 {
		t.Errorf("/usr/bin/clihostd is still there after dpkg -r")
	}
	if r := m.run(t, "", "test", "-e", "/etc/clihost/approvals.yaml"); r.code != 0 {
		t.Errorf("dpkg -r removed the conffile /etc/clihost/approvals.yaml (only a purge may)")
	}
	m.must(t, "", "dpkg", "--purge", "clihost")
	for _, p := range []string{"/etc/clihost/approvals.yaml", "/var/lib/clihost"} {
		if r := m.run(t, "", "test", "-e", p); r.code == 0 {
			t.Errorf("%s is still there after dpkg --purge", p)
		}
	}
}

// checkRPM reads the .rpm's header with rpm: its files with their modes, its configuration files
// and its scriptlets.
func checkRPM(t *testing.T, path string) {
	rpmq := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("rpm", append([]string{"-qp"}, append(args, path)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("rpm -qp %v %s: %v\n%s", args, path, err, out)
		}
		return string(out)
	}
	list := rpmq("--list", "--verbose")
	for _, p := range packageFiles {
		if !strings.Contains(list, " "+p+"\n") {
			t.Errorf("the .rpm does not install %s:\n%s", p, list)
		}
	}
	for _, b := range []string{"clihostd", "clihostctl", "clihost-sandbox"} {
		if !strings.Contains(list, "-rwxr-xr-x    1 root     root") || !strings.Contains(list, "/usr/bin/"+b) {
			t.Errorf("the .rpm's /usr/bin/%s is not root's 0755:\n%s", b, list)
		}
	}
	if got := strings.TrimSpace(rpmq("--configfiles")); got != "/etc/clihost/approvals.yaml" {
		t.Errorf("the .rpm's configuration files are %q, want /etc/clihost/approvals.yaml", got)
	}
	if got := strings.TrimSpace(rpmq("--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}")); got != "clihost 1.2.3~test 1 x86_64" {
		t.Errorf("the .rpm's name, version, release and arch are %q", got)
	}
	scripts := rpmq("--scripts")
	for _, want := range []string{"postinstall scriptlet", "systemd-sysusers /usr/lib/sysusers.d/clihost.conf", "preuninstall scriptlet", "postuninstall scriptlet"} {
		if !strings.Contains(scripts, want) {
			t.Errorf("the .rpm's scriptlets lack %q:\n%s", want, scripts)
		}
	}
}
