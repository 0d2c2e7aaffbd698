package nsinit

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// The sandbox built ahead (zygote_ahead.go) must be the sandbox a call would get built for it, or
// not be used. These tests build one for a plan, change what it was built from the way an owner,
// a package manager or another process would between two calls of an agent, and check that the
// next call sees what a sandbox built for it shows.

// awaitAhead runs p (its output ignored) until the pool's zygote has a sandbox built ahead for it,
// waiting for its next call, at most 10 s; the calls pause as an agent's do.
func awaitAhead(t *testing.T, pool *Pool, p isolation.Plan) {
	t.Helper()
	z := pool.zygote()
	if z == nil {
		t.Fatal("the pool has no zygote")
	}
	prepared, err := prepare(p, pool.root)
	if err != nil {
		t.Fatal(err)
	}
	env, err := pooledEnvelope(prepared, false)
	if err != nil {
		t.Fatal(err)
	}
	env.UserNS = z.userNS
	key := string(aheadKey(env))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if aheadWaiting(z, key) {
			return
		}
		cmd, stdio := takeReady(t, pool, p, false)
		finishPooled(t, cmd, stdio)
		time.Sleep(5 * aheadPause)
	}
	t.Fatalf("no sandbox was built ahead within 10s (stats %+v)", pool.Stats())
}

// aheadWaiting reports whether z has a sandbox built ahead for the plan of key that waits for its
// call (its byte is there to read).
func aheadWaiting(z *zygote, key string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, a := range z.ahead.built {
		fds := []unix.PollFd{{Fd: int32(a.fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); a.key == key && err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0 {
			return true
		}
	}
	return false
}

// runCounting runs p through pool and returns its result and whether it ran in a sandbox built
// ahead.
func runCounting(t *testing.T, pool *Pool, p isolation.Plan) (result, bool) {
	t.Helper()
	before := pool.Stats().ZygoteAhead
	r := runPooled(t, pool, p)
	return r, pool.Stats().ZygoteAhead > before
}

// runAhead has a sandbox built ahead for built's plan and runs call through pool until call runs
// in one, at least five times and for at most 30 s: a sandbox built ahead goes stale when the
// host's mount table changes meanwhile, as other packages' tests, run beside these, mount and
// unmount (CI97 saw five stale in a row). It returns the last result and whether that call ran
// ahead.
func runAhead(t *testing.T, pool *Pool, built, call isolation.Plan) (result, bool) {
	t.Helper()
	var r result
	ahead := false
	start := time.Now()
	for try := 1; !ahead && (try <= 5 || time.Since(start) < 30*time.Second); try++ {
		awaitAhead(t, pool, built)
		if r, ahead = runCounting(t, pool, call); !ahead {
			t.Logf("try %d: the sandbox built ahead was not used", try)
		}
	}
	return r, ahead
}

// aheadTree is a tree on the host's view (not under the sandbox's own /tmp) for one test: ro/ with
// a readable file and a deny path, rw/ writable by the test's uid.
func aheadTree(t *testing.T) string {
	t.Helper()
	base := workTree(t, "/var/tmp")
	fixture.WriteIn(t, base, map[string]string{"ro/secret.env": "OLD SECRET\n"})
	return base
}

// TestZygoteBuildsRepeatedPlansAhead: calls that repeat a plan, with an agent's pause between
// them, run in sandboxes built ahead, each with its own argv and environment (which are not what
// the sandbox is built from), and with the same result as in a sandbox built for them.
func TestZygoteBuildsRepeatedPlansAhead(t *testing.T) {
	pool := zygotePool(t)
	p := sh(t, `echo "$0 $GREETING"; cat /proc/self/cgroup >/dev/null; id -u`, "/usr/bin/id", "/bin/cat")
	p.Args = []string{"sh", "-c", p.Args[2], "first"}
	call := p
	call.Args = append(slices.Clone(p.Args[:3]), "second")
	call.Env = append(slices.Clone(p.Env), "GREETING=hello")
	r, ahead := runAhead(t, pool, p, call)
	p = call
	uid, other := "65534", "65533"
	if !pool.root {
		uid, other = "0", "0" // the host user, uid 0 of the zygote's user namespace, whatever the plan says
	}
	if want := "second hello\n" + uid + "\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("call in a sandbox built ahead: exit %d, stdout %q, want %q (stderr %q)", r.code, r.stdout, want, r.stderr)
	}
	if !ahead {
		t.Fatalf("the call did not run in the sandbox built ahead (stats %+v)", pool.Stats())
	}
	// What the sandbox is built from differs (here the uid): a sandbox built for the call.
	awaitAhead(t, pool, p)
	p.UID = nobody - 1
	r, ahead = runCounting(t, pool, p)
	if want := "second hello\n" + other + "\n"; r.code != 0 || r.stdout != want || ahead {
		t.Fatalf("call of another uid: exit %d, stdout %q, want %q, ahead %t (stderr %q)", r.code, r.stdout, want, ahead, r.stderr)
	}
}

// TestZygoteAheadSandboxKeepsNoReplacedDenyPathUnmasked: a deny path's file replaced by another
// (an editor's save renames a new file over it) after the sandbox was built ahead is masked for the
// next call as in a sandbox built for it; so is one unlinked and linked back to the same file (the
// kernel detaches the mask mounted on the old name), in a read-only tree and in a writable one.
func TestZygoteAheadSandboxKeepsNoReplacedDenyPathUnmasked(t *testing.T) {
	for _, tree := range []string{"ro", "rw"} {
		t.Run(tree, func(t *testing.T) { testAheadReplacedDenyPath(t, tree) })
	}
}

func testAheadReplacedDenyPath(t *testing.T, tree string) {
	pool := zygotePool(t)
	base := aheadTree(t)
	secret := filepath.Join(base, tree, "secret.env")
	fixture.WriteIn(t, base, map[string]string{tree + "/secret.env": "OLD SECRET\n"})
	p := plan(t, "/bin/cat", []string{secret})
	if tree == "ro" {
		p.ReadOnly = append(p.ReadOnly, filepath.Join(base, tree))
	} else {
		p.ReadWrite = []string{filepath.Join(base, tree)}
	}
	p.Deny = []string{secret}
	for _, change := range []struct {
		name string
		do   func() error
	}{
		{"renamed over", func() error {
			if err := os.WriteFile(secret+".new", []byte("NEW SECRET\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(secret+".new", secret)
		}},
		{"unlinked and linked back", func() error {
			keep := filepath.Join(base, "keep")
			if err := os.Link(secret, keep); err != nil {
				return err
			}
			if err := os.Remove(secret); err != nil {
				return err
			}
			if err := os.Link(keep, secret); err != nil {
				return err
			}
			return os.Remove(keep)
		}},
	} {
		t.Run(change.name, func(t *testing.T) {
			awaitAhead(t, pool, p)
			if err := change.do(); err != nil {
				t.Fatal(err)
			}
			r, ahead := runCounting(t, pool, p)
			if strings.Contains(r.stdout, "SECRET") {
				t.Fatalf("the deny path's new file was readable (ahead %t): %q", ahead, r.stdout)
			}
			if r.code != 0 || ahead {
				t.Fatalf("want a sandbox built for the call, masking the file: exit %d, ahead %t, stderr %q", r.code, ahead, r.stderr)
			}
		})
	}
}

// treePlan is the plan of the TestZygoteAheadSandboxSees* tests: it reads base/ro/new and
// base/ro/mnt/f and writes base/rw/out, with base/ro split around its deny path.
func treePlan(t *testing.T, base string) isolation.Plan {
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	p := sh(t, `cat "$0/ro/new" "$0/ro/mnt/f" 2>&1; echo written > "$0/rw/out"`, "/bin/cat")
	p.Args = append(p.Args, base)
	p.ReadOnly = append(p.ReadOnly, ro)
	p.ReadWrite = []string{rw}
	p.Deny = []string{filepath.Join(ro, "secret.env")}
	if err := os.MkdirAll(filepath.Join(ro, "mnt"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestZygoteAheadSandboxSeesTheTreeAsItIsNow: what changed in the granted trees after a sandbox
// was built ahead shows to the next call as to one built for it: a new file in a directory split
// around a deny path (which a sandbox built earlier gives no Landlock rule), and a writable
// directory moved aside and made anew (the old one must not take the call's writes).
func TestZygoteAheadSandboxSeesTheTreeAsItIsNow(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	ro, rw := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	p := treePlan(t, base)

	awaitAhead(t, pool, p)
	fixture.WriteIn(t, ro, map[string]string{"new": "NEW FILE\n"})
	if r, _ := runCounting(t, pool, p); !strings.Contains(r.stdout, "NEW FILE") {
		t.Errorf("a new file in a split directory: %q, want it read", r.stdout)
	}

	awaitAhead(t, pool, p)
	if err := os.Remove(filepath.Join(rw, "out")); err != nil { // the earlier calls' file
		t.Fatal(err)
	}
	if err := os.Rename(rw, rw+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(rw, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(rw, nobody, nobody); err != nil && pool.root {
		t.Fatal(err)
	}
	runCounting(t, pool, p)
	if _, err := os.Stat(filepath.Join(rw, "out")); err != nil {
		t.Errorf("the writable directory made anew did not get the call's file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rw+".old", "out")); err == nil {
		t.Error("the call wrote into the writable directory moved aside")
	}
}

// TestZygoteAheadSandboxSeesMountsMadeSince: a file system the host mounted in a granted tree after
// a sandbox was built ahead shows to the next call, as to one built for it.
func TestZygoteAheadSandboxSeesMountsMadeSince(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	p := treePlan(t, base)
	awaitAhead(t, pool, p)
	mnt := filepath.Join(base, "ro/mnt")
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	fixture.WriteIn(t, mnt, map[string]string{"f": "MOUNTED\n"})
	if r, _ := runCounting(t, pool, p); !strings.Contains(r.stdout, "MOUNTED") {
		t.Errorf("a file system the host mounted in a granted tree: %q, want it seen", r.stdout)
	}
}

// TestZygoteAheadSandboxLetsGoOfUnmountedFileSystems: a sandbox built ahead holds a copy of the
// host's mounts; once the host unmounts one, the sandbox ends within a few seconds, as idle ready
// threads do, rather than keep the file system for as long as it waits.
func TestZygoteAheadSandboxLetsGoOfUnmountedFileSystems(t *testing.T) {
	pool := zygotePool(t)
	mnt := hostTmpfs(t)
	p := sh(t, "true")
	awaitAhead(t, pool, p)
	pid := zygotePID(t, pool)
	if len(threadsShowing(pid, mnt)) == 0 {
		t.Fatal("no zygote thread holds the tmpfs before it is unmounted: the test sees nothing")
	}
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if len(threadsShowing(pid, mnt)) == 0 {
			return
		}
	}
	t.Fatalf("zygote threads %v still hold the unmounted tmpfs after 5s", threadsShowing(pid, mnt))
}

// TestZygoteAheadCallKeepsItsOwnDeadline: a call in a sandbox built ahead gets its own deadline,
// counted from the call, not from the build.
func TestZygoteAheadCallKeepsItsOwnDeadline(t *testing.T) {
	pool := zygotePool(t)
	warm := sh(t, `sleep "$0"`, "/bin/sleep")
	warm.Args = append(warm.Args, "0")
	slow := warm
	slow.Args = append(slices.Clone(warm.Args[:3]), "5")
	slow.Timeout = 300 * time.Millisecond
	r, ahead := runAhead(t, pool, warm, slow) // killed at its deadline (137), not a sleep that ended (0)
	if r.code != 128+int(unix.SIGKILL) || !ahead {
		t.Fatalf("a call past its deadline in a sandbox built ahead: exit %d, ahead %t", r.code, ahead)
	}
}

// TestZygoteAheadCallKeepsItsOwnGroupLimits: a call in a sandbox built ahead is held to its own
// control groups' limits, which are not what the sandbox was built from.
func TestZygoteAheadCallKeepsItsOwnGroupLimits(t *testing.T) {
	pool := zygotePool(t)
	if cgroup.Default().Mechanism(cgroup.Pids) == cgroup.None {
		fixture.Missing(t, "no pids controller for the call's groups")
	}
	bomb := sh(t, `n=0; while [ $n -lt 200 ]; do sleep 2 & n=$((n+1)); done; echo $n`, "/bin/sleep")
	bomb.Limits = isolation.Limits{Pids: 24}
	// Built ahead for the bomb's plan but for its argv and limits.
	r, ahead := runAhead(t, pool, sh(t, "true", "/bin/sleep"), bomb)
	if strings.TrimSpace(r.stdout) == "200" || !ahead {
		t.Fatalf("a fork bomb under a pids limit in a sandbox built ahead: %q (exit %d, ahead %t)", r.stdout, r.code, ahead)
	}
}

// TestZygoteAheadSandboxGrantsNoMovedDirectory: a granted directory that is no mount of the
// sandbox (Landlock's rule is on its inode) moved aside and made anew after a sandbox was built
// ahead: the next call reads the new one and not the one moved aside, as in a sandbox built for it.
func TestZygoteAheadSandboxGrantsNoMovedDirectory(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	conf := filepath.Join(base, "ro/conf")
	fixture.WriteIn(t, conf, map[string]string{"file": "OLD CONF\n"})
	p := sh(t, `cat "$0/conf/file" "$0/conf.old/file" 2>&1`, "/bin/cat")
	p.Args = append(p.Args, filepath.Join(base, "ro"))
	p.ReadOnly = append(p.ReadOnly, conf)
	awaitAhead(t, pool, p)
	if err := os.Rename(conf, conf+".old"); err != nil {
		t.Fatal(err)
	}
	fixture.WriteIn(t, conf, map[string]string{"file": "NEW CONF\n"})
	r, ahead := runCounting(t, pool, p)
	if !strings.Contains(r.stdout, "NEW CONF") || strings.Contains(r.stdout, "OLD CONF") || ahead {
		t.Fatalf("a granted directory moved aside and made anew: %q (ahead %t), want only the new one read", r.stdout, ahead)
	}
}

// TestAheadKeyIsWhatTheSandboxIsBuiltFrom: aheadKey changes with every field of the envelope that
// the sandbox is built from and with no field that only the call's start reads (a field added to
// the plan is then in the key until it is listed here as the call's own), and a sandbox built
// ahead refuses (fits) a call whose key differs, whichever side compares.
func TestAheadKeyIsWhatTheSandboxIsBuiltFrom(t *testing.T) {
	callsOwn := []string{"Plan.Args", "Plan.Env", "Plan.Timeout", "Plan.Limits.MemoryBytes", "Plan.Limits.Pids",
		"Plan.Limits.CPU", "Plan.Limits.NoFile", "Plan.Limits.FileSize", "Deadline", "CgroupFDs", "Pooled",
		"StdinNull", "HostRlimits", "Files"}
	var base envelope
	n := 0
	fillEvery(reflect.ValueOf(&base).Elem(), &n)
	key := aheadKey(base)
	// A sandbox built ahead for base, whose mount table (here a file's text) reads the same.
	table := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(table, []byte("1 2 0:1 / / rw - tmpfs tmpfs rw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	own, err := unix.Open(table, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	built := &aheadSandbox{key: key, files: base.Files, own: own, ownText: []byte("1 2 0:1 / / rw - tmpfs tmpfs rw\n")}
	defer built.close()
	if !built.fits(base) {
		t.Fatal("a sandbox built ahead does not fit the call of its own plan")
	}
	seen := 0
	var walk func(typ reflect.Type, index []int, name string)
	walk = func(typ reflect.Type, index []int, name string) {
		if typ.Kind() == reflect.Struct {
			for i := range typ.NumField() {
				f := typ.Field(i)
				walk(f.Type, append(slices.Clone(index), i), strings.TrimPrefix(name+"."+f.Name, "."))
			}
			return
		}
		seen++
		changed := base
		v := reflect.ValueOf(&changed).Elem().FieldByIndex(index)
		if v.Kind() == reflect.Bool {
			v.SetBool(!v.Bool())
		} else {
			m := 1000
			fillEvery(v, &m)
		}
		own := slices.Contains(callsOwn, name)
		if differs := !bytes.Equal(aheadKey(changed), key); differs == own {
			t.Errorf("%s: the key changes with it: %t, want %t", name, differs, !own)
		}
		if fits := built.fits(changed); fits != own && name != "Files" {
			t.Errorf("%s: a sandbox built ahead fits a call whose %s differs: %t, want %t", name, name, fits, own)
		}
	}
	walk(reflect.TypeOf(base), nil, "")
	if seen < 30 {
		t.Fatalf("walked %d fields: the walk misses some", seen)
	}
}
