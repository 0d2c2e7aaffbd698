package runner_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/runner"
)

const terminalHostEnv = "RUNNER_TEST_TERMINAL_HOST"

// TestSandboxedRunCannotReachTheCallersTerminal: a host started from a terminal (a developer's
// clihostd, or a clihostctl) has it as its controlling terminal. A sandboxed program run without
// TTY (or Attach) must not open it as /dev/tty (which every sandbox grants, for a program's own
// terminal) and write to it, or make itself its foreground and read what is typed there. A copy of
// this test binary, the leader of a session on a pty this test holds, runs such a program through
// Run (no pool: nsinit.Command, the daemon's path when its pool has no init ready). It used to
// share the host's session (Setpgid) and reach the terminal.
func TestSandboxedRunCannotReachTheCallersTerminal(t *testing.T) {
	if os.Getenv(terminalHostEnv) == "1" {
		c := sh(t, `if (echo clihost-attack > /dev/tty) 2>/dev/null; then echo "tty: wrote"; else echo "tty: refused"; fi`)
		c.Dir = "/"
		c.Sandbox = sandboxPlan()
		res, err := runner.Run(context.Background(), c)
		fmt.Printf("err %v exit %d stdout %s", err, res.ExitCode, res.Stdout)
		return
	}
	requireSandbox(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), terminalHostEnv+"=1")
	host, seen, _ := fixture.OnTerminal(t, cmd, nil)
	t.Logf("host: %s\nterminal: %q", host, seen)
	if !strings.Contains(host, "err <nil> exit 0") {
		t.Fatalf("the sandboxed run failed: %s", host)
	}
	if strings.Contains(seen, "clihost-attack") || !strings.Contains(host, "tty: refused") {
		t.Errorf("the sandboxed program wrote to its host's controlling terminal: %q", seen)
	}
}
