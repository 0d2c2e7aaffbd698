// Package escape is clihost's escape corpus (research/sandbox.md §7): a hostile CLI, the probe in
// ./probe, runs as a bundle's bin through host.Call, inside the real kernel sandbox, and tries one
// way out per call. Each subtest asserts the exact way the kernel refuses (errno, or the signal
// that kills the process), and each category has positive controls showing that the same probe,
// under a sandbox that grants the thing, does get it, so that a probe failing for the wrong reason
// cannot pass.
//
// The tests need Linux, root and a kernel that can build the sandbox (Landlock, user and mount
// namespaces). Without them they skip, except under CI=true, where they fail.
package escape

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// Paths made once by TestMain.
var (
	// probeDir holds the built probe (the bundles' bin "probe" is looked up on a PATH starting
	// with it).
	probeDir string
	// outside is a directory outside /tmp (whose host contents the sandbox hides entirely), that
	// no bundle declares except for the subtrees the bundles name. See makeOutside.
	outside string
	// pool starts the inits of the suite's and the limits' hosts ahead of their calls, as clihostd
	// does.
	pool *nsinit.Pool
	// setupErr says why the corpus cannot run here (nil: it can).
	setupErr error
	// sharedDirs says probeDir and outside are another run's of this binary (sharedDirsEnv): it
	// removes them, not this one.
	sharedDirs bool
)

// sharedDirsEnv, set to probeDir and outside joined by a newline, makes a run of this binary that
// another started (fixture.Rerun) use that run's probe and outside directory instead of making
// its own, which it could not remove: such a run is killed.
const sharedDirsEnv = "CLIHOST_ESCAPE_DIRS"

// TestMain lets this test binary act as the sandbox's init (the host re-execs its own executable
// to build the sandbox), builds the probe, and lays out the host files the probes aim at.
func TestMain(m *testing.M) {
	nsinit.Main()
	setupErr = setup()
	code := m.Run()
	if pool != nil {
		s := pool.Stats()
		pool.Close()
		// The probes must have gone through the zygote where it serves the plan (a root host's,
		// without ingress): a zygote that served nothing proves nothing.
		fmt.Printf("pool: %d calls from inits (%d cold), %d from the zygote (%s)\n", s.Hits, s.Misses, s.Zygote, s.ZygoteErr)
		if s.Zygote == 0 && s.Hits+s.Misses > 0 && s.ZygoteErr == "" && code == 0 {
			fmt.Println("FAIL: no call of the corpus went through the zygote")
			code = 1
		}
	}
	for _, d := range []string{probeDir, outside} {
		if d != "" && !sharedDirs {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// setup builds the probe and makes the outside directory.
func setup() error {
	switch {
	case runtime.GOOS != "linux":
		return errors.New("the sandbox is Linux-only")
	case os.Geteuid() != 0:
		return errors.New("the escape corpus runs as root (the host then runs tools as an unprivileged agent uid)")
	}
	if err := nsinit.Check(); err != nil {
		return err
	}
	pool = nsinit.NewPool(nsinit.PoolConfig{})
	if dirs, ok := os.LookupEnv(sharedDirsEnv); ok {
		probeDir, outside, _ = strings.Cut(dirs, "\n")
		sharedDirs = true
		return nil
	}
	var err error
	if probeDir, err = os.MkdirTemp("", "clihost-escape-probe-"); err != nil {
		return err
	}
	if err := os.Chmod(probeDir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(probeDir, "probe"), "./probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the probe: %v\n%s", err, out)
	}
	if outside, err = os.MkdirTemp("/var/tmp", "clihost-escape-"); err != nil {
		return fmt.Errorf("a directory outside /tmp: %w", err)
	}
	return makeOutside(outside)
}

// makeOutside lays out dir (world-readable unless said otherwise):
//
//	secret           an undeclared, world-readable file: only Landlock keeps it from the probe
//	owned            an undeclared file owned by the agent uid: DAC lets the agent change it
//	granted/ok.txt   declared by the ro bundle's fs.read
//	state/token      clihost's own secret: in every sandbox's ExtraDeny, inside the state bundle's fs.read
//	state/other      declared by the state bundle's fs.read
//	tools/ok.sh      a script the spawn bundle lists in exec.spawn (#!/bin/sh)
//	tools/evil.pl    a script with an unlisted interpreter (#!/usr/bin/perl), not listed
//	ws/              a workspace outside /tmp, owned by the agent (its parent is dir)
func makeOutside(dir string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"secret":         "outside secret\n",
		"owned":          "owned by the agent\n",
		"granted/ok.txt": "granted\n",
		"state/token":    "clihostd-token-0123456789\n",
		"state/other":    "not a secret\n",
		"tools/ok.sh":    "#!/bin/sh\necho spawned ok\n",
		"tools/evil.pl":  "#!/usr/bin/perl\nprint \"pwned\\n\";\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if filepath.Dir(name) == "tools" {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			return err
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		return err
	}
	for _, p := range []string{"owned", "ws"} {
		if err := os.Chown(filepath.Join(dir, p), fixture.AgentID, fixture.AgentID); err != nil {
			return err
		}
	}
	return nil
}

// requireCorpus skips the test when the corpus cannot run on this machine, or fails it under
// CI=true, where every prerequisite must be present.
func requireCorpus(t *testing.T) {
	t.Helper()
	if setupErr != nil {
		fixture.Missing(t, "the escape corpus cannot run here: %v", setupErr)
	}
}
