package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestZygoteSurvivesSignalsFromACallersUser: a root clihostd shared by two users on one socket.
// While the member's calls run, a process of the member's own (its shell) sends SIGSTOP and
// SIGKILL, again and again, to every thread of the daemon's zygote: kill(2) given a thread's id
// checks that thread's credentials, and one signal stops or kills the whole zygote, which builds
// every user's sandboxes. The member's calls and root's, made meanwhile, must all run, and the
// zygote must be the same process, running, at the end.
func TestZygoteSurvivesSignalsFromACallersUser(t *testing.T) {
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(10_000))
	d := rootDaemon(t, "--bundles", bundles)
	member := fixture.User(t, memberName, sockGroup, shareGroup)
	own := filepath.Join(member.Home, "project")
	privateDir(t, own, member.UID, member.GID, 0o700)
	nap := func(who string, r result) {
		t.Helper()
		if env := parseEnvelope(t, r); !env.OK {
			t.Errorf("%s's call while the member signals the zygote: %+v\n%s", who, env.Error, r.stderr)
		}
	}
	nap("the member", d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0.1"}`))
	zygote := daemonZygote(t, d)

	attack := exec.Command("/bin/sh", "-c", `while :; do
	for t in /proc/`+strconv.Itoa(zygote)+`/task/*; do kill -STOP "${t##*/}"; kill -KILL "${t##*/}"; done 2>/dev/null
	sleep 0.005
done`)
	attack.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
		Uid: uint32(member.UID), Gid: uint32(member.GID), Groups: []uint32{uint32(member.Groups[0]), uint32(member.Groups[1])}}}
	if err := attack.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			nap("the member", d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0.3"}`))
		})
	}
	wg.Go(func() {
		nap("root", d.ctl(t, "call", "sleep", "nap", "--workspace", d.ws, "--input", `{"s": "0.3"}`))
	})
	wg.Wait()
	_ = attack.Process.Kill()
	_ = attack.Wait()
	if now := daemonZygote(t, d); now != zygote {
		t.Errorf("the daemon's zygote is %d, was %d: the member's process killed it", now, zygote)
	}
	if state := procState(zygote); state != "S" && state != "R" {
		t.Errorf("the zygote (pid %d) is in state %q after the member's signals", zygote, state)
	}
	if n := poolTakes(t, d, "zygote"); n < 5 {
		t.Errorf("the zygote served %d calls, want all 5: the attack did not reach it", n)
	}
}

// daemonZygote is the pid of d's zygote (its PID 1s carry the same command line: the zygote is the
// daemon's child).
func daemonZygote(t *testing.T, d *daemonProc) int {
	t.Helper()
	for _, p := range initsOf(t, d.state) {
		if isZygote(p) && p.ppid == d.cmd.Process.Pid {
			return p.pid
		}
	}
	t.Fatalf("the daemon on %s runs no zygote: %+v", d.state, initsOf(t, d.state))
	return 0
}

// procState is the state letter of process pid (R, S, T, Z, ...), or "" once it is gone.
func procState(pid int) string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	state, _, _ := strings.Cut(rest, " ")
	return state
}
