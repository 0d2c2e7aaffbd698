package nsinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// skeletonEnv marks the copy of the test binary that TestSkeletonUnderTmpReadOnly runs as nobody.
const skeletonEnv = "NSINIT_TEST_SKELETON"

// TestSkeletonUnderTmpReadOnly: a writable root inside a directory the plan does not grant (a
// workspace's out/ with the workspace itself not granted), and a working directory the plan does
// not bind, are writable only where granted, wherever they lie. Under /tmp the sandbox covers the
// host's /tmp with its own tmpfs and creates the directories leading to those paths there: a write
// beside the granted root must fail (EROFS) rather than land in that tmpfs, which the host never
// sees. The sandbox's free /tmp itself stays writable.
func TestSkeletonUnderTmpReadOnly(t *testing.T) {
	if os.Getenv(skeletonEnv) == "1" {
		if os.Geteuid() == 0 {
			t.Fatal("the rootless child runs as root")
		}
		testSkeleton(t, "/tmp")
		return
	}
	requireRoot(t)
	for _, parent := range parents {
		t.Run(parent, func(t *testing.T) { testSkeleton(t, parent) })
	}
	t.Run("rootless", func(t *testing.T) { rerunAsNobody(t, skeletonEnv, "-test.run=^"+t.Name()+"$") })
}

// testSkeleton runs the writes of TestSkeletonUnderTmpReadOnly in a tree under parent.
func testSkeleton(t *testing.T, parent string) {
	base := workTree(t, parent)
	if os.Geteuid() != 0 {
		// The rootless child: its tree is its own (nobody's), so only the plan stops a write.
		if err := os.Chmod(base, 0o777); err != nil {
			t.Fatal(err)
		}
	} else {
		giveToNobody(t, base)
	}
	rw := filepath.Join(base, "rw")
	script := `echo x > rw/granted && echo granted-ok
echo x > beside && echo WROTE-BESIDE
mkdir newdir && echo WROTE-MKDIR
echo x > outside/hidden && echo WROTE-OUTSIDE
echo x > /tmp/scratch && echo tmp-ok
exit 0`
	p := sh(t, script, "/bin/mkdir")
	p.ReadWrite = []string{rw}
	p.Dir = base
	r := run(t, p)
	for _, want := range []string{"granted-ok", "tmp-ok"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout %q lacks %q (stderr %q)", r.stdout, want, r.stderr)
		}
	}
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("a write outside ReadWrite succeeded: %q", r.stdout)
	}
	for _, msg := range strings.Split(r.stderr, "\n") {
		if (strings.Contains(msg, "beside") || strings.Contains(msg, "newdir")) &&
			!strings.Contains(msg, "Read-only file system") && !strings.Contains(msg, "Permission denied") {
			t.Errorf("a refused write must fail with EROFS or EACCES: %q", msg)
		}
	}
	if _, err := os.Stat(filepath.Join(rw, "granted")); err != nil {
		t.Errorf("the write under ReadWrite did not reach the host: %v", err)
	}
	// A working directory the plan does not bind: entered, but nothing can be written there.
	p = sh(t, "echo x > here && echo WROTE-CWD; exit 0")
	p.Dir = filepath.Join(base, "outside")
	if r := run(t, p); strings.Contains(r.stdout, "WROTE") {
		t.Errorf("a write in an unbound working directory succeeded: %q", r.stdout)
	}
}
