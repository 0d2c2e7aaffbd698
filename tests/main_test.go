// Package tests holds clihost's end-to-end tests: the built binaries run as real processes
// against the shipped catalog, real Debian CLIs and spec-written bundles.
package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// bin holds the paths of the binaries built for this test run.
var bin struct{ ctl, daemon string }

func TestMain(m *testing.M) {
	nsinit.Main() // as the sandbox's init, for the tests that call a host in process (vendoredswap_test.go)
	limitedMain() // as the parent of a daemon whose user namespaces are limited (ready_test.go)
	dir, err := os.MkdirTemp("", "clihost-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.ctl, bin.daemon = filepath.Join(dir, "clihostctl"), filepath.Join(dir, "clihostd")
	for out, pkg := range map[string]string{bin.ctl: "../cmd/clihostctl", bin.daemon: "../cmd/clihostd"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, b)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// longEnv, set to 1, runs the longest end-to-end tests (needLong). Without it `go test ./...`
// skips them: the go command stops a package's tests after 10 minutes, and on a two-CPU machine,
// beside the other packages, this package's tests took longer with them. .ci/run runs them after
// `go test ./...`, alone, in its step "long end-to-end tests", and checks that each passed.
const longEnv = "CLIHOST_TEST_LONG"

// needLong skips t unless longEnv is 1 (see longEnv).
func needLong(t *testing.T) {
	t.Helper()
	if os.Getenv(longEnv) != "1" {
		t.Skipf("one of the longest end-to-end tests: runs with %s=1 (CI's step \"long end-to-end tests\")", longEnv)
	}
}

// result is a finished process.
type result struct {
	code           int
	stdout, stderr string
}

// runBin runs a built binary with args in dir (the package directory when empty) and a clean
// bundle environment.
func runBin(t *testing.T, path, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CLIHOST_BUNDLES=")
	o, err := fixture.Run(cmd)
	if err != nil {
		t.Fatalf("run %s: %v", path, err)
	}
	return result{o.Code, o.Stdout, o.Stderr}
}
