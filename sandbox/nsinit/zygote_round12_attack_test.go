package nsinit

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// Round 12's attack: a process of a call's uid outside every sandbox (the caller's own shell, on
// a root daemon that serves several users) against the root zygote that builds every user's
// sandboxes. A signal that stops or kills one thread of a process stops or kills all of it, and
// kill(2) given a thread's id checks that thread's credentials, not the leader's.

// TestR12ZygoteIsNotSignalableByThePlansUserDuringACall: while a call's program runs (here cat,
// waiting for its input), every thread of the zygote must refuse a signal from a process of the
// plan's uid: none may run with that uid. The attack then sends SIGSTOP and SIGKILL to each of
// them as that uid: the call must end as its program does, and the zygote must serve the next.
func TestR12ZygoteIsNotSignalableByThePlansUserDuringACall(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the plan's uid is the host user's on a rootless host")
	}
	zpid := zygotePID(t, pool)
	cmd, stdio := takeReady(t, pool, plan(t, "/bin/cat", nil), true)
	if _, err := stdio.In.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(zpid) + "/task")
	if err != nil || len(tasks) < 3 {
		t.Fatalf("the zygote has %d threads (%v): the test sees nothing", len(tasks), err)
	}
	var tids []string
	for _, task := range tasks {
		tid := task.Name()
		tids = append(tids, tid)
		if uid := r11ThreadUID(zpid, tid); uid == strconv.Itoa(nobody) {
			t.Errorf("zygote thread %s runs as the plan's uid %d during a call", tid, nobody)
		}
		if out, err := asNobody("kill -0 " + tid).CombinedOutput(); err == nil {
			t.Errorf("a process of uid %d may signal zygote %d's thread %s during a call: kill -STOP would stop the zygote of every user (%s)", nobody, zpid, tid, out)
		}
	}
	// The attack itself, as an attacker runs it: every thread, whatever the probes said.
	stopAndKill := "for t in " + strings.Join(tids, " ") + "; do kill -STOP $t; kill -KILL $t; done 2>/dev/null; true"
	if out, err := asNobody(stopAndKill).CombinedOutput(); err != nil {
		t.Fatalf("attack: %v: %s", err, out)
	}
	if err := unix.Kill(zpid, 0); err != nil {
		t.Fatalf("the zygote (pid %d) is gone after the plan's uid signalled its threads: %v", zpid, err)
	}
	_ = unix.Kill(zpid, unix.SIGCONT) // so that a stopped zygote fails the checks below, not hangs them
	if _, err := stdio.In.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	stdio.In.Close()
	if r := finishPooled(t, cmd, stdio); r.code != 0 || r.stdout != "before\nafter\n" {
		t.Errorf("the call under attack: exit %d, stdout %q, stderr %q, failure %v", r.code, r.stdout, r.stderr, r.failure)
	}
	if r := runPooled(t, pool, sh(t, "echo next")); r.code != 0 || r.stdout != "next\n" {
		t.Errorf("the next call: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if now := zygotePID(t, pool); now != zpid {
		t.Errorf("the zygote was replaced (%d, now %d): the plan's uid killed it", zpid, now)
	}
	requireZygoteServed(t, pool, 2)
}

// asNobody is a shell running script as uid and gid nobody, outside every sandbox.
func asNobody(script string) *exec.Cmd {
	c := exec.Command("/bin/sh", "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return c
}

// TestR12SuidDumpableOneRefusesEverySandbox: with fs.suid_dumpable=1 a process that takes a
// call's uid is traceable by that uid for a moment while it shares root's memory (dumpable.go;
// TestR12CallersUserCannotOpenTheZygotesMemoryThroughItsProgramsProcess and its kin race for that
// moment). A root host then builds no sandbox: CheckSuidDumpable says why, and a call through the
// zygote or a cold init is refused before its program runs, even when the sysctl was set after
// the zygote started. At 2 (only root may trace) and back at 0 the same calls run.
func TestR12SuidDumpableOneRefusesEverySandbox(t *testing.T) {
	needHostWide(t)
	requireRoot(t)
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "no process of a rootless host's sandbox changes its ids")
	}
	p := sh(t, "echo ran")
	r12bSuidDumpable(t, "1")
	if err := CheckSuidDumpable(); !errors.Is(err, ErrSuidDumpable) {
		t.Errorf("CheckSuidDumpable under fs.suid_dumpable=1: %v, want ErrSuidDumpable", err)
	}
	for name, r := range map[string]result{"the zygote": runPooled(t, pool, p), "a cold init": run(t, p)} {
		if r.code == 0 || strings.Contains(r.stdout, "ran") || r.failure == nil || !strings.Contains(r.failure.Error(), "fs.suid_dumpable is 1") {
			t.Errorf("%s under fs.suid_dumpable=1: exit %d, stdout %q, failure %v: want the call refused before its program ran", name, r.code, r.stdout, r.failure)
		}
	}
	for _, v := range []string{"2", "0"} {
		if err := os.WriteFile(suidDumpableSysctl, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := CheckSuidDumpable(); err != nil {
			t.Errorf("CheckSuidDumpable under fs.suid_dumpable=%s: %v", v, err)
		}
		for name, r := range map[string]result{"the zygote": runPooled(t, pool, p), "a cold init": run(t, p)} {
			if r.code != 0 || r.stdout != "ran\n" {
				t.Errorf("%s under fs.suid_dumpable=%s: exit %d, stdout %q, failure %v", name, v, r.code, r.stdout, r.failure)
			}
		}
	}
	requireZygoteServed(t, pool, 3)
}

// processesWith lists the pids of the processes whose command line (NUL-separated) starts with
// prefix.
func processesWith(prefix string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.HasPrefix(string(cmd), prefix) {
			pids = append(pids, pid)
		}
	}
	return pids
}
