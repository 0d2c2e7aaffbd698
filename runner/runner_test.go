package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/egress"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// The tests run real processes. /bin/sh is only a fixture that creates behaviours (background
// children, ignored signals, …); runner itself never adds a shell. Deadlines are generous and
// nothing asserts how long anything took.

const (
	hangLimit = 2 * time.Minute  // a Run that takes longer has hung
	goneLimit = 30 * time.Second // how long a killed process may take to disappear
)

// fixtureEnv is the whole environment of the fixture shells.
var fixtureEnv = []string{"PATH=/usr/bin:/bin"}

func TestMain(m *testing.M) {
	nsinit.Main()
	// Helper mode for TestHostDeathKillsChild: act as a host whose child must die with it.
	if dir := os.Getenv("RUNNER_TEST_HOST_DIR"); dir != "" {
		_, err := runner.Run(context.Background(), runner.Command{
			Path:    "/bin/sh",
			Args:    []string{"-c", "echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 300"},
			Dir:     dir,
			Env:     fixtureEnv,
			Timeout: 10 * time.Minute,
		})
		fmt.Fprintln(os.Stderr, "helper host: Run returned:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// sh is a Command running script with the fixture shell in a fresh directory.
func sh(t *testing.T, script string, args ...string) runner.Command {
	t.Helper()
	return runner.Command{
		Path: "/bin/sh",
		Args: append([]string{"-c", script, "sh"}, args...),
		Dir:  t.TempDir(),
		Env:  fixtureEnv,
	}
}

// run calls runner.Run, failing the test if it hangs or fails to start, and checks that no zombie
// child is left behind afterwards.
func run(t *testing.T, ctx context.Context, c runner.Command) runner.Result {
	t.Helper()
	type outcome struct {
		res runner.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := runner.Run(ctx, c)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Run: %v", o.err)
		}
		checkNoZombies(t)
		return o.res
	case <-time.After(hangLimit):
		t.Fatalf("Run(%q) did not return within %v", c.Args, hangLimit)
		panic("unreachable")
	}
}

// procStat returns the state and parent pid of pid from /proc, ok=false when it does not exist.
func procStat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid …; comm may contain spaces and parentheses.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0], ppid, true
}

// gone reports whether pid has terminated: it no longer exists, or it is a zombie (a killed
// grandchild is reparented to an init that may never reap it).
func gone(pid int) bool {
	state, _, ok := procStat(pid)
	return !ok || state == "Z" || state == "X"
}

// waitGone fails the test unless pid terminates within goneLimit.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(goneLimit); !gone(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive %v later", pid, goneLimit)
		}
	}
}

// checkNoZombies fails the test if a child of the test process stays a zombie: a sandbox's init
// whose end was reported exits and is reaped in the background just after Run returns, so a
// zombie gets up to 5 s to go.
func checkNoZombies(t *testing.T) {
	t.Helper()
	var zombies []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if zombies = zombieChildren(t); len(zombies) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, pid := range zombies {
		t.Errorf("zombie child %d left behind", pid)
	}
}

// zombieChildren lists the children of the test process that are zombies.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, ppid, ok := procStat(pid); ok && ppid == os.Getpid() && state == "Z" {
			out = append(out, pid)
		}
	}
	return out
}

// firstPID parses the first line of out as a pid.
func firstPID(t *testing.T, out []byte) int {
	t.Helper()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("no pid in output %q", out)
	}
	return pid
}

// cancelWhenExists returns a context canceled once file exists (the fixture says it is ready).
func cancelWhenExists(t *testing.T, file string) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(file); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ctx
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 3", 3, ""},
		{"exit 255", 255, ""},
		{"kill -TERM $$", -1, "SIGTERM"},
		{"kill -KILL $$", -1, "SIGKILL"},
	} {
		res := run(t, context.Background(), sh(t, tc.script))
		if res.ExitCode != tc.code || res.Signal != tc.signal {
			t.Errorf("%q: exit %d signal %q, want %d %q", tc.script, res.ExitCode, res.Signal, tc.code, tc.signal)
		}
		if res.TimedOut || res.Canceled {
			t.Errorf("%q: TimedOut=%v Canceled=%v", tc.script, res.TimedOut, res.Canceled)
		}
	}
}

func TestStdoutStderrSeparate(t *testing.T) {
	res := run(t, context.Background(), sh(t, "printf out1; printf err1 >&2; printf out2; printf err2 >&2; exit 4"))
	if string(res.Stdout) != "out1out2" || string(res.Stderr) != "err1err2" || res.ExitCode != 4 {
		t.Errorf("stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
	}
	if res.StdoutTruncated || res.StderrTruncated {
		t.Error("truncated")
	}
}

func TestArgvIsPassedVerbatim(t *testing.T) {
	args := []string{"$HOME", "a b", "; rm -rf /", "*", "", "'\"`"}
	res := run(t, context.Background(), sh(t, `tr '\0' '\n' < /proc/$$/cmdline`, args...))
	want := strings.Join(append([]string{"sh", "-c", `tr '\0' '\n' < /proc/$$/cmdline`, "sh"}, args...), "\n") + "\n"
	if string(res.Stdout) != want {
		t.Errorf("argv:\n%q\nwant\n%q", res.Stdout, want)
	}
}

func TestNothingInherited(t *testing.T) {
	t.Setenv("RUNNER_TEST_SECRET", "leak")
	dir := t.TempDir()
	for _, tc := range []struct {
		env  []string
		want string
	}{{nil, ""}, {[]string{"A=1", "B=two words"}, "A=1\nB=two words\n"}} {
		res := run(t, context.Background(), runner.Command{Path: "/usr/bin/env", Dir: dir, Env: tc.env})
		if string(res.Stdout) != tc.want {
			t.Errorf("env %q: child environment %q, want %q", tc.env, res.Stdout, tc.want)
		}
	}

	// stdin is /dev/null: cat ends at once; the working directory is Dir.
	c := sh(t, "cat; readlink /proc/self/fd/0; pwd")
	res := run(t, context.Background(), c)
	if want := "/dev/null\n" + c.Dir + "\n"; string(res.Stdout) != want {
		t.Errorf("stdin/cwd %q, want %q", res.Stdout, want)
	}
}

func TestOutputCaps(t *testing.T) {
	t.Run("huge stdout is truncated without deadlock", func(t *testing.T) {
		c := sh(t, "head -c 50000000 /dev/zero; echo done >&2")
		c.StdoutLimit = 1000
		res := run(t, context.Background(), c)
		if len(res.Stdout) != 1000 || !res.StdoutTruncated || res.ExitCode != 0 || string(res.Stderr) != "done\n" {
			t.Errorf("stdout %d bytes truncated=%v exit %d stderr %q", len(res.Stdout), res.StdoutTruncated, res.ExitCode, res.Stderr)
		}
	})
	t.Run("default limit", func(t *testing.T) {
		res := run(t, context.Background(), sh(t, "head -c 50000000 /dev/zero"))
		if len(res.Stdout) != runner.DefaultLimit || !res.StdoutTruncated {
			t.Errorf("stdout %d bytes truncated=%v, want %d", len(res.Stdout), res.StdoutTruncated, runner.DefaultLimit)
		}
	})
	t.Run("both streams at once", func(t *testing.T) {
		c := sh(t, "head -c 5000000 /dev/urandom >&2 & head -c 5000000 /dev/urandom; wait")
		c.StdoutLimit, c.StderrLimit = 10, 20
		res := run(t, context.Background(), c)
		if len(res.Stdout) != 10 || len(res.Stderr) != 20 || !res.StdoutTruncated || !res.StderrTruncated {
			t.Errorf("stdout %d (%v) stderr %d (%v)", len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated)
		}
	})
	t.Run("exactly the limit is not truncated", func(t *testing.T) {
		c := sh(t, "head -c 1000 /dev/zero; head -c 999 /dev/zero >&2")
		c.StdoutLimit, c.StderrLimit = 1000, 1000
		res := run(t, context.Background(), c)
		if len(res.Stdout) != 1000 || res.StdoutTruncated || len(res.Stderr) != 999 || res.StderrTruncated {
			t.Errorf("stdout %d (%v) stderr %d (%v)", len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated)
		}
	})
}

func TestTimeoutKillsWholeGroup(t *testing.T) {
	c := sh(t, "sleep 300 & echo $!; wait")
	c.Timeout = 2 * time.Second
	res := run(t, context.Background(), c)
	if !res.TimedOut || res.Canceled || res.ExitCode != -1 || res.Signal != "SIGTERM" {
		t.Errorf("TimedOut=%v Canceled=%v exit %d signal %q", res.TimedOut, res.Canceled, res.ExitCode, res.Signal)
	}
	waitGone(t, firstPID(t, res.Stdout))
}

func TestIgnoredSIGTERMGetsSIGKILL(t *testing.T) {
	c := sh(t, "trap '' TERM; sleep 300 & echo $!; touch ready; wait")
	c.Grace = 500 * time.Millisecond
	res := run(t, cancelWhenExists(t, filepath.Join(c.Dir, "ready")), c)
	if !res.Canceled || res.TimedOut || res.ExitCode != -1 || res.Signal != "SIGKILL" {
		t.Errorf("Canceled=%v TimedOut=%v exit %d signal %q", res.Canceled, res.TimedOut, res.ExitCode, res.Signal)
	}
	waitGone(t, firstPID(t, res.Stdout)) // the grandchild ignored SIGTERM too
}

func TestCancel(t *testing.T) {
	c := sh(t, "touch ready; sleep 300; echo not reached")
	res := run(t, cancelWhenExists(t, filepath.Join(c.Dir, "ready")), c)
	if !res.Canceled || res.TimedOut || res.ExitCode != -1 || res.Signal != "SIGTERM" || len(res.Stdout) != 0 {
		t.Errorf("Canceled=%v TimedOut=%v exit %d signal %q stdout %q", res.Canceled, res.TimedOut, res.ExitCode, res.Signal, res.Stdout)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := runner.Run(ctx, sh(t, "exit 0")); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a canceled ctx: %v, want context.Canceled", err)
	}
}

func TestGrandchildHoldingOutputDoesNotHang(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			// The shell exits at once; its background child keeps stdout open for 300s.
			c := sh(t, "sleep 300 & echo $!")
			c.TTY = tty
			res := run(t, context.Background(), c)
			if res.ExitCode != 0 || res.TimedOut {
				t.Errorf("exit %d TimedOut=%v", res.ExitCode, res.TimedOut)
			}
			waitGone(t, firstPID(t, res.Stdout))
		})
	}
}

func TestEscapedGrandchildDoesNotHang(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			// The background child leaves the process group (and session) but keeps stdout
			// open; the shell waits until it has left, prints its pid and exits. Run cannot
			// kill it, but must stop reading and return.
			c := sh(t, `setsid sleep 300 & pid=$!
				until [ "$(cut -d' ' -f6 /proc/$pid/stat)" = "$pid" ]; do :; done
				echo $pid`)
			c.TTY = tty
			res := run(t, context.Background(), c)
			pid := firstPID(t, res.Stdout)
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if res.ExitCode != 0 || res.TimedOut {
				t.Errorf("exit %d TimedOut=%v", res.ExitCode, res.TimedOut)
			}
		})
	}
}

func TestChildGetsOnlyStdio(t *testing.T) {
	// A descriptor the host holds without close-on-exec (as if inherited from its own parent)
	// must not reach the child.
	stray, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(stray)

	// Another Run in flight has pipes (or a pty) open in this process: none may leak.
	busyCtx, stopBusy := context.WithCancel(context.Background())
	var busy sync.WaitGroup
	for _, tty := range []bool{false, true} {
		c := sh(t, "sleep 300")
		c.TTY = tty
		busy.Go(func() { runner.Run(busyCtx, c) })
	}
	defer func() {
		stopBusy()
		busy.Wait()
		checkNoZombies(t)
	}()

	for _, tty := range []bool{false, true} {
		// ls runs as a separate process listing the shell's descriptors, so its own
		// directory descriptor is not in the list.
		c := sh(t, "ls -1 /proc/$$/fd")
		c.TTY = tty
		res, err := runner.Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if fds := strings.Fields(string(res.Stdout)); !slices.Equal(fds, []string{"0", "1", "2"}) {
			t.Errorf("tty=%v: child fds %q, want 0 1 2", tty, fds)
		}
	}
}

func TestTTY(t *testing.T) {
	c := sh(t, "test -t 0 && test -t 1 && test -t 2 && echo terminal; stty size; echo to-stderr >&2")
	c.TTY = true
	res := run(t, context.Background(), c)
	if want := "terminal\r\n24 80\r\nto-stderr\r\n"; string(res.Stdout) != want || len(res.Stderr) != 0 {
		t.Errorf("tty: stdout %q stderr %q, want stdout %q", res.Stdout, res.Stderr, want)
	}

	res = run(t, context.Background(), sh(t, "test -t 1 || echo no terminal"))
	if string(res.Stdout) != "no terminal\n" {
		t.Errorf("no tty: stdout %q", res.Stdout)
	}

	c = sh(t, "head -c 1000000 /dev/zero")
	c.TTY, c.StdoutLimit = true, 100
	if res := run(t, context.Background(), c); len(res.Stdout) != 100 || !res.StdoutTruncated {
		t.Errorf("tty cap: %d bytes truncated=%v", len(res.Stdout), res.StdoutTruncated)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    runner.Command
		is   error
	}{
		{"missing binary", runner.Command{Path: "/nonexistent/tool", Dir: dir}, fs.ErrNotExist},
		{"not executable", runner.Command{Path: notExec, Dir: dir}, fs.ErrPermission},
		{"missing dir", runner.Command{Path: "/bin/true", Dir: filepath.Join(dir, "nope")}, fs.ErrNotExist},
		{"missing dir tty", runner.Command{Path: "/bin/true", Dir: filepath.Join(dir, "nope"), TTY: true}, fs.ErrNotExist},
		{"relative path", runner.Command{Path: "true", Dir: dir}, nil},
		{"no dir", runner.Command{Path: "/bin/true"}, nil},
		{"relative dir", runner.Command{Path: "/bin/true", Dir: "."}, nil},
		{"negative timeout", runner.Command{Path: "/bin/true", Dir: dir, Timeout: -1}, nil},
	} {
		_, err := runner.Run(context.Background(), tc.c)
		if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.is)
		}
	}
	checkNoZombies(t)
}

func TestConcurrentRuns(t *testing.T) {
	const n = 32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		c := sh(t, `printf "%s" "$1"; printf "%s" "$1" >&2`, strconv.Itoa(i))
		c.TTY = i%4 == 0
		wg.Go(func() {
			res, err := runner.Run(context.Background(), c)
			want, wantErr := strconv.Itoa(i), strconv.Itoa(i)
			if c.TTY {
				want, wantErr = want+want, ""
			}
			if err != nil || string(res.Stdout) != want || string(res.Stderr) != wantErr {
				errs <- fmt.Errorf("run %d (tty=%v): err %v stdout %q stderr %q", i, c.TTY, err, res.Stdout, res.Stderr)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkNoZombies(t)
}

func TestHostDeathKillsChild(t *testing.T) {
	dir := t.TempDir()
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), "RUNNER_TEST_HOST_DIR="+dir)
	host.Stderr = os.Stderr
	proc := fixture.Start(t, host) // killed when the test ends, however it ends
	var pid int
	for deadline := time.Now().Add(hangLimit); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			pid = firstPID(t, b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("helper host never started its child")
		}
	}
	if gone(pid) {
		t.Fatalf("child %d is not running before the host dies", pid)
	}
	host.Process.Kill()
	proc.Wait()
	waitGone(t, pid)
}

// requireSandbox skips t where the kernel sandbox cannot run (not root, outside CI); in CI it must.
func requireSandbox(t *testing.T) {
	t.Helper()
	fixture.NeedRoot(t)
}

// sandboxPlan lets /bin/sh (and what it loads) run as nobody, reading only the runtime libraries.
// Like sandbox.Compile, it lists real paths (a plan's paths are not resolved again).
func sandboxPlan() *isolation.Plan {
	p := &isolation.Plan{
		UID: 65534, GID: 65534, Seccomp: true, NoNetwork: true,
		ReadOnly: []string{"/usr/lib", "/etc/ld.so.cache"},
	}
	for _, exe := range []string{"/bin/sh", "/usr/bin/dash", "/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"} {
		if r, err := filepath.EvalSymlinks(exe); err == nil && !slices.Contains(p.Exec, r) {
			p.Exec = append(p.Exec, r)
		}
	}
	return p
}

func TestSandboxedRun(t *testing.T) {
	requireSandbox(t)
	c := sh(t, `echo "$(id -u) $$"; echo err >&2; cat /etc/hostname; exit 3`)
	c.Dir = "/"
	c.Sandbox = sandboxPlan()
	res, err := runner.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	// Only sh may run: id and cat are not executable in this plan, so $(id -u) is empty.
	if res.ExitCode != 3 {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err != nil || pid > 64 {
		t.Errorf("stdout %q: want only sh's PID, a small one of its own PID namespace", res.Stdout)
	}
	if stderr := string(res.Stderr); !strings.Contains(stderr, "err\n") || !strings.Contains(stderr, "Permission denied") {
		t.Errorf("stderr %q: want the program's own output and the denied exec of id and cat", stderr)
	}

	// The sandbox could not be built: an error, not a result.
	c = sh(t, "exit 0")
	c.Dir = "/"
	c.Sandbox = sandboxPlan()
	c.Sandbox.ReadWrite = []string{"/nonexistent-runner-test"}
	_, err = runner.Run(context.Background(), c)
	if !errors.Is(err, nsinit.ErrUnavailable) || !strings.Contains(err.Error(), "/nonexistent-runner-test") {
		t.Fatalf("err %v, want nsinit.ErrUnavailable naming the missing path", err)
	}

	// A sandboxed command on a pty.
	c = sh(t, "test -t 0 && test -t 1 && echo tty")
	c.Dir = "/"
	c.TTY = true
	c.Sandbox = sandboxPlan()
	if res, err = runner.Run(context.Background(), c); err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "tty") {
		t.Fatalf("tty: err %v exit %d stdout %q", err, res.ExitCode, res.Stdout)
	}
}

func TestSandboxedTimeoutKillsEverything(t *testing.T) {
	requireSandbox(t)
	c := sh(t, "trap '' TERM; while :; do :; done")
	c.Dir = "/"
	c.Timeout = 200 * time.Millisecond
	c.Grace = 100 * time.Millisecond
	c.Sandbox = sandboxPlan()
	res, err := runner.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode == 0 {
		t.Fatalf("res %+v: want a timed-out, killed run", res)
	}
}

func TestStdin(t *testing.T) {
	// Stdin reaches the process whole, whatever it holds; an empty Stdin is an empty pipe, not
	// /dev/null.
	for _, in := range []string{"hello\n$(id) `x` ; |", "", strings.Repeat("0123456789", 100000)} {
		c := sh(t, "cat")
		c.Stdin = []byte(in)
		if res := run(t, context.Background(), c); string(res.Stdout) != in || res.ExitCode != 0 {
			t.Errorf("stdin of %d bytes: got %d bytes, exit %d", len(in), len(res.Stdout), res.ExitCode)
		}
	}
	// A process that never reads a large stdin still finishes: the writer gets EPIPE or is closed.
	c := sh(t, "exit 3")
	c.Stdin = make([]byte, 4<<20)
	if res := run(t, context.Background(), c); res.ExitCode != 3 {
		t.Errorf("exit %d", res.ExitCode)
	}
	// A grandchild that keeps stdin open without reading does not hang Run.
	// (A Run that waited for it would end at the timeout, long before the sleep.)
	c = sh(t, "sleep 300 & exit 0")
	c.Stdin = make([]byte, 4<<20)
	c.Timeout = time.Minute
	if res := run(t, context.Background(), c); res.ExitCode != 0 || res.TimedOut {
		t.Errorf("exit %d, timed out %t: Run waited for the grandchild holding its input", res.ExitCode, res.TimedOut)
	}
	// Stdin cannot be combined with TTY.
	c = sh(t, "cat")
	c.Stdin, c.TTY = []byte("x"), true
	if _, err := runner.Run(context.Background(), c); err == nil {
		t.Error("Stdin with TTY was accepted")
	}
}

// TestAttach runs a sandboxed command on the caller's own files (clihostctl login's way): its
// output goes there, not into Result; Foreground gets its process group once it runs and gives
// it back once it has exited; ctx stops an attached command as any other.
func TestAttach(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	outFile, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	var given, restored int
	c := sh(t, `echo out; echo err >&2; exit 4`)
	c.Dir = "/"
	c.Sandbox = sandboxPlan()
	c.Attach = &runner.Attach{Stdin: devNull, Stdout: outFile, Stderr: outFile, Foreground: func(pgid int) func() {
		given = pgid
		return func() { restored = given }
	}}
	res, err := runner.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || len(res.Stdout) != 0 || len(res.Stderr) != 0 || res.TimedOut {
		t.Fatalf("res %+v: want exit 4 and nothing captured", res)
	}
	if got, _ := os.ReadFile(outFile.Name()); string(got) != "out\nerr\n" {
		t.Errorf("the caller's file holds %q, want the command's stdout and stderr", got)
	}
	if given <= 0 || restored != given {
		t.Errorf("Foreground got process group %d, restored %d: want it given, then given back", given, restored)
	}

	c = sh(t, "touch ready; sleep 300")
	c.Attach = &runner.Attach{Stdin: devNull, Stdout: outFile, Stderr: outFile}
	res = run(t, cancelWhenExists(t, filepath.Join(c.Dir, "ready")), c)
	if !res.Canceled || res.Signal != "SIGTERM" {
		t.Errorf("canceled attached command: %+v, want Canceled by SIGTERM", res)
	}

	c = sh(t, "exit 0")
	c.Attach, c.Stdin = &runner.Attach{}, []byte("x")
	if _, err := runner.Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "Attach cannot be combined") {
		t.Errorf("Attach with Stdin: %v, want refused", err)
	}
}

// TestSandboxedRunEndsEverything: when Run returns, nothing the program started still runs in its
// sandbox, whether the init was started for the call or taken from a pool: a writer the program
// left in the background (which would otherwise write into the workspace after the host's git
// check) has stopped, and the status is the program's own (128+n for signal n).
func TestSandboxedRunEndsEverything(t *testing.T) {
	requireSandbox(t)
	pool := nsinit.NewPool(nsinit.PoolConfig{Max: 2})
	defer pool.Close()
	for _, tc := range []struct {
		name string
		pool *nsinit.Pool
	}{{"cold", nil}, {"pooled", pool}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			c := sh(t, `( exec >/dev/null 2>&1; while :; do echo x >> "$1"; done ) & ( exec >/dev/null 2>&1; trap '' TERM; while :; do :; done) & while [ ! -s "$1" ]; do :; done; echo started; exit 7`, out)
			c.Dir, c.Sandbox, c.Pool = "/", sandboxPlan(), tc.pool
			c.Sandbox.ReadWrite = []string{dir}
			res, err := runner.Run(context.Background(), c)
			st, statErr := os.Stat(out) // at once: the init may still be exiting
			if err != nil || res.ExitCode != 7 || string(res.Stdout) != "started\n" {
				t.Fatalf("err %v exit %d stdout %q stderr %q", err, res.ExitCode, res.Stdout, res.Stderr)
			}
			err = statErr
			if err != nil {
				t.Fatal(err) // the program waited for the writer's first line
			}
			for range 5 {
				time.Sleep(50 * time.Millisecond)
				if now, err := os.Stat(out); err != nil || now.Size() != st.Size() {
					t.Fatalf("the background writer still writes after Run returned (%d bytes, then %v, %v)", st.Size(), sizeOf(now), err)
				}
			}
			checkNoZombies(t)
			c = sh(t, `kill -9 $$`)
			c.Dir, c.Sandbox, c.Pool = "/", sandboxPlan(), tc.pool
			if res := run(t, context.Background(), c); res.ExitCode != 128+9 || res.Signal != "" {
				t.Errorf("killed by SIGKILL: exit %d signal %q, want 137 as the init reports it", res.ExitCode, res.Signal)
			}
		})
	}
}

// sizeOf is fi's size, or -1 without fi.
func sizeOf(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// TestSandboxedRunThroughSymlink: a program reached through a symbolic link the sandbox does not
// show (here in /tmp, which the init mounts fresh; npm's node_modules/.bin links elsewhere) runs
// as its resolved file, under the name it was called by; a link that now leads to a file the plan
// does not list is refused.
func TestSandboxedRunThroughSymlink(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "mysh")
	if err := os.Symlink("/bin/sh", link); err != nil {
		t.Fatal(err)
	}
	c := sh(t, `echo "$0"; exit 4`)
	c.Path, c.Dir, c.Sandbox = link, "/", sandboxPlan()
	res, err := runner.Run(context.Background(), c)
	if err != nil || res.ExitCode != 4 || strings.TrimSpace(string(res.Stdout)) != "sh" {
		t.Fatalf("through a link in /tmp: err %v exit %d stdout %q stderr %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin/id", link); err != nil {
		t.Fatal(err)
	}
	c.Sandbox = sandboxPlan()
	if res, err := runner.Run(context.Background(), c); err == nil && res.ExitCode == 0 {
		t.Fatalf("a link swapped to a program the plan does not list ran: %q", res.Stdout)
	}
}

// TestSandboxStuckInTheKernelIsLeft: a sandbox's init that hangs in the kernel (a FUSE server in
// reach of the plan never answers the init's look-up of a plan path: a request the server has
// read is waited for even through SIGKILL) must not hang Run: once the deadline's SIGTERM, grace
// and SIGKILL have not ended it, Run leaves it (it is reaped in the background if it ever ends)
// and says why — with and without egress, whose listeners the stuck init never sends, and for a
// sandbox from a pool (its zygote's, on a root host).
func TestSandboxStuckInTheKernelIsLeft(t *testing.T) {
	requireSandbox(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf("stuck-%09d", rand.IntN(1e9))
	mnt := fixture.HostileFUSE(t, func(pid uint32) bool { // this binary's inits only, not another package's
		proc := "/proc/" + strconv.Itoa(int(pid))
		exe, _ := os.Readlink(proc + "/exe")
		data, _ := os.ReadFile(proc + "/cmdline")
		return exe == self && strings.Contains(string(data), "__clihost_init") || strings.Contains(string(data), token)
	})
	pool := nsinit.NewPool(nsinit.PoolConfig{Max: 1}) // on a root host, its zygote builds the sandbox
	t.Cleanup(pool.Close)
	for _, tc := range []struct {
		withEgress, program, pooled bool
	}{{false, false, false}, {true, false, false}, {false, true, false}, {false, true, true}} {
		withEgress := tc.withEgress
		// The init is stuck resolving the plan's path; or, with program, the CLI is, reading a file
		// there (the init, which waits for it, is killed but cannot end before it).
		c := sh(t, "true")
		if tc.program {
			c = sh(t, "cat "+filepath.Join(mnt, "d", token))
		}
		c.Dir = "/"
		c.Timeout, c.Grace = time.Second, 100*time.Millisecond
		c.Sandbox = sandboxPlan()
		c.Sandbox.ReadOnly = append(c.Sandbox.ReadOnly, filepath.Join(mnt, "d"))
		if tc.program {
			cat, err := filepath.EvalSymlinks("/bin/cat")
			if err != nil {
				t.Fatal(err)
			}
			c.Sandbox.Exec = append(c.Sandbox.Exec, cat)
		}
		if tc.pooled {
			c.Pool = pool
		}
		if withEgress {
			nsinit.UseEgress(c.Sandbox)
			c.Egress = &egress.Policy{Allow: []string{"example.test"}}
		}
		done := make(chan error, 1)
		go func() {
			_, err := runner.Run(context.Background(), c)
			done <- err
		}()
		select {
		case err := <-done:
			t.Logf("%+v: %v", tc, err)
			if !errors.Is(err, nsinit.ErrUnavailable) || !strings.Contains(err.Error(), "blocked in the kernel") || strings.Contains(err.Error(), "not started") {
				t.Errorf("%+v: err %v, want ErrUnavailable saying the sandbox is blocked in the kernel (not that the program was not started)", tc, err)
			}
		case <-time.After(60 * time.Second): // a bound, not a measurement
			t.Fatalf("%+v: Run did not return within 60s of a 1s deadline while the sandbox hangs in the kernel", tc)
		}
	}
}

// TestGate: a command's program starts only once its Gate returned nil, which Run calls once; a
// Gate's error refuses the command (Run returns it) before its program ran, sandboxed (an init
// started for the call: the zygote's own gate is nsinit's test) or not.
func TestGate(t *testing.T) {
	for _, sandboxed := range []bool{false, true} {
		t.Run(fmt.Sprint("sandboxed=", sandboxed), func(t *testing.T) {
			if sandboxed {
				requireSandbox(t)
			}
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			ran := filepath.Join(dir, "ran")
			c := sh(t, "echo ran > "+ran)
			c.Dir = "/"
			if sandboxed {
				c.Sandbox = sandboxPlan()
				c.Sandbox.ReadWrite = []string{dir}
			}
			refused := errors.New("refused by the test")
			c.Gate = func() error { return refused }
			if _, err := runner.Run(context.Background(), c); !errors.Is(err, refused) {
				t.Fatalf("err %v, want the gate's", err)
			}
			if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the program of a refused command ran (%v)", err)
			}
			calls := 0
			c.Gate = func() error {
				calls++
				if _, err := os.Stat(ran); err == nil {
					t.Error("the program ran before its gate opened")
				}
				return nil
			}
			if res, err := runner.Run(context.Background(), c); err != nil || res.ExitCode != 0 || calls != 1 {
				t.Fatalf("err %v exit %d, gate called %d times; want the program run and the gate called once", err, res.ExitCode, calls)
			}
			if _, err := os.Stat(ran); err != nil {
				t.Fatal(err)
			}
		})
	}
}
