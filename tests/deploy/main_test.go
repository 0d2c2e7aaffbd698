// Package deploy runs clihost the ways operators deploy it (issue 11): the shipped systemd unit's
// own ExecStart under its unprivileged User=, a developer's daemon under their own account, a root
// daemon beside a root-owned private workspace, and one root daemon whose control socket several
// users share. Each test starts the real binaries as the real users (setpriv), calls real CLIs in
// the real kernel sandbox through the control socket, and asserts what each user gets.
//
// The tests need Linux, root, setpriv, useradd and the Debian CLIs .ci/run installs. Without them
// they skip, except under CI=true, where they fail. They create system users and groups named
// ct-* (see users) and remove them when they end.
package deploy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// Paths and identities made once by TestMain.
var (
	// bin holds the binaries built for this run, in a directory every test user can read and
	// execute (clihostd finds clihost-sandbox beside itself).
	bin struct{ dir, daemon, ctl, helper string }
	// base is a 0755 directory under /tmp for users' homes, workspaces and state.
	base string
	// svc is the service user the unit runs as (useradd --system, its home the state directory);
	// alice and bob are members of its group (the control socket's --group); mallory is not;
	// agent is a dedicated agent user for a root daemon's --agent-user.
	svc, alice, bob, mallory, agent *account
	// setupErr says why the deployments cannot run here (nil: they can).
	setupErr error
)

// account is a user created for the tests.
type account struct {
	name     string
	uid, gid int
	home     string
}

// svcGroup is the service user's group: the unit's Group= and the control socket's --group.
const svcGroup = "ct-clihost"

func TestMain(m *testing.M) {
	setupErr = setup()
	code := m.Run()
	teardown()
	os.Exit(code)
}

// setup checks the host, builds the binaries and creates the users.
func setup() error {
	switch {
	case runtime.GOOS != "linux":
		return errors.New("the deployments are Linux deployments")
	case os.Geteuid() != 0:
		return errors.New("the deployment tests run as root (they create users and start daemons as them)")
	}
	for _, p := range []string{"setpriv", "useradd", "userdel", "groupadd", "groupdel", "setfacl"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("%s is not installed: %w", p, err)
		}
	}
	var err error
	if base, err = os.MkdirTemp("", "clihost-deploy-"); err != nil {
		return err
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return err
	}
	if err := build(); err != nil {
		return err
	}
	return makeUsers()
}

// build builds the three binaries once, CGO_ENABLED=0, into base/bin (0755).
func build() error {
	bin.dir = filepath.Join(base, "bin")
	bin.daemon, bin.ctl, bin.helper = filepath.Join(bin.dir, "clihostd"), filepath.Join(bin.dir, "clihostctl"), filepath.Join(bin.dir, "clihost-sandbox")
	for out, pkg := range map[string]string{bin.daemon: "../../cmd/clihostd", bin.ctl: "../../cmd/clihostctl", bin.helper: "../../cmd/clihost-sandbox"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
	}
	return os.Chmod(bin.dir, 0o755)
}

// users are the accounts the tests create, in creation order (teardown removes them in reverse).
var users = []string{"ct-clihost", "ct-alice", "ct-bob", "ct-mallory", "ct-agent"}

// makeUsers creates the service user the way the unit's comment and docs/operations.md say
// (useradd --system --home-dir STATE clihost; here its state directory lies under base), then
// alice and bob in its group, mallory outside it, and an agent user, each with a home of their own.
func makeUsers() error {
	teardown() // a run that was killed may have left them
	home := func(n string) string { return filepath.Join(base, "home", n) }
	if err := os.MkdirAll(filepath.Join(base, "home"), 0o755); err != nil {
		return err
	}
	steps := [][]string{
		{"useradd", "--system", "--home-dir", filepath.Join(base, "var/lib/clihost"), "--shell", "/usr/sbin/nologin", "--user-group", "ct-clihost"},
		{"useradd", "--create-home", "--home-dir", home("alice"), "--user-group", "--groups", svcGroup, "ct-alice"},
		{"useradd", "--create-home", "--home-dir", home("bob"), "--user-group", "--groups", svcGroup, "ct-bob"},
		{"useradd", "--create-home", "--home-dir", home("mallory"), "--user-group", "ct-mallory"},
		{"useradd", "--system", "--create-home", "--home-dir", home("agent"), "--shell", "/usr/sbin/nologin", "--user-group", "ct-agent"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	var err error
	for _, p := range []struct {
		a    **account
		name string
	}{{&svc, "ct-clihost"}, {&alice, "ct-alice"}, {&bob, "ct-bob"}, {&mallory, "ct-mallory"}, {&agent, "ct-agent"}} {
		if *p.a, err = lookup(p.name); err != nil {
			return err
		}
	}
	// Homes as Debian makes them for people: private to their owner.
	for _, a := range []*account{alice, bob, mallory, agent} {
		if err := os.Chmod(a.home, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// lookup reads an account from the password database.
func lookup(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &account{name: name, uid: uid, gid: gid, home: u.HomeDir}, nil
}

// teardown removes the test users, their groups and base.
func teardown() {
	for i := len(users) - 1; i >= 0; i-- {
		if _, err := user.Lookup(users[i]); err == nil {
			if out, err := exec.Command("userdel", users[i]).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "userdel %s: %v\n%s", users[i], err, out)
			}
		}
		if _, err := user.LookupGroup(users[i]); err == nil {
			if out, err := exec.Command("groupdel", users[i]).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "groupdel %s: %v\n%s", users[i], err, out)
			}
		}
	}
	if base != "" && svc != nil { // only the run that made base removes it (setup ran to the end)
		_ = os.RemoveAll(base)
	}
}

// need skips t when the deployments cannot run here, except under CI=true, where it fails.
func need(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		fixture.Missing(t, "the deployment tests cannot run: %v", setupErr)
	}
}

// result is a finished process.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// asUser returns argv prefixed so that it runs as a (nil: as root, unchanged): setpriv with the
// account's uid, primary gid and its supplementary groups from the group database, as login does.
func asUser(a *account, argv ...string) []string {
	if a == nil {
		return argv
	}
	return append([]string{"setpriv", "--reuid", strconv.Itoa(a.uid), "--regid", strconv.Itoa(a.gid), "--init-groups", "--"}, argv...)
}

// userEnv is the environment a login of a gives its programs (root's when a is nil).
func userEnv(a *account) []string {
	name, home := "root", "/root"
	if a != nil {
		name, home = a.name, a.home
	}
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home,
		"USER=" + name, "LOGNAME=" + name, "LANG=C.UTF-8"}
}

// ctl runs clihostctl as a (nil: root) against the control socket sock (CLIHOST_SOCKET), in the
// account's home.
func ctl(t *testing.T, a *account, sock string, args ...string) result {
	t.Helper()
	argv := asUser(a, append([]string{bin.ctl}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(userEnv(a), "CLIHOST_SOCKET="+sock, "CLIHOST_BUNDLES=")
	cmd.Dir = "/"
	o, err := fixture.Run(cmd)
	if err != nil {
		t.Fatalf("run clihostctl as %v: %v", a, err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}

func (a *account) String() string {
	if a == nil {
		return "root"
	}
	return fmt.Sprintf("%s (uid %d)", a.name, a.uid)
}

// mkdir makes dir (and missing parents, 0755) with mode and owner (uid, gid).
func mkdir(t *testing.T, dir string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // after chown, which clears setgid bits
		t.Fatal(err)
	}
}

// writeFile writes a file with mode and owner.
func writeFile(t *testing.T, path, content string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// run runs argv as a (nil: root) in dir and fails t when it fails: for the test's own setup steps
// (git init as a workspace's owner, setfacl).
func run(t *testing.T, a *account, dir string, argv ...string) {
	t.Helper()
	argv = asUser(a, argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = userEnv(a)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// lookupGroup is a group's gid.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// scratch is a new directory under base (0755, root's), removed when t ends.
func scratch(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// ids is the account's uid and gid (root's for nil).
func (a *account) ids() (uid, gid int) {
	if a == nil {
		return 0, 0
	}
	return a.uid, a.gid
}
