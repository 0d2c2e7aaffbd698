package nsinit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
)

// sleepToken returns a sleep duration (about 1000 s) that no other process on this machine uses,
// so that the sleeper of one test is found by its command line.
func sleepToken(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("1000.%09d", rand.IntN(1e9))
}

// cmdline returns pid's command line with spaces between the arguments, "" when it is gone or a
// zombie.
func cmdline(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), " ")
}

// sleepers returns the pids of the processes running "sleep token".
func sleepers(token string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && cmdline(pid) == "sleep "+token {
			out = append(out, pid)
		}
	}
	return out
}

// waitSleeper waits until a process runs "sleep token" and returns its pid.
func waitSleeper(t *testing.T, token string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if pids := sleepers(token); len(pids) > 0 {
			return pids[0]
		}
	}
	t.Fatalf("no sleep %s started", token)
	return 0
}

// requireGone polls for at most a second until none of pids runs what it ran when recorded
// (was[i]) and no process runs "sleep token"; then it fails t, killing the survivors.
func requireGone(t *testing.T, token string, pids []int, was []string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		var left []int
		for i, pid := range pids {
			if cmdline(pid) == was[i] {
				left = append(left, pid)
			}
		}
		left = append(left, sleepers(token)...)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v survive a second later", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleeperPlan runs "/bin/sleep token" as nobody.
func sleeperPlan(t *testing.T, token string) isolation.Plan {
	return plan(t, "/bin/sleep", []string{token})
}

const parentEnv = "NSINIT_TEST_PARENT"

// TestSandboxDiesWithItsParent starts, in a copy of this test binary, a sandbox running sleep, and
// SIGKILLs that parent: within a second neither the init nor the sleeper is left. (The init's uid
// change used to clear its parent-death signal, and the sandbox ran on.)
func TestSandboxDiesWithItsParent(t *testing.T) {
	if token := os.Getenv(parentEnv); token != "" {
		parentChild(t, token)
		return
	}
	requireRoot(t)
	token := sleepToken(t)
	parent, line, err := fixture.Rerun(t, []string{parentEnv + "=" + token})
	initPID, perr := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "init ")))
	if err != nil || perr != nil {
		t.Fatalf("the parent said %q: %v %v", line, err, perr)
	}
	sleeper := waitSleeper(t, token)
	pids := []int{initPID, sleeper}
	was := []string{cmdline(initPID), cmdline(sleeper)}
	if was[0] != procName+" "+initMarker {
		t.Fatalf("pid %d runs %q, not the init", initPID, was[0])
	}
	if err := parent.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	requireGone(t, token, pids, was)
}

// parentChild is TestSandboxDiesWithItsParent's parent: it starts the sandbox, prints its init's
// pid and waits to be killed.
func parentChild(t *testing.T, token string) {
	cmd := startPlan(t, sleeperPlan(t, token))
	fmt.Printf("init %d\n", cmd.Process.Pid)
	_ = cmd.Wait()
	t.Fatalf("the sandbox ended before its parent was killed: %v", cmd.Failure())
}

// TestSandboxEndsWhenTheHostLetsGo closes the host's end of the lifeline (the report pipe's read
// end) of a running sandbox, as the host's death would, with the host still alive, so that the
// parent-death signal cannot be what ends it: the init exits with 128+SIGKILL and takes the
// program with it.
func TestSandboxEndsWhenTheHostLetsGo(t *testing.T) {
	requireRoot(t)
	token := sleepToken(t)
	cmd := startPlan(t, sleeperPlan(t, token))
	sleeper := waitSleeper(t, token)
	was := cmdline(sleeper)
	cmd.report.Close()
	waitExit(t, cmd, 10*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != exitKilled {
		t.Fatalf("exit status %d, want %d", code, exitKilled)
	}
	requireGone(t, token, []int{sleeper}, []string{was})
}

// waitExit waits at most bound for cmd to exit, killing it and failing t after that.
func waitExit(t *testing.T, cmd *Cmd, bound time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatal(err)
		}
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the sandbox still ran %v later", bound)
	}
}

// TestDeadlineEndsSandbox runs sleep with a one-second Timeout and never stops it from the host:
// the init ends the sandbox itself, exit status 128+SIGKILL, with nothing left. A plan without a
// Timeout is the positive control: its sleeper outlives the other's deadline.
func TestDeadlineEndsSandbox(t *testing.T) {
	requireRoot(t)
	control := sleepToken(t)
	free := startPlan(t, sleeperPlan(t, control))
	defer func() { _ = free.Process.Kill(); _ = free.Wait(); _ = free.Failure() }()

	token := sleepToken(t)
	p := sleeperPlan(t, token)
	p.Timeout = time.Second
	start := time.Now() // before Command, which stamps the deadline
	cmd := startPlan(t, p)
	sleeper := waitSleeper(t, token)
	was := cmdline(sleeper)
	waitExit(t, cmd, 30*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != exitKilled || time.Since(start) < p.Timeout {
		t.Fatalf("exit status %d after %v, want %d after %v", code, time.Since(start), exitKilled, p.Timeout)
	}
	if err := cmd.Failure(); err != nil {
		t.Fatalf("Failure() = %v, want nil: the program ran", err)
	}
	requireGone(t, token, []int{sleeper}, []string{was})
	if len(sleepers(control)) != 1 {
		t.Fatal("the sandbox without a Timeout ended too")
	}
}

// TestKillLeftovers starts two sandboxes under different owner tags: KillLeftovers kills the one
// with its tag (and with it everything in it) and leaves the other running.
func TestKillLeftovers(t *testing.T) {
	requireRoot(t)
	defer func() { owner.Lock(); owner.tag = ""; owner.Unlock() }()
	start := func(tag, token string) *Cmd {
		if err := SetOwner(tag); err != nil {
			t.Fatal(err)
		}
		cmd := startPlan(t, sleeperPlan(t, token))
		return cmd
	}
	mine, other := sleepToken(t), sleepToken(t)
	a := start("nsinit-test-mine", mine)
	b := start("nsinit-test-other", other)
	defer func() { _ = b.Process.Kill(); _ = b.Wait(); _ = b.Failure() }()
	sleeper := waitSleeper(t, mine)
	was := cmdline(sleeper)
	waitSleeper(t, other)
	if got := cmdline(a.Process.Pid); got != procName+" "+initMarker+" nsinit-test-mine" {
		t.Fatalf("the init's command line is %q", got)
	}
	n, err := KillLeftovers("nsinit-test-mine")
	if err != nil || n != 1 {
		t.Fatalf("KillLeftovers = %d, %v; want 1", n, err)
	}
	waitExit(t, a, 10*time.Second)
	if ws := a.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the tagged init ended with %v, want SIGKILL", a.ProcessState)
	}
	requireGone(t, mine, []int{sleeper}, []string{was})
	if len(sleepers(other)) != 1 {
		t.Fatal("the sandbox of another owner was killed too")
	}
	if err := SetOwner("Bad Tag"); err == nil {
		t.Fatal("SetOwner accepted a tag with spaces")
	}
	if _, err := KillLeftovers(""); err == nil {
		t.Fatal("KillLeftovers accepted an empty tag")
	}
}

// TestValidOwnerTag checks the owner tag rule against its regular expression, on the edges (length
// 0, 1, 64, 65, a separator first) and on random strings over an alphabet with the allowed
// characters, their neighbours in ASCII, upper case, NUL and a multi-byte rune.
func TestValidOwnerTag(t *testing.T) {
	rule := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	cases := []string{"", "a", "0", "-a", ".a", "_a", "a-", "a.b_c-d", strings.Repeat("a", 64),
		strings.Repeat("a", 65), "A", "a b", "a/b", "a\x00", "é", "a\n"}
	alphabet := []rune("az09._-/`{@[:AZ \x00é")
	for range 20000 {
		n := rand.IntN(70)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rand.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, tag := range cases {
		if got, want := validOwnerTag(tag), rule.MatchString(tag); got != want {
			t.Fatalf("validOwnerTag(%q) = %v, want %v", tag, got, want)
		}
	}
}

// startPlan starts the sandbox of p, failing t when it cannot, and closes the host's copies of the
// init's descriptors.
func startPlan(t *testing.T, p isolation.Plan) *Cmd {
	t.Helper()
	cmd, err := Command(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // when the test fails before it ends the sandbox
	cmd.CloseChildEnds()
	return cmd
}
