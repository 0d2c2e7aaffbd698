package nsinit

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(attackProbeEnv); mode != "" {
		os.Exit(attackProbe(mode))
	}
	Main()
	if mode := os.Getenv(poolEnv); mode != "" {
		testPool = NewPool(PoolConfig{Max: 2, NoZygote: mode != zygoteMode})
		if mode == zygoteMode {
			awaitZygote(testPool) // else the first calls, or all of a short run, take inits
		}
		code := leaderUnchanged(m.Run())
		s := testPool.Stats()
		testPool.Close()
		// runSuite checks this line: a zygote that served nothing proves nothing.
		fmt.Printf("pool: %d calls from inits, %d from the zygote (%s)\n", s.Hits, s.Zygote, s.ZygoteErr)
		os.Exit(code)
	}
	os.Exit(leaderUnchanged(m.Run()))
}

// leaderUnchanged returns code, or 1 if the process's main thread (the thread group leader, what
// /proc/self shows) is no longer in this thread's mount namespace or identity: a test goroutine
// that changed its thread's and ended locked ran on the main thread (see the package's init),
// and every later comparison of the host's mount table read a frozen one.
func leaderUnchanged(code int) int {
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // read from one thread; unlocked, as nothing of it changes
		defer runtime.UnlockOSThread()
		for _, f := range []string{"ns/mnt", "ns/net", "status"} {
			leader, err1 := leaderView(f, "/proc/self/")
			own, err2 := leaderView(f, "/proc/thread-self/")
			if err := errors.Join(err1, err2); err != nil || leader != own {
				errc <- fmt.Errorf("the main thread's %s is %q, this thread's %q (%v)", f, leader, own, err)
				return
			}
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		fmt.Println("FAIL: a test left the process's main thread changed:", err)
		return 1
	}
	return code
}

// leaderView is what f under dir says of its thread: the namespace a link names, or the
// identity lines of a status file.
func leaderView(f, dir string) (string, error) {
	if f != "status" {
		return os.Readlink(dir + f)
	}
	data, err := os.ReadFile(dir + f)
	var ids []string
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:") || strings.HasPrefix(line, "Groups:") || strings.HasPrefix(line, "CapEff:") {
			ids = append(ids, line)
		}
	}
	return strings.Join(ids, ""), err
}

// nobody is the identity sandboxed programs run as in these tests.
const nobody = 65534

// requireRoot skips t when the test process is not root, except in CI, where the sandbox tests
// must run, and in TestZygoteRootless's run as nobody, which runs tests written for a root host
// from an unprivileged one.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv(rootlessZygoteEnv) == "1" {
		return
	}
	fixture.NeedRoot(t)
}

// giveToNobody makes root and everything below it belong to nobody, the identity the sandboxed
// programs of these tests run as.
func giveToNobody(t testing.TB, root string) {
	t.Helper()
	if err := filepath.Walk(root, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(path, nobody, nobody)
	}); err != nil {
		t.Fatal(err)
	}
}

// workTree creates under parent a directory tree every user can traverse: base/ro (file "allowed",
// directory "secret" holding "key", file "token"), base/rw (owned by nobody) and base/outside (file
// "hidden"). Trees under /tmp exercise the re-binding of host paths into the sandbox's own /tmp.
func workTree(t testing.TB, parent string) string {
	t.Helper()
	base, err := os.MkdirTemp(parent, "nsinit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	fixture.WriteIn(t, base, map[string]string{
		"ro/allowed":     "allowed content\n",
		"ro/secret/key":  "SECRET KEY\n",
		"ro/token":       "SECRET TOKEN\n",
		"outside/hidden": "HIDDEN\n",
	})
	if err := os.Mkdir(filepath.Join(base, "rw"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{base, filepath.Join(base, "rw")} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(base, "rw"), nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return base
}

// interpreter returns the ELF interpreter of the program at path ("" for a static binary).
func interpreter(t testing.TB, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				t.Fatal(err)
			}
			return string(bytes.TrimRight(b, "\x00"))
		}
	}
	return ""
}

// plan returns a plan running prog with args as nobody, able to load shared libraries, with prog,
// the programs in spawn and their interpreters executable. Like sandbox.Compile, it resolves the
// symbolic links of every path (a Plan holds real paths only).
func plan(t testing.TB, prog string, args []string, spawn ...string) isolation.Plan {
	t.Helper()
	p := isolation.Plan{
		Path: realPath(prog),
		Args: append([]string{filepath.Base(prog)}, args...),
		Dir:  "/",
		Env:  []string{"PATH=/usr/bin:/bin", "LC_ALL=C"},
		UID:  nobody,
		GID:  nobody,
	}
	for _, ro := range []string{"/usr/lib", "/lib", "/lib64", "/usr/lib64", "/etc/ld.so.cache"} {
		if r := realPath(ro); !slices.Contains(p.ReadOnly, r) {
			p.ReadOnly = append(p.ReadOnly, r)
		}
	}
	for _, exe := range append([]string{prog}, spawn...) {
		p.Exec = append(p.Exec, realPath(exe))
		if interp := interpreter(t, exe); interp != "" && !slices.Contains(p.Exec, realPath(interp)) {
			p.Exec = append(p.Exec, realPath(interp))
		}
	}
	return p
}

// realPath returns p with its symbolic links resolved, or p when it does not exist.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// result is a finished sandboxed run.
type result struct {
	stdout, stderr string
	code           int
	failure        error // Cmd.Failure
}

// run runs p sandboxed and returns its output and exit status; its init comes from testPool when
// the suite runs through the pool (TestPoolRunsTheSuite).
func run(t testing.TB, p isolation.Plan) result {
	t.Helper()
	if testPool != nil {
		return runPooled(t, testPool, p)
	}
	cmd, stdout, stderr := capturing(t, p)
	err := cmd.Run()
	cmd.CloseChildEnds()
	r := finished(t, cmd, err, stdout, stderr)
	t.Logf("exit %d, failure %v\nstdout: %s\nstderr: %s", r.code, r.failure, r.stdout, r.stderr)
	return r
}

// capturing returns the command running p sandboxed, its standard output and error going to the
// two buffers it returns.
func capturing(t testing.TB, p isolation.Plan) (cmd *Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	cmd, err := Command(p)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd, stdout, stderr
}

// finished is the result of cmd, a capturing command that has ended, waitErr being what its Run
// or Wait returned: an exit status is part of the result, any other error fails t.
func finished(t testing.TB, cmd *Cmd, waitErr error, stdout, stderr *bytes.Buffer) result {
	t.Helper()
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		t.Fatal(waitErr)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode(), cmd.Failure()}
}

// sh returns a plan running /bin/sh -c script, able to spawn the given programs.
func sh(t testing.TB, script string, spawn ...string) isolation.Plan {
	return plan(t, "/bin/sh", []string{"-c", script}, spawn...)
}

// parents are where the tests create their trees: a host directory the sandbox shows as it is, and
// /tmp, which the sandbox covers with its own tmpfs.
var parents = []string{"/var/tmp", "/tmp"}

func TestReadAllowedFile(t *testing.T) {
	requireRoot(t)
	for _, parent := range parents {
		t.Run(parent, func(t *testing.T) {
			base := workTree(t, parent)
			p := plan(t, "/bin/cat", []string{filepath.Join(base, "ro/allowed")})
			p.ReadOnly = append(p.ReadOnly, filepath.Join(base, "ro"))
			r := run(t, p)
			if r.code != 0 || r.stdout != "allowed content\n" {
				t.Fatalf("cat of an allowed file: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func TestReadOutsideDenied(t *testing.T) {
	requireRoot(t)
	// Landlock refuses the file outside the grants; under /tmp it is not even there.
	for parent, want := range map[string]string{"/var/tmp": "Permission denied", "/tmp": "No such file"} {
		t.Run(parent, func(t *testing.T) {
			base := workTree(t, parent)
			p := plan(t, "/bin/cat", []string{filepath.Join(base, "outside/hidden")})
			p.ReadOnly = append(p.ReadOnly, filepath.Join(base, "ro"))
			r := run(t, p)
			if r.code == 0 || strings.Contains(r.stdout, "HIDDEN") || !strings.Contains(r.stderr, want) {
				t.Fatalf("cat outside ReadOnly: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
			}
		})
	}
}

// TestDenyInsideAllowedTree checks what denied paths look like inside a read grant: a denied
// directory is an empty, read-only directory (listing it succeeds and shows nothing, its files do
// not exist) and a denied file an empty, read-only file.
func TestDenyInsideAllowedTree(t *testing.T) {
	requireRoot(t)
	base := workTree(t, "/var/tmp")
	ro := filepath.Join(base, "ro")
	for name, allowed := range map[string]string{"tree": ro, "root": "/"} {
		for target, want := range map[string]struct{ status, stderr string }{
			"secret/key": {"status=1", "No such file or directory"},
			"token":      {"status=0", ""},
		} {
			t.Run(name+"/"+target, func(t *testing.T) {
				script := fmt.Sprintf("cat %s/allowed; cat %s/%s; echo status=$?; ls %s; ls -A %s/secret; echo listed=$?; stat -c %%a %s/secret %s/token",
					ro, ro, target, ro, ro, ro, ro)
				p := sh(t, script, "/bin/cat", "/bin/ls", "/usr/bin/stat")
				p.ReadOnly = append(p.ReadOnly, allowed)
				p.Deny = []string{filepath.Join(ro, "secret"), filepath.Join(ro, "token")}
				r := run(t, p)
				if r.code != 0 || !strings.HasPrefix(r.stdout, "allowed content\n") {
					t.Fatalf("the rest of the allowed tree must stay readable: exit %d, stdout %q", r.code, r.stdout)
				}
				wantOut := "allowed content\n" + want.status + "\nallowed\nsecret\ntoken\nlisted=0\n555\n444\n"
				if r.stdout != wantOut || !strings.Contains(r.stderr, want.stderr) {
					t.Fatalf("reading the denied %s: stdout %q, stderr %q; want stdout %q and %q", target, r.stdout, r.stderr, wantOut, want.stderr)
				}
			})
		}
	}
}

// TestSymlinkInPlanFailsClosed is issue 10 §2 at the init: a plan path that became a symbolic link
// after the policy check (here: a writable root, and a parent of a read-only one) is not followed;
// the sandbox is refused, naming the path, and nothing runs.
func TestSymlinkInPlanFailsClosed(t *testing.T) {
	requireRoot(t)
	base := workTree(t, "/var/tmp")
	link := filepath.Join(base, "link")
	if err := os.Symlink(filepath.Join(base, "outside"), link); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(p *isolation.Plan){
		"ReadWrite root":   func(p *isolation.Plan) { p.ReadWrite = append(p.ReadWrite, link) },
		"ReadOnly through": func(p *isolation.Plan) { p.ReadOnly = append(p.ReadOnly, filepath.Join(link, "hidden")) },
	} {
		t.Run(name, func(t *testing.T) {
			p := sh(t, "echo ran")
			mutate(&p)
			r := run(t, p)
			if r.code != exitFailure || strings.Contains(r.stdout, "ran") || r.failure == nil ||
				!strings.Contains(r.failure.Error(), "resolve: "+link) || !strings.Contains(r.failure.Error(), "symbolic link") {
				t.Fatalf("exit %d, stdout %q, Failure() = %v; want the sandbox refused, naming %s", r.code, r.stdout, r.failure, link)
			}
		})
	}
}

func TestDenyInsideWritableTree(t *testing.T) {
	requireRoot(t)
	ws := filepath.Join(workTree(t, "/var/tmp"), "rw")
	for _, dir := range []string{".git/hooks", "sub"} {
		if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, file := range []string{"file", ".git/config", ".git/hooks/pre-commit.sample"} {
		if err := os.WriteFile(filepath.Join(ws, file), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	giveToNobody(t, ws)
	script := `cd ` + ws + `
echo a > file && echo ok-existing
echo b > sub/new && echo ok-sibling-tree
echo c > .git/config && echo ok-beside-deny
echo x > .git/hooks/pre-commit && echo ESCAPE-hook
echo x > newfile && echo ok-new-file
mv .git g && echo ESCAPE-rename-parent
mv .git/hooks .git/h && echo ESCAPE-rename-deny
rmdir .git/hooks && echo ESCAPE-remove-deny
echo x > .env && echo created-missing-deny
exit 0`
	p := sh(t, script, "/bin/mv", "/bin/rmdir")
	p.ReadWrite = []string{ws}
	p.Deny = []string{filepath.Join(ws, ".git/hooks"), filepath.Join(ws, ".env")}
	p.Absent = []string{filepath.Join(ws, ".env")}
	r := run(t, p)
	// A writable tree stays writable next to its deny paths (git writes .git/index beside
	// .git/hooks; tools write new files beside .git).
	for _, want := range []string{"ok-existing", "ok-sibling-tree", "ok-beside-deny", "ok-new-file"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q", r.stdout, want)
		}
	}
	// The existing deny path is masked and pinned, and so are the directories above it.
	if strings.Contains(r.stdout, "ESCAPE") {
		t.Errorf("stdout %q: a deny path was reached, moved or removed", r.stdout)
	}
	for _, path := range []string{".git/hooks/pre-commit", "g", ".git/h"} {
		if _, err := os.Lstat(filepath.Join(ws, path)); err == nil {
			t.Errorf("%s was created on the host", path)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks/pre-commit.sample")); err != nil {
		t.Errorf("the masked directory's content on the host: %v", err)
	}
	// A deny path that does not exist when the call starts cannot be masked inside a writable
	// tree (that would need a mount point on the host): the program may create it. Documented.
	if !strings.Contains(r.stdout, "created-missing-deny") {
		t.Errorf("stdout %q: the missing deny path was expected to be creatable", r.stdout)
	}
}

// TestDenySplitsLandlockRules checks the Landlock layer alone: no rule reaches a deny path or
// anything beneath it, its ancestors only get ReadDir, and everything else keeps the grant.
func TestDenySplitsLandlockRules(t *testing.T) {
	base := workTree(t, "/var/tmp")
	ro := filepath.Join(base, "ro")
	p := isolation.Plan{ReadOnly: []string{ro}, Deny: []string{filepath.Join(ro, "secret/key"), filepath.Join(ro, "token")}}
	paths, err := openPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	defer paths.close()
	g, err := grants(p, paths)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]landlock.AccessFSSet{
		ro:                           ll.AccessFSReadDir,
		filepath.Join(ro, "allowed"): accessRead,
		filepath.Join(ro, "secret"):  ll.AccessFSReadDir,
	}
	for path, a := range want {
		if g[path] != a {
			t.Errorf("grant on %s = %v, want %v", path, g[path], a)
		}
	}
	for path := range g {
		for _, d := range p.Deny {
			if within(path, d) {
				t.Errorf("deny path %s got a rule (%s)", d, path)
			}
		}
	}
}

func TestWritesOnlyUnderReadWrite(t *testing.T) {
	requireRoot(t)
	for _, parent := range parents {
		t.Run(parent, func(t *testing.T) { testWritesOnlyUnderReadWrite(t, parent) })
	}
}

func testWritesOnlyUnderReadWrite(t *testing.T, parent string) {
	base := workTree(t, parent)
	rw, ro := filepath.Join(base, "rw"), filepath.Join(base, "ro")
	script := fmt.Sprintf(`echo data > %[1]s/new && cat %[1]s/new && mkdir %[1]s/d && echo mkdir-ok
echo x > %[2]s/new && echo WROTE-RO
echo x > %[2]s/allowed && echo WROTE-RO-FILE
echo x > %[3]s/new && echo WROTE-OUTSIDE
echo x > /etc/nsinit-test && echo WROTE-ETC
touch /tmp/scratch && echo tmp-ok
exit 0`, rw, ro, filepath.Join(base, "outside"))
	p := sh(t, script, "/bin/cat", "/bin/mkdir", "/usr/bin/touch")
	p.ReadOnly = append(p.ReadOnly, ro)
	p.ReadWrite = []string{rw}
	r := run(t, p)
	for _, want := range []string{"data\n", "mkdir-ok", "tmp-ok"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q", r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("a write outside ReadWrite succeeded: %q", r.stdout)
	}
	if data, err := os.ReadFile(filepath.Join(rw, "new")); err != nil || string(data) != "data\n" {
		t.Errorf("the write under ReadWrite did not reach the host: %q, %v", data, err)
	}
	for _, path := range []string{filepath.Join(ro, "new"), filepath.Join(base, "outside/new"), "/etc/nsinit-test"} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s was created on the host", path)
		}
	}
}

func TestExecNotAllowed(t *testing.T) {
	requireRoot(t)
	r := run(t, sh(t, "/usr/bin/id -u; echo status=$?"))
	if !strings.Contains(r.stdout, "status=126") || !strings.Contains(r.stderr, "Permission denied") {
		t.Fatalf("exec of a program outside Exec: stdout %q, stderr %q; want status 126, Permission denied", r.stdout, r.stderr)
	}
}

func TestUIDDropped(t *testing.T) {
	requireRoot(t)
	r := run(t, sh(t, "id -u; id -g; id -G", "/usr/bin/id"))
	if r.code != 0 || r.stdout != "65534\n65534\n65534\n" {
		t.Fatalf("id: exit %d, stdout %q; want uid, gid and groups 65534 only", r.code, r.stdout)
	}
}

// TestSupplementaryGroups: a root host gives the program the plan's supplementary groups (a caller's
// groups, with which a workspace may be shared), and no others; group 0 is refused.
func TestSupplementaryGroups(t *testing.T) {
	requireRoot(t)
	p := sh(t, "id -u; id -g; id -G", "/usr/bin/id")
	p.Groups = []int{4242, 100, 4242}
	r := run(t, p)
	if r.code != 0 || r.stdout != "65534\n65534\n65534 100 4242\n" {
		t.Fatalf("id: exit %d, stdout %q; want groups 65534 100 4242", r.code, r.stdout)
	}
	p.Groups = []int{0}
	if _, err := Command(p); err == nil || !strings.Contains(err.Error(), "root's group") {
		t.Fatalf("group 0: %v", err)
	}
}

func TestProcessStatus(t *testing.T) {
	requireRoot(t)
	for _, withSeccomp := range []bool{false, true} {
		t.Run(fmt.Sprintf("seccomp=%v", withSeccomp), func(t *testing.T) {
			p := plan(t, "/bin/cat", []string{"/proc/self/status"})
			p.Seccomp = withSeccomp
			r := run(t, p)
			want := []string{"NoNewPrivs:\t1\n", "CapInh:\t0000000000000000\n", "CapPrm:\t0000000000000000\n",
				"CapEff:\t0000000000000000\n", "CapBnd:\t0000000000000000\n", "CapAmb:\t0000000000000000\n"}
			if withSeccomp {
				want = append(want, "Seccomp:\t2\n")
			} else {
				want = append(want, "Seccomp:\t0\n")
			}
			for _, w := range want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("/proc/self/status lacks %q", w)
				}
			}
		})
	}
}

func TestNoExecMemfd(t *testing.T) {
	requireRoot(t)
	host, err := os.ReadFile("/proc/sys/vm/memfd_noexec")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(t, "/bin/cat", []string{"/proc/sys/vm/memfd_noexec"})
	p.NoExecMemfd, p.Seccomp = true, true
	if r := run(t, p); r.code != 0 || r.stdout != "2\n" {
		t.Fatalf("vm.memfd_noexec in the sandbox: exit %d, %q; want 2", r.code, r.stdout)
	}
	if after, err := os.ReadFile("/proc/sys/vm/memfd_noexec"); err != nil || !bytes.Equal(after, host) {
		t.Fatalf("the host's vm.memfd_noexec changed from %q to %q (%v)", host, after, err)
	}
}

func TestPIDNamespace(t *testing.T) {
	requireRoot(t)
	// The program is not PID 2: the init's runtime threads take the first numbers of the namespace.
	r := run(t, sh(t, "echo $$; ls /proc", "/bin/ls"))
	fields := strings.Fields(r.stdout)
	if r.code != 0 || len(fields) == 0 {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	self := fields[0]
	var pids []string
	for _, f := range fields[1:] {
		if _, err := strconv.Atoi(f); err == nil {
			pids = append(pids, f)
		}
	}
	if n, _ := strconv.Atoi(self); n < 2 || n > 100 || len(pids) != 3 || !slices.Contains(pids, "1") || !slices.Contains(pids, self) {
		t.Fatalf("the program is PID %s and /proc lists %v; want only the init (1), the program and ls", self, pids)
	}
}

func TestNetworkIsolated(t *testing.T) {
	requireRoot(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		noNetwork bool
		want      string
	}{{false, "Connection refused"}, {true, "Permission denied"}} {
		t.Run(fmt.Sprintf("NoNetwork=%v", tc.noNetwork), func(t *testing.T) {
			script := fmt.Sprintf("echo hi > /dev/tcp/127.0.0.1/%d && echo CONNECTED", port)
			p := plan(t, "/bin/bash", []string{"-c", script})
			p.NoNetwork = tc.noNetwork
			r := run(t, p)
			if r.code == 0 || strings.Contains(r.stdout, "CONNECTED") || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("connect to the host's loopback listener: exit %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	default:
	}
}

func TestHostnameIsolated(t *testing.T) {
	requireRoot(t)
	r := run(t, plan(t, "/bin/cat", []string{"/proc/sys/kernel/hostname"}))
	if host, _ := os.Hostname(); r.stdout != sandboxHostname+"\n" || host == sandboxHostname {
		t.Fatalf("hostname in the sandbox %q (host %q); want %q", r.stdout, host, sandboxHostname)
	}
}

func TestExitStatusPropagates(t *testing.T) {
	requireRoot(t)
	if r := run(t, sh(t, "exit 3")); r.code != 3 {
		t.Fatalf("exit status %d, want 3", r.code)
	}
	if r := run(t, sh(t, "kill -KILL $$")); r.code != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit status %d after SIGKILL, want %d", r.code, 128+int(syscall.SIGKILL))
	}
}

func TestSIGTERMStopsProgram(t *testing.T) {
	requireRoot(t)
	cmd, err := Command(sh(t, "echo ready; /bin/sleep 60", "/bin/sleep"))
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // on t.Fatal below; the wait goroutine reaps it
	cmd.CloseChildEnds()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the sandbox ignored SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit status %d after SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start))
}

func TestOrphansReaped(t *testing.T) {
	requireRoot(t)
	// The subshell exits at once; its background sleep is re-parented to the init, exits after 0.1 s
	// and must be reaped by the init.
	r := run(t, sh(t, "(/bin/sleep 0.1 &); /bin/sleep 1; cat /proc/[0-9]*/stat", "/bin/sleep", "/bin/cat"))
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	for line := range strings.Lines(r.stdout) {
		if i := strings.LastIndex(line, ") "); i >= 0 && strings.HasPrefix(line[i+2:], "Z") {
			t.Errorf("zombie: %s", line)
		}
	}
}

func TestOnlyStdioInherited(t *testing.T) {
	requireRoot(t)
	leak, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	cmd, err := Command(sh(t, "ls /proc/$$/fd", "/bin/ls"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, leak)
	out, err := cmd.Output()
	cmd.CloseChildEnds()
	if err != nil {
		t.Fatal(err)
	}
	if fds := strings.Fields(string(out)); !slices.Equal(fds, []string{"0", "1", "2"}) {
		t.Fatalf("the program has fds %v, want only 0 1 2", fds)
	}
}

// TestOnlyPlanEnvironment checks that the program's environment is its plan's, none of the init's
// own (initEnv: GOMAXPROCS) or of the host's, also for a plan with no environment at all.
func TestOnlyPlanEnvironment(t *testing.T) {
	requireRoot(t)
	t.Setenv("NSINIT_TEST_HOST_VARIABLE", "leaked")
	for _, env := range [][]string{{"PATH=/usr/bin:/bin", "LC_ALL=C"}, nil} { // nil: none at all, not the init's
		p := plan(t, "/usr/bin/env", nil)
		p.Env = env
		r := run(t, p)
		if r.code != 0 {
			t.Fatalf("env: exit %d: %s", r.code, r.stderr)
		}
		if got := strings.Fields(r.stdout); !slices.Equal(got, env) {
			t.Fatalf("the program's environment is %q, want %q", got, env)
		}
	}
}

// rootlessEnv marks the copy of the test binary that TestRootless runs as nobody.
const rootlessEnv = "NSINIT_TEST_ROOTLESS"

// TestRootless runs a sandbox from an unprivileged host process (a copy of this test binary run as
// nobody), where the init gets a user namespace and the program keeps the host uid, mapped to 0,
// without capabilities.
func TestRootless(t *testing.T) {
	if os.Getenv(rootlessEnv) == "1" {
		testRootlessChild(t)
		return
	}
	requireRoot(t)
	rerunAsNobody(t, rootlessEnv, "-test.run=^"+t.Name()+"$")
}

// rerunAsNobody runs this test binary again with the test flags given (which tests: -test.run) in
// a copy of it, as nobody, with env=1 in its environment and NSINIT_TEST_BASE naming the workTree
// the copy lies in, and fails t when it fails. CI is passed on: there, a test that cannot run fails.
func rerunAsNobody(t *testing.T, env string, flags ...string) {
	t.Helper()
	base := workTree(t, "/var/tmp")
	cmd := exec.Command(testBinaryIn(t, base), append(flags, "-test.v")...)
	cmd.Env = []string{env + "=1", "NSINIT_TEST_BASE=" + base, poolEnv + "=" + os.Getenv(poolEnv), "CI=" + os.Getenv("CI")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
}

// testBinaryIn copies this test binary into dir and returns the copy's path: the build directory
// may be under /tmp, which every sandbox covers with its own, and is not open to nobody.
func testBinaryIn(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "nsinit.test")
	if err := fixture.WriteFile(copied, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return copied
}

func testRootlessChild(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Fatal("the rootless child runs as root")
	}
	ro := filepath.Join(os.Getenv("NSINIT_TEST_BASE"), "ro")
	script := fmt.Sprintf("id -u; cat %[1]s/allowed; cat %[1]s/token; cat /proc/self/status", ro)
	p := sh(t, script, "/usr/bin/id", "/bin/cat")
	p.ReadOnly = append(p.ReadOnly, ro)
	p.Deny = []string{filepath.Join(ro, "token")}
	// As the hosts run it: vm.memfd_noexec cannot be set from a user namespace, so the filter
	// stands in for it (the sandbox used to be refused here).
	p.Seccomp, p.NoExecMemfd = true, true
	r := run(t, p)
	for _, want := range []string{"0\nallowed content\n", "CapEff:\t0000000000000000\n", "CapBnd:\t0000000000000000\n",
		"NoNewPrivs:\t1\n", "Seccomp:\t2\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "SECRET") || r.stderr != "" {
		t.Errorf("the denied file must read as empty: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

func TestFailureIsReported(t *testing.T) {
	requireRoot(t)
	p := plan(t, "/bin/cat", nil)
	p.ReadWrite = []string{"/nonexistent-nsinit-path"}
	r := run(t, p)
	if r.code != exitFailure || !strings.HasPrefix(r.stderr, "clihost sandbox: resolve: ReadWrite /nonexistent-nsinit-path: ") {
		t.Fatalf("exit %d, stderr %q; want %d and a one-line report", r.code, r.stderr, exitFailure)
	}
	if !errors.Is(r.failure, ErrUnavailable) || !strings.Contains(r.failure.Error(), "resolve: ReadWrite /nonexistent-nsinit-path: ") {
		t.Fatalf("Failure() = %v, want the failed step", r.failure)
	}
	// Failures after the init confined itself travel the same way: here the exec itself (the file is
	// not executable).
	p = plan(t, "/bin/cat", nil)
	p.Path, p.Exec = "/etc/hostname", append(p.Exec, "/etc/hostname")
	if r := run(t, p); r.failure == nil || !strings.Contains(r.failure.Error(), "exec /etc/hostname: ") {
		t.Fatalf("exit %d, Failure() = %v; want the exec's failure", r.code, r.failure)
	}
	// A program that exits 125 and prints the sandbox's words is just a program.
	r = run(t, sh(t, "echo 'clihost sandbox: mount: fake' >&2; exit 125"))
	if r.code != exitFailure || r.failure != nil {
		t.Fatalf("exit %d, Failure() = %v; want 125 and no failure", r.code, r.failure)
	}
}

func TestCommandRejectsBadPlans(t *testing.T) {
	good := isolation.Plan{Path: realPath("/bin/true"), Args: []string{"true"}, Dir: "/", UID: nobody, GID: nobody, Exec: []string{realPath("/bin/true")}}
	cmd, err := Command(good)
	if err != nil {
		t.Fatalf("good plan: %v", err)
	}
	cmd.CloseChildEnds()
	cases := map[string]func(p *isolation.Plan){
		"relative path":       func(p *isolation.Plan) { p.Path = "bin/true" },
		"no argv":             func(p *isolation.Plan) { p.Args = nil },
		"unclean dir":         func(p *isolation.Plan) { p.Dir = "/tmp/../etc" },
		"path not in Exec":    func(p *isolation.Plan) { p.Exec = nil },
		"relative ReadOnly":   func(p *isolation.Plan) { p.ReadOnly = []string{"etc"} },
		"under /proc":         func(p *isolation.Plan) { p.ReadOnly = []string{"/proc/1/root"} },
		"under /dev":          func(p *isolation.Plan) { p.ReadWrite = []string{"/dev/sda"} },
		"writable root":       func(p *isolation.Plan) { p.ReadWrite = []string{"/"} },
		"deny root":           func(p *isolation.Plan) { p.Deny = []string{"/"} },
		"exec under deny":     func(p *isolation.Plan) { p.Deny = []string{"/usr/bin"} },
		"runs as root (root)": func(p *isolation.Plan) { p.UID = 0 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "runs as root (root)" && os.Geteuid() != 0 {
				t.Skip("UID is ignored when the host is not root")
			}
			p := good
			mutate(&p)
			if cmd, err := Command(p); err == nil {
				cmd.CloseChildEnds()
				t.Fatal("accepted")
			}
		})
	}
}

func TestPrepareDropsDeniedGrants(t *testing.T) {
	base := workTree(t, "/var/tmp")
	ro := filepath.Join(base, "ro")
	p := isolation.Plan{
		Path: "/bin/true", Args: []string{"true"}, Dir: "/", Exec: []string{"/bin/true"},
		ReadOnly: []string{ro, filepath.Join(ro, "secret/key")}, ReadWrite: []string{filepath.Join(ro, "secret")},
		Deny: []string{filepath.Join(ro, "secret")},
	}
	got, err := prepare(p, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.ReadOnly, []string{ro}) || len(got.ReadWrite) != 0 {
		t.Fatalf("ReadOnly %v, ReadWrite %v: want the grants under Deny dropped", got.ReadOnly, got.ReadWrite)
	}
	if !slices.Equal(got.Exec, []string{"/bin/true"}) {
		t.Fatalf("Exec %v, want /bin/true as given (a plan is not resolved again)", got.Exec)
	}
}

func TestCheck(t *testing.T) {
	s, err := Probe()
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if s.LandlockABI < minLandlockABI || !s.Seccomp || s.UserNS != (os.Geteuid() != 0) {
		t.Fatalf("Probe = %+v", s)
	}
	if err := Check(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkSandboxedTrue(b *testing.B) {
	requireRoot(b)
	p := plan(b, "/bin/true", nil)
	p.Seccomp = true
	for b.Loop() {
		cmd, err := Command(p)
		if err != nil {
			b.Fatal(err)
		}
		err = cmd.Run()
		cmd.CloseChildEnds()
		if err == nil {
			err = cmd.Failure()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlainTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHelperExecutable(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	helperPath := filepath.Join(dir, HelperName)
	build := exec.Command("go", "build", "-o", helperPath, "github.com/clihost/clihost/cmd/clihost-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the helper: %v\n%s", err, out)
	}
	// Without the markers the helper refuses to do anything.
	if out, err := exec.Command(helperPath).CombinedOutput(); err == nil || !strings.Contains(string(out), "not meant to be run by hand") {
		t.Fatalf("helper run by hand: %v %s", err, out)
	}
	if err := os.Chmod(helperPath, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := UseHelper(helperPath); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Fatalf("a world-writable helper was accepted: %v", err)
	}
	if err := os.Chmod(helperPath, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := UseHelper(helperPath); err != nil {
		t.Fatal(err)
	}
	defer func() {
		helper.Lock()
		helper.path, helper.decided = "", true
		helper.Unlock()
	}()
	r := run(t, sh(t, "cat /proc/1/cmdline", "/bin/cat"))
	// PID 1 is the init, or a process the zygote forked from itself (with its command line).
	if r.code != 0 || r.failure != nil || !strings.HasPrefix(r.stdout, procName+"\x00"+initMarker) && !strings.HasPrefix(r.stdout, procName+"\x00"+zygoteMarker) {
		t.Fatalf("exit %d, failure %v, stdout %q", r.code, r.failure, r.stdout)
	}
	cmd, err := Command(sh(t, "true"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.CloseChildEnds()
	_ = cmd.Failure()
	if cmd.Path != helperPath {
		t.Fatalf("Command runs %s, want the helper %s", cmd.Path, helperPath)
	}
}

func TestIngressReachesTheProgramFromTheHost(t *testing.T) {
	requireRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // a free port on the host, for the program to use inside
	// The program listens on its own loopback: a few lines of Debian's python3.
	fixture.Need(t, "/usr/bin/python3") // Debian's (awscli depends on it)
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf(`import socket
s = socket.socket(); s.bind(("127.0.0.1", %d)); s.listen(1); print("listening", flush=True)
c, _ = s.accept(); c.sendall(b"hello from inside\n"); c.close()
try:
    socket.socket().bind(("127.0.0.1", %d))
    print("BOUND-OTHER-PORT", flush=True)
except OSError as e:
    print("other bind:", e.errno, flush=True)`, port, port+1)
	p := plan(t, py, []string{"-c", server})
	p.ReadOnly = append(p.ReadOnly, "/usr/lib", "/etc/ld.so.cache")
	p.NoNetwork, p.Ingress = true, []int{port}
	cmd, err := Command(p)
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // on t.Fatal below
	cmd.CloseChildEnds()
	stop, err := cmd.ServeIngress()
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("read %q, %v; stderr %s", line, err, stderr.String())
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	rest, _ := io.ReadAll(out)
	err = cmd.Wait()
	stop()
	if f := cmd.Failure(); f != nil || err != nil {
		t.Fatalf("wait %v, failure %v, stderr %s", err, f, stderr.String())
	}
	if string(got) != "hello from inside\n" {
		t.Errorf("the host read %q through the ingress port", got)
	}
	if strings.Contains(string(rest), "BOUND-OTHER-PORT") || !strings.Contains(string(rest), "other bind: 13") {
		t.Errorf("binding a port outside Ingress: %q, want EACCES (13)", rest)
	}
}

// TestDenyRemovedAfterCheck: a deny path inside a writable root that is missing when the init
// resolves it, and was not known absent at the check (Plan.Absent), was removed in between; the
// sandbox is refused (it would be neither masked nor swept). Control: listed in Absent, the same
// plan runs.
func TestDenyRemovedAfterCheck(t *testing.T) {
	requireRoot(t)
	ws := filepath.Join(workTree(t, "/var/tmp"), "rw")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(ws, ".vscode")
	p := sh(t, "echo ran")
	p.ReadWrite = []string{ws}
	p.Deny = []string{gone}
	r := run(t, p)
	if r.code != exitFailure || strings.Contains(r.stdout, "ran") || r.failure == nil ||
		!strings.Contains(r.failure.Error(), "resolve: "+gone) || !strings.Contains(r.failure.Error(), "removed") {
		t.Fatalf("exit %d, stdout %q, Failure() = %v; want the sandbox refused, naming %s", r.code, r.stdout, r.failure, gone)
	}
	p.Absent = []string{gone}
	if r := run(t, p); !strings.Contains(r.stdout, "ran") {
		t.Fatalf("known absent: exit %d, stdout %q, Failure() = %v", r.code, r.stdout, r.failure)
	}
}

// TestProtectInsideWritableTree: a Protect path inside a writable root (a bundle folder in the
// workspace) is readable and its Exec file runs, but nothing in it can be written, created or
// removed (EROFS), and neither it nor its parents can be renamed or removed (EBUSY); the rest of
// the root stays writable.
func TestProtectInsideWritableTree(t *testing.T) {
	requireRoot(t)
	ws := filepath.Join(workTree(t, "/var/tmp"), "rw")
	bundle := filepath.Join(ws, ".cli", "tool")
	if err := os.MkdirAll(filepath.Join(bundle, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "CLI.md"), []byte("manifest\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(bundle, "bin", "tool")
	if err := fixture.WriteFile(tool, []byte("#!/bin/sh\necho tool-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	giveToNobody(t, ws)
	script := `cd ` + ws + `
cat .cli/tool/CLI.md
` + tool + `
echo x > other && echo ok-beside
echo x >> .cli/tool/CLI.md && echo ESCAPE-write
echo x > .cli/tool/new && echo ESCAPE-create
rm -f .cli/tool/CLI.md && echo ESCAPE-remove
mv .cli/tool .cli/t2 && echo ESCAPE-rename
mv .cli c2 && echo ESCAPE-rename-parent
exit 0`
	p := sh(t, script, "/bin/cat", "/bin/rm", "/bin/mv")
	p.Exec = append(p.Exec, tool) // a script: /bin/sh runs it
	p.ReadWrite = []string{ws}
	p.Protect = []string{bundle}
	r := run(t, p)
	for _, want := range []string{"manifest", "tool-ran", "ok-beside"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q (stderr %q)", r.stdout, want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "ESCAPE") {
		t.Errorf("stdout %q: the protected folder was changed", r.stdout)
	}
	for _, want := range []string{"Read-only file system", "Device or resource busy"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(bundle, "CLI.md")); err != nil || string(b) != "manifest\n" {
		t.Errorf("CLI.md on the host: %q, %v", b, err)
	}
}

// TestUmask: the plan's umask is the program's; without one the program keeps the host's.
func TestUmask(t *testing.T) {
	requireRoot(t)
	p := plan(t, "/bin/sh", []string{"-c", "umask"})
	p.Umask = 0o007
	if r := run(t, p); r.code != 0 || r.stdout != "0007\n" {
		t.Fatalf("Umask 0o007: exit %d, stdout %q, want 0007", r.code, r.stdout)
	}
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	p.Umask = 0
	if r := run(t, p); r.code != 0 || r.stdout != "0027\n" {
		t.Fatalf("no Umask: exit %d, stdout %q, want the host's 0027", r.code, r.stdout)
	}
}

// TestNoSetUIDFiles: with the seccomp filter a program cannot leave a set-user-ID file in a
// writable tree (outside the sandbox, whose mounts are nosuid, it would run as the program's uid
// for whoever runs it): chmod u+s fails with EPERM and leaves no S_ISUID on disk; chmod 755 and
// g+s on a directory (git init --shared) work.
func TestNoSetUIDFiles(t *testing.T) {
	requireRoot(t)
	rw := filepath.Join(workTree(t, "/var/tmp"), "rw")
	script := fmt.Sprintf(`cd %s && echo x > f && chmod 755 f && echo chmod-755-ok
chmod u+s f 2>&1; echo "chmod-u+s=$?"
mkdir d && chmod g+s d && echo chmod-dir-g+s-ok
exit 0`, rw)
	p := sh(t, script, "/bin/chmod", "/bin/mkdir")
	p.ReadWrite = []string{rw}
	p.Seccomp = true
	r := run(t, p)
	for _, want := range []string{"chmod-755-ok\n", "Operation not permitted", "chmod-u+s=1\n", "chmod-dir-g+s-ok\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s\nstderr: %s", want, r.stdout, r.stderr)
		}
	}
	st, err := os.Stat(filepath.Join(rw, "f"))
	if err != nil || st.Mode()&os.ModeSetuid != 0 || st.Mode().Perm() != 0o755 {
		t.Errorf("f after the program: %v %v, want 0755 without S_ISUID", st.Mode(), err)
	}
}
