package nsinit

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// Round 12, outside review: the zygote's threads keep root and the program's process takes the
// plan's identity before its exec (dropIdentity). Every process the zygote clones (a call's PID 1,
// which never execs, and a program's process until its exec) shares the zygote's memory (CLONE_VM)
// and so its one dumpable flag, which any of them resets to fs.suid_dumpable when it changes its
// uid or gid (commit_creds). The attacks are a host process's of the uid such a process runs as.

// r12bOtherUID is a uid (and gid) no test process runs as but the attacks'.
const r12bOtherUID = 40123

// r12bOnThreadAs runs f on a new OS thread whose credentials alone (setThreadCredentials: uid,
// gid and fsuid id, no group, no capability) are id's, as a process of that uid outside every
// sandbox would run; the thread ends with f (it is never unlocked).
func r12bOnThreadAs(id int, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := setThreadCredentials(id, id, nil); err != nil {
			panic("attacker thread: " + err.Error())
		}
		f()
	}()
	<-done
}

// hostWideEnv, set to 1, lets the tests that change fs.suid_dumpable run. The knob is the whole
// host's, and no root host builds a sandbox while it is 1: any other package's test that makes a
// sandboxed call meanwhile fails (CI89's TestCatalogKubectlConfigToolsInSandbox). `go test ./...`
// runs packages side by side, so these tests skip there; .ci/run runs them in a step of their
// own, nothing else running (CLIHOST_TEST_HOSTWIDE=1 go test ./sandbox/nsinit -run …).
const hostWideEnv = "CLIHOST_TEST_HOSTWIDE"

// needHostWide skips a test that changes fs.suid_dumpable unless hostWideEnv allows it: the first
// thing such a test does, before it starts a call that would outlive a skip.
func needHostWide(t *testing.T) {
	t.Helper()
	if os.Getenv(hostWideEnv) != "1" {
		t.Skipf("changes fs.suid_dumpable, which every sandbox on this host reads: run alone with %s=1 (CI's step \"host-wide kernel knobs\")", hostWideEnv)
	}
}

// r12bSuidDumpable sets fs.suid_dumpable to v for the test (restored after it); the test called
// needHostWide first.
func r12bSuidDumpable(t *testing.T, v string) {
	t.Helper()
	if os.Getenv(hostWideEnv) != "1" {
		t.Fatal("r12bSuidDumpable without needHostWide")
	}
	knob := suidDumpableSysctl
	old, err := os.ReadFile(knob)
	if err != nil {
		fixture.Missing(t, "fs.suid_dumpable: %v", err)
	}
	if err := os.WriteFile(knob, []byte(v), 0o644); err != nil {
		fixture.Missing(t, "cannot set fs.suid_dumpable: %v", err)
	}
	t.Cleanup(func() { _ = os.WriteFile(knob, bytes.TrimSpace(old), 0o644) })
}

// r12bELFAt is the address of the zygote's executable's first mapping (its ELF header), read as
// root: what an attacker reads through a descriptor of the zygote's memory to prove it has one.
func r12bELFAt(t *testing.T, zpid int) int64 {
	t.Helper()
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(zpid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(maps), "-")
	at, err := strconv.ParseInt(first, 16, 64)
	if err != nil {
		t.Fatalf("maps of %d: %q: %v", zpid, first, err)
	}
	return at
}

// r12bMemAttack starts, as uid id, an attacker that opens /proc/PID/mem of every pid targets
// returns, read/write, over and over until stop is called; it returns what the attacker read of
// the memory behind the first descriptor it got (at elf: "\x7fELF" is the zygote's memory) and
// the pid it came through, or "" and 0. hit says whether it has one yet.
func r12bMemAttack(id int, targets func() []int, elf int64) (hit func() bool, stop func() (got string, pid int)) {
	var halt, done atomic.Bool
	var got string
	var gotPID int
	var wg sync.WaitGroup
	wg.Go(func() {
		r12bOnThreadAs(id, func() {
			for !halt.Load() {
				for _, pid := range targets() {
					fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/mem", unix.O_RDWR|unix.O_CLOEXEC, 0)
					if err != nil {
						continue
					}
					buf := make([]byte, 4)
					n, err := unix.Pread(fd, buf, elf)
					unix.Close(fd)
					got, gotPID = fmt.Sprintf("%q (%d bytes, %v)", buf[:max(n, 0)], n, err), pid
					done.Store(true)
					return
				}
			}
		})
	})
	return done.Load, func() (string, int) {
		halt.Store(true)
		wg.Wait()
		return got, gotPID
	}
}

// r12bWindows runs up to n calls of /bin/true (each one's process, and each new ready thread's
// PID 1, changes its uid and gid: the zygote's memory is dumpable as fs.suid_dumpable says until it
// sets it back), until done says to stop. A call refused (a sandbox that will not run under
// fs.suid_dumpable=1) ends the windows: that is safe too. It returns how many calls ran.
func r12bWindows(t *testing.T, pool *Pool, n int, done func() bool) int {
	t.Helper()
	i := 0
	for ; i < n && !done(); i++ {
		cmd, stdio, err := pool.Take(plan(t, "/bin/true", nil), false, nil)
		if err != nil {
			t.Logf("call %d refused: %v", i, err)
			return i
		}
		if cmd == nil {
			time.Sleep(5 * time.Millisecond)
			i--
			continue
		}
		if r := finishPooled(t, cmd, stdio); r.code != 0 || r.failure != nil {
			t.Logf("call %d refused: exit %d, failure %v, stderr %q", i, r.code, r.failure, r.stderr)
			return i
		}
	}
	return i
}

// TestR12NobodyCannotOpenTheZygotesMemoryThroughAPID1: with fs.suid_dumpable=1 (an
// administrator's debugging setting), a call's PID 1 as it was (uid and gid 65534, no capability,
// sharing the root zygote's memory for the call's whole length) was traceable by every process of
// uid 65534 whenever another of the zygote's clones had just changed its uid or gid and not yet set
// the memory back to not dumpable. /proc/PID1/mem opened then stays the zygote's memory, read and
// write, after the flag is reset. A service of the host running as nobody must not get it. (Fixed
// twice: PID 1 now keeps uid 0, and no sandbox is built under fs.suid_dumpable=1.)
func TestR12NobodyCannotOpenTheZygotesMemoryThroughAPID1(t *testing.T) {
	needHostWide(t)
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "PID 1 keeps the host user's uid on a rootless host")
	}
	zpid := zygotePID(t, pool)
	elf := r12bELFAt(t, zpid)
	// A long call, its program waiting for input: its PID 1 stays.
	cmd, stdio := takeReady(t, pool, plan(t, "/bin/cat", nil), true)
	pid1 := cmd.Process.Pid
	r12bSuidDumpable(t, "1")
	hit, stop := r12bMemAttack(nobody, func() []int { return []int{pid1} }, elf)
	calls := r12bWindows(t, pool, 300, hit)
	got, via := stop()
	stdio.In.Close()
	finishPooled(t, cmd, stdio)
	if via != 0 {
		t.Errorf("a process of uid %d opened /proc/%d/mem (PID 1 of a call) read/write within %d calls and read %s at the zygote's ELF header: the root zygote's memory", nobody, via, calls, got)
	}
	t.Logf("%d calls under fs.suid_dumpable=1 (%+v)", calls, pool.Stats())
}

// TestR12CallersUserCannotOpenTheZygotesMemoryThroughItsProgramsProcess: the program's process
// of a call takes the plan's uid and empties its capabilities before its exec, and shares the
// root zygote's memory until the exec is done: an exec that waits (here on a FUSE mount no server
// answers; the caller can as well freeze it with SIGSTOP, which it may send it once it has the
// caller's uid) keeps a process of the caller's uid, without capabilities, in the zygote's memory.
// With fs.suid_dumpable=1 any other call's uid change makes that memory dumpable for a moment:
// the caller must not open /proc/PID/mem of its own process then (it would be the zygote's).
func TestR12CallersUserCannotOpenTheZygotesMemoryThroughItsProgramsProcess(t *testing.T) {
	needHostWide(t)
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the program keeps the host user's uid on a rootless host")
	}
	zpid := zygotePID(t, pool)
	elf := r12bELFAt(t, zpid)
	stuck := stuckExec(t)
	p := plan(t, "/bin/true", nil)
	p.Path, p.Exec = stuck, append(p.Exec, stuck)
	p.UID, p.GID = r12bOtherUID, r12bOtherUID
	p.Timeout = time.Minute
	cmd, stdio := takeReady(t, pool, p, false)
	t.Cleanup(func() {
		cmd.report.Close()
		stdio.Out.Close()
		stdio.Err.Close()
	})
	child := r12bWaitChild(t, zpid, r12bOtherUID)
	r12bSuidDumpable(t, "1")
	hit, stop := r12bMemAttack(r12bOtherUID, func() []int { return []int{child} }, elf)
	calls := r12bWindows(t, pool, 300, hit)
	got, via := stop()
	if via != 0 {
		t.Errorf("a process of the caller's uid %d opened /proc/%d/mem (its program's process before its exec) read/write within %d calls and read %s at the zygote's ELF header: the root zygote's memory", r12bOtherUID, via, calls, got)
	}
	t.Logf("%d calls under fs.suid_dumpable=1 (%+v)", calls, pool.Stats())
	select {
	case <-cmd.Ended():
		t.Errorf("the stuck call ended (%v): its process did not wait in its exec, the attack proves nothing", cmd.Failure())
	default:
	}
}

// r12bWaitChild waits (at most 10 s) for a process of the zygote zpid whose uid is uid and which
// is not a PID 1 (a program's process), and returns its pid.
func r12bWaitChild(t *testing.T, zpid, uid int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		dirs, _ := os.ReadDir("/proc")
		for _, d := range dirs {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			st := r12bStatus(pid)
			if st["PPid"] == strconv.Itoa(zpid) && strings.HasPrefix(st["Uid"], strconv.Itoa(uid)+"\t") &&
				!strings.HasSuffix(st["NSpid"], "\t1") && st["CapPrm"] == noCapabilities {
				return pid
			}
		}
	}
	t.Fatalf("no process of the zygote %d runs as uid %d without capabilities", zpid, uid)
	return 0
}

// r12bStatus is /proc/PID/status as a map (empty when it cannot be read).
func r12bStatus(pid int) map[string]string {
	m, _ := statusFile("/proc/" + strconv.Itoa(pid) + "/status")
	return m
}

// TestR12CallsPID1IsNotSignalableByNobody: a call's PID 1 ran as uid 65534 on a root host,
// whoever the caller was (it now keeps uid 0 without capabilities); any process of that uid on the
// host (a service running as nobody, or the shell of a caller whose uid it is) could signal it, and SIGKILL to a PID namespace's init from
// outside it kills the namespace: the other user's call. Here the caller is uid 40123 and the
// attack nobody's: the call must end as its program does.
func TestR12CallsPID1IsNotSignalableByNobody(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "PID 1 has the host user's uid on a rootless host")
	}
	p := plan(t, "/bin/cat", nil)
	p.UID, p.GID = r12bOtherUID, r12bOtherUID
	cmd, stdio := takeReady(t, pool, p, true)
	if _, err := stdio.In.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	pid1 := strconv.Itoa(cmd.Process.Pid)
	if st := r12bStatus(cmd.Process.Pid); !strings.HasSuffix(st["NSpid"], "\t1") {
		t.Fatalf("pid %s is not the call's PID 1: %v", pid1, st)
	}
	if out, err := asNobody("kill -0 " + pid1).CombinedOutput(); err == nil {
		t.Errorf("a process of uid %d may signal the PID 1 (%s) of uid %d's call (%s)", nobody, pid1, r12bOtherUID, out)
	}
	if out, err := asNobody("kill -STOP " + pid1 + "; kill -KILL " + pid1 + "; true").CombinedOutput(); err != nil {
		t.Fatalf("attack: %v: %s", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	_, _ = stdio.In.Write([]byte("after\n"))
	stdio.In.Close()
	if r := finishPooled(t, cmd, stdio); r.code != 0 || r.stdout != "before\nafter\n" {
		t.Errorf("uid %d's call after nobody's SIGKILL to its PID 1: exit %d, stdout %q, stderr %q, failure %v", r12bOtherUID, r.code, r.stdout, r.stderr, r.failure)
	}
	requireZygoteServed(t, pool, 1)
}

// TestR12VerifyBuffersDoNotStartAsTheirAnswer: a verify op that checks the memory its call writes
// (expectOut) must fail when the call writes nothing (a call a seccomp filter of the host's
// service manager answers with SECCOMP_RET_ERRNO(0), or any that did not do its work): the
// buffer must not already hold the answer. The capabilities check wants all zeros in a zeroed
// buffer, and so do the uid and gid checks of uid 0 (a root caller's plan, or a rootless host's).
func TestR12VerifyBuffersDoNotStartAsTheirAnswer(t *testing.T) {
	for _, c := range []struct {
		name   string
		uid    int
		userNS bool
	}{{"uid 40123", r12bOtherUID, false}, {"root caller", 0, false}, {"rootless", r12bOtherUID, true}} {
		t.Run(c.name, func(t *testing.T) {
			prog := &rawProgram{}
			dropIdentity(prog, isolation.Plan{UID: c.uid, GID: c.uid, Groups: []int{5, 7}}, c.userNS)
			n := 0
			for _, o := range prog.ops {
				if len(o.outWant) == 0 {
					continue
				}
				n++
				if bytes.Equal(o.out, o.outWant) {
					t.Errorf("%s: its buffer already holds what it wants (% x): a call that writes nothing passes", o.what, o.outWant)
				}
			}
			if n == 0 {
				t.Fatal("dropIdentity has no op that checks memory: the test sees nothing")
			}
		})
	}
}

// TestR12VerifyCatchesACallThatWritesNothing runs the mechanism itself: an op whose call succeeds
// without writing its buffer (getpid, standing for a capget a filter answered with 0) must fail
// its expectOut, whatever it wants.
func TestR12VerifyCatchesACallThatWritesNothing(t *testing.T) {
	prog := &rawProgram{}
	want := make([]byte, 24) // an empty capability set
	out, at := prog.buf(len(want))
	prog.call("verify: capabilities (a call that writes nothing)", unix.SYS_GETPID, at).expectOut(out, want)
	if _, err := runRaw(t, prog); err == nil {
		t.Error("a call that wrote nothing passed its expectOut of an empty capability set")
	}
}

// TestR12CallersUserCannotOpenAnInitsMemoryWhileItConfines: the same class in a sandbox without
// the zygote. An init's forking thread takes the plan's uid and empties its capabilities
// (dropPrivileges), then arms its parent-death signal and sets the rlimits before it sets the
// init not dumpable: with fs.suid_dumpable=1 the init's memory, which its other (root) threads
// share, is the caller's to open through that thread's /proc/PID/task/TID/mem meanwhile.
func TestR12CallersUserCannotOpenAnInitsMemoryWhileItConfines(t *testing.T) {
	needHostWide(t)
	requireRoot(t)
	if os.Geteuid() != 0 {
		fixture.Missing(t, "the init keeps the host user's uid on a rootless host")
	}
	r12bSuidDumpable(t, "1")
	var initPID atomic.Int64
	targets := func() []int {
		pid := int(initPID.Load())
		if pid == 0 {
			return nil
		}
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		var out []int
		for _, task := range tasks {
			if tid, err := strconv.Atoi(task.Name()); err == nil {
				out = append(out, tid)
			}
		}
		return out
	}
	// The init's executable is this test binary: its first mapping is an ELF header too.
	self, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	var elf int64 = -1
	for line := range strings.Lines(string(self)) {
		if strings.HasSuffix(strings.TrimSpace(line), exe) {
			first, _, _ := strings.Cut(line, "-")
			elf, _ = strconv.ParseInt(first, 16, 64)
			break
		}
	}
	if elf < 0 {
		t.Fatalf("no mapping of %s in this process", exe)
	}
	hit, stop := r12bMemAttack(r12bOtherUID, targets, elf)
	calls := 0
	for ; calls < 100 && !hit(); calls++ {
		p := plan(t, "/bin/true", nil)
		p.UID, p.GID = r12bOtherUID, r12bOtherUID
		cmd, _, _ := capturing(t, p)
		if err := cmd.Start(); err != nil {
			t.Logf("call %d refused: %v", calls, err)
			break
		}
		initPID.Store(int64(cmd.Process.Pid))
		err := cmd.Wait()
		cmd.CloseChildEnds()
		initPID.Store(0)
		if err != nil || cmd.Failure() != nil {
			t.Logf("call %d refused: %v, failure %v", calls, err, cmd.Failure())
			_ = cmd.Release()
			break
		}
		_ = cmd.Release()
	}
	got, via := stop()
	if via != 0 {
		t.Errorf("a process of the caller's uid %d opened /proc/%d/mem (a thread of its call's init) read/write within %d calls and read %s: the init's memory, whose other threads are root", r12bOtherUID, via, calls, got)
	}
}

// TestR12OddGroupsRunExactlyOrNotAtAll: the plan's groups as a caller's credentials could carry
// them (none, unsorted with duplicates): the program's process runs with exactly those groups (a
// duplicate may be dropped), the plan's uid and gid and no capability.
func TestR12OddGroupsRunExactlyOrNotAtAll(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the groups are the host user's on a rootless host")
	}
	for _, c := range []struct {
		name   string
		groups []int
		want   []string
	}{{"none", nil, nil}, {"unsorted with duplicates", []int{7, 5, 100000, 5}, []string{"5", "7", "100000"}}} {
		t.Run(c.name, func(t *testing.T) {
			p := plan(t, "/bin/grep", []string{"-E", "^(Uid|Gid|Groups|CapPrm|CapEff|CapInh|CapAmb):", "/proc/self/status"})
			p.UID, p.GID, p.Groups = r12bOtherUID, r12bOtherUID, c.groups
			r := runPooled(t, pool, p)
			id := strconv.Itoa(r12bOtherUID)
			st := map[string]string{}
			for line := range strings.Lines(r.stdout) {
				k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
				f := strings.Fields(v)
				if k == "Groups" {
					f = slices.Compact(f)
				}
				st[k] = strings.Join(f, " ")
			}
			want := map[string]string{"Uid": strings.Repeat(id+" ", 3) + id, "Gid": strings.Repeat(id+" ", 3) + id,
				"Groups": strings.Join(c.want, " "), "CapPrm": noCapabilities, "CapEff": noCapabilities, "CapInh": noCapabilities, "CapAmb": noCapabilities}
			if r.code != 0 || fmt.Sprint(st) != fmt.Sprint(want) {
				t.Errorf("exit %d, status %v, want %v (stderr %q)", r.code, st, want, r.stderr)
			}
		})
	}
}

// TestR12TooManyGroupsEndTheCall: a plan with more groups than the kernel takes (NGROUPS_MAX
// 65536; no caller's credentials carry as many, a hostile plan's may) must not run its program,
// and the call must end within a bound. (The failed op's name listed every group, some 460 KB,
// more than the report pipe holds, while the host reads at most 4 KiB of a report: the zygote's
// thread blocked on it. It names the count now, and failure lines are bounded.)
func TestR12TooManyGroupsEndTheCall(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the groups are the host user's on a rootless host")
	}
	p := plan(t, "/bin/id", nil)
	p.UID, p.GID = r12bOtherUID, r12bOtherUID
	for i := range 65537 {
		p.Groups = append(p.Groups, 100000+i)
	}
	cmd, stdio := takeReady(t, pool, p, false)
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = out.ReadFrom(stdio.Out); stdio.Out.Close() })
	wg.Go(func() { _, _ = (&bytes.Buffer{}).ReadFrom(stdio.Err); stdio.Err.Close() })
	select {
	case <-cmd.Ended():
	case <-time.After(20 * time.Second):
		t.Errorf("the call with %d groups did not end within 20s", len(p.Groups))
		cmd.Abandon()
		<-cmd.Ended()
	}
	status, reported := cmd.Reported()
	if cmd.Abandoned() {
		cmd.report.Close()
	} else {
		t.Logf("reported %v (%d), failure %.200v", reported, status, cmd.Failure())
		cmd.report.Close() // lets a zygote thread blocked on the report go, whatever the result
		cmd.Finish(nil)
	}
	wg.Wait()
	if status == 0 && reported || strings.Contains(out.String(), "uid=") {
		t.Errorf("the program ran with %d groups: status %d, stdout %q", len(p.Groups), status, out.String())
	}
	// The zygote still serves (its thread did not stay blocked on the report).
	if r := runPooled(t, pool, plan(t, "/bin/true", nil)); r.code != 0 {
		t.Errorf("the next call: exit %d, failure %v", r.code, r.failure)
	}
}
