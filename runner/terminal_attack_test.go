package runner_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/runner"
	"golang.org/x/sys/unix"
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
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fixture.Missing(t, "no pty: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), terminalHostEnv+"=1")
	cmd.Stdin = pts
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	proc := fixture.Start(t, cmd)
	var mu sync.Mutex
	var tty strings.Builder
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			tty.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	var host strings.Builder
	for sc := bufio.NewScanner(out); sc.Scan(); {
		host.WriteString(sc.Text() + "\n")
	}
	_ = proc.Wait()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	seen := tty.String()
	mu.Unlock()
	t.Logf("host: %s\nterminal: %q", host.String(), seen)
	if !strings.Contains(host.String(), "err <nil> exit 0") {
		t.Fatalf("the sandboxed run failed: %s", host.String())
	}
	if strings.Contains(seen, "clihost-attack") || !strings.Contains(host.String(), "tty: refused") {
		t.Errorf("the sandboxed program wrote to its host's controlling terminal: %q", seen)
	}
}
