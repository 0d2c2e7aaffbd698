package tests

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonCheck runs `clihostd -check`: the embedded catalog loads; a broken bundle is refused.
func TestDaemonCheck(t *testing.T) {
	r := runBin(t, bin.daemon, t.TempDir(), "-check")
	if r.code != 0 || strings.Count(r.stderr, "bundle loaded") != 10 || strings.Contains(r.stderr, "refused") {
		t.Fatalf("embedded catalog: exit %d\n%s", r.code, r.stderr)
	}
	r = runBin(t, bin.daemon, "", "-check", "-bundles", "testdata/spec-example", "-bundles", "testdata/unseen")
	if r.code != 1 || !strings.Contains(r.stderr, `msg="bundle refused" bundle=gh@1`) || !strings.Contains(r.stderr, `msg="bundle loaded" bundle=stripe@2`) {
		t.Fatalf("spec example: exit %d\n%s", r.code, r.stderr)
	}
}

// TestDaemonRunsReloadsAndStops starts clihostd as the README's first command does, reloads it
// with SIGHUP and stops it with SIGTERM.
func TestDaemonRunsReloadsAndStops(t *testing.T) {
	cmd := exec.Command(bin.daemon)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"CLIHOST_BUNDLES="}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitFor := func(what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("clihostd exited before %q", what)
				}
				if strings.Contains(l, what) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q from clihostd", what)
			}
		}
	}
	waitFor("clihostd ready")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("reloading bundles")
	waitFor("bundle=yt-dlp@1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor("clihostd stopping")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("clihostd exit: %v", err)
	}
}
