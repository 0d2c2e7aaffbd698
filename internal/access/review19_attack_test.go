package access

// Outside review 19 (commit 6f33480): access checks as another user run on a goroutine that
// locks a borrowed thread, switches its groups, fsgid and fsuid, and switches back before it
// unlocks. These tests attack that hand-back: no other goroutine may ever run on a thread that
// still has a check's identity, no check may answer with an identity it did not ask for, and every
// thread must end as it began.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procCredentials is one thread's credentials as /proc shows them: the uid and gid lines (real,
// effective, saved, filesystem), the supplementary groups and the capability sets.
func procCredentials(t *testing.T, status string) string {
	t.Helper()
	b, err := os.ReadFile(status)
	if errors.Is(err, os.ErrNotExist) { // the thread exited meanwhile
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		for _, p := range []string{"Uid:", "Gid:", "Groups:", "CapEff:", "CapPrm:", "CapInh:", "CapAmb:"} {
			if strings.HasPrefix(line, p) {
				out = append(out, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return strings.Join(out, "; ")
}

// everyThreadAsProcess fails t for each thread of this process whose credentials differ from the
// main thread's (/proc/self/status).
func everyThreadAsProcess(t *testing.T) {
	t.Helper()
	everyThreadAs(t, procCredentials(t, "/proc/self/status"))
}

// everyThreadAs fails t for each thread of this process whose credentials are not want.
func everyThreadAs(t *testing.T, want string) {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) < 2 {
		t.Fatalf("threads: %v %v", tasks, err)
	}
	for _, task := range tasks {
		if got := procCredentials(t, task); got != "" && got != want {
			t.Errorf("%s: %s\nwant %s", task, got, want)
		}
	}
}

// ownThread is the calling thread's fsuid, fsgid and groups, read without changing them.
func ownThread() (fsuid, fsgid int, groups []int) {
	id, err := identityOfThread()
	if err != nil {
		return -1, -1, nil
	}
	return id.UID, id.GID, id.Groups
}

// TestReview19BystandersNeverOnASwitchedThread: while hundreds of checks as other users (and
// checks whose switch fails half-way) run at once, with the GC forced again and again and a
// signal sent to the process over and over (delivered to any thread, switched ones included),
// every other goroutine, each time it looks, finds its thread with the process's fsuid, fsgid
// and groups, and every file it creates in a root-only folder is created (fs capabilities kept)
// and owned by root. Every check gets its own user's answer, and every thread ends as the process.
func TestReview19BystandersNeverOnASwitchedThread(t *testing.T) {
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, false)
	rootOnly := filepath.Join(base, "closed") // root's, 0700
	pu, pg, pgroups := ownThread()

	half := who(member)
	half.GID = 1<<32 - 1 // setgroups takes, setfsgid(-1) does not: the switch fails half-way
	cases := []struct {
		dir  string
		who  Who
		want bool
	}{
		{"own", who(owner), true}, {"own", who(outsider), false}, {"group", who(member), true},
		{"group", who(owner), false}, {"closed/open", who(member), false}, {"closed/open", Who{}, true},
		{"group", half, false},
	}

	var stop atomic.Bool
	var bystanders, checkers, noise sync.WaitGroup
	problems := make(chan string, 1000)
	report := func(format string, args ...any) {
		select {
		case problems <- fmt.Sprintf(format, args...):
		default:
		}
	}

	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	noise.Go(func() {
		for !stop.Load() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGUSR1)
			runtime.Gosched()
		}
	})
	noise.Go(func() {
		for {
			select {
			case <-sigs:
			default:
				if stop.Load() {
					return
				}
				runtime.Gosched()
			}
		}
	})
	noise.Go(func() {
		for !stop.Load() {
			runtime.GC()
		}
	})

	for b := range 32 {
		bystanders.Go(func() {
			for i := 0; !stop.Load() || i < 200; i++ {
				if u, g, gs := ownThread(); u != pu || g != pg || !slices.Equal(gs, pgroups) {
					report("bystander %d on thread %d: fsuid %d fsgid %d groups %v, want %d %d %v", b, unix.Gettid(), u, g, gs, pu, pg, pgroups)
				}
				p := filepath.Join(rootOnly, fmt.Sprintf("b%d-%d", b, i))
				f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
				if err != nil {
					report("bystander %d creating in root's 0700 folder: %v", b, err)
					continue
				}
				var st unix.Stat_t
				if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Uid != 0 || st.Gid != 0 {
					report("bystander %d: %s owned by %d:%d (%v), want root's", b, p, st.Uid, st.Gid, err)
				}
				f.Close()
				os.Remove(p)
				if i%16 == 0 {
					runtime.Gosched()
				}
			}
		})
	}

	for g := range 300 {
		checkers.Go(func() {
			for i := range 3 * len(cases) {
				c := cases[(g+i)%len(cases)]
				if err := CheckDir(filepath.Join(base, c.dir), c.who); (err == nil) != c.want {
					report("%s as uid %d gid %d: %v, want allowed=%v", c.dir, c.who.UID, c.who.GID, err, c.want)
				}
			}
		})
	}
	checkers.Wait()
	stop.Store(true)
	bystanders.Wait()
	noise.Wait()
	close(problems)
	for p := range problems {
		t.Error(p)
	}
	everyThreadAsProcess(t)
}

// TestReview19BadIdentitiesFailClosed: identities the kernel cannot take as given (ids beyond 32
// bits, which a uint32 conversion would turn into root's 0 or another user's id; -1 as a 32-bit
// id, which setfsuid and setfsgid ignore; groups beyond 32 bits or negative; too many groups) are
// never answered "allowed", by any of the four entry points, even where the truncated identity
// would be allowed; each switch that took part way is undone, so every thread ends as the process.
func TestReview19BadIdentitiesFailClosed(t *testing.T) {
	owner, member, outsider, share := users(t)
	base := tree(t, owner, member, share, false)
	rootGroup := filepath.Join(base, "rootgroup") // root:root 0070: only root's group may use it
	if err := os.Mkdir(rootGroup, 0o070); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rootGroup, 0o070); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(base, "own")
	bin := filepath.Join(own, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(bin, owner.UID, owner.GID); err != nil {
		t.Fatal(err)
	}
	many := who(outsider)
	many.Groups = make([]int, 65537)
	for i := range many.Groups {
		many.Groups[i] = 200000 + i
	}
	for _, c := range []struct {
		name string
		dir  string // allowed to the identity as the kernel would truncate it
		who  Who
	}{
		{"uid 2^32 (truncates to root)", filepath.Join(base, "closed/open"), Who{UID: 1 << 32, GID: outsider.GID}},
		{"uid 2^32+owner (truncates to the owner)", own, Who{UID: 1<<32 + owner.UID, GID: owner.GID}},
		{"gid 2^32 (truncates to root's group)", rootGroup, Who{UID: outsider.UID, GID: 1 << 32}},
		{"group 2^32 (truncates to root's group)", rootGroup, Who{UID: outsider.UID, GID: outsider.GID, Groups: []int{1 << 32}}},
		{"group 2^32+share (truncates to the share group)", filepath.Join(base, "group"), Who{UID: outsider.UID, GID: outsider.GID, Groups: []int{1<<32 + share}}},
		{"uid 2^32-1 (setfsuid ignores it: stays root)", filepath.Join(base, "closed/open"), Who{UID: 1<<32 - 1, GID: outsider.GID}},
		{"gid 2^32-1 after setgroups (half switch)", filepath.Join(base, "group"), Who{UID: member.UID, GID: 1<<32 - 1, Groups: []int{share}}},
		{"negative group", filepath.Join(base, "group"), Who{UID: member.UID, GID: member.GID, Groups: []int{share, -1}}},
		{"negative uid", filepath.Join(base, "closed/open"), Who{UID: -1, GID: 0}},
		{"65537 groups", filepath.Join(base, "closed/open"), many},
	} {
		if err := CheckDir(c.dir, c.who); err == nil {
			t.Errorf("CheckDir, %s: allowed", c.name)
		}
		dirErrs, execErr := CheckDirsExec([]string{c.dir}, bin, c.who)
		if dirErrs[0] == nil {
			t.Errorf("CheckDirsExec, %s: directory allowed", c.name)
		}
		if c.dir == own && execErr == nil {
			t.Errorf("CheckDirsExec, %s: binary allowed", c.name)
		}
		if i, err := CheckWrites([]string{c.dir}, c.who); err == nil || i != 0 {
			t.Errorf("CheckWrites, %s: %d %v, want path 0 refused", c.name, i, err)
		}
		if c.dir == own {
			if err := CheckExec(bin, c.who); err == nil {
				t.Errorf("CheckExec, %s: allowed", c.name)
			}
		}
	}
	// The truncated identities themselves are allowed: the cases above test something.
	for _, c := range []struct {
		dir string
		who Who
	}{
		{own, who(owner)}, {rootGroup, Who{UID: outsider.UID, GID: 0}}, {filepath.Join(base, "group"), Who{UID: outsider.UID, GID: outsider.GID, Groups: []int{share}}},
	} {
		if err := CheckDir(c.dir, c.who); err != nil {
			t.Errorf("control %s as %+v: %v", c.dir, c.who, err)
		}
	}
	everyThreadAsProcess(t)
}

// TestReview19GroupListsAsTheKernelKeepsThem: the read-back of the groups compares with what the
// kernel keeps (sorted, duplicates kept): a list with duplicates, ids above 2^31 out of order, and
// the largest list the kernel takes (NGROUPS_MAX) are each taken, and answered for the user
// (not refused as a switch that did not take); every thread ends as the process.
func TestReview19GroupListsAsTheKernelKeepsThem(t *testing.T) {
	owner, member, _, share := users(t)
	base := tree(t, owner, member, share, false)
	group := filepath.Join(base, "group")
	dup := who(member)
	dup.Groups = []int{share, 7, share, 7, share}
	high := who(member)
	high.Groups = []int{1<<32 - 2, share, 1 << 31, 1<<31 + 1, 5}
	max := who(member)
	max.Groups = make([]int, 65536)
	for i := range max.Groups {
		max.Groups[i] = 300000 + (65535-i)*3 // descending
	}
	max.Groups[40000] = share
	for name, w := range map[string]Who{"duplicates": dup, "ids above 2^31": high, "65536 groups": max} {
		if err := CheckDir(group, w); err != nil {
			t.Errorf("%s: %v, want allowed (the share group is among them)", name, err)
		}
		w.Groups = slices.DeleteFunc(slices.Clone(w.Groups), func(g int) bool { return g == share })
		if err := CheckDir(group, w); err == nil {
			t.Errorf("%s without the share group: allowed", name)
		}
	}
	everyThreadAsProcess(t)
}

// capsChild, set in the environment, makes TestReview19CapabilitiesAsTheyWere the child that
// lowers its own effective capabilities.
const capsChild = "CLIHOST_REVIEW19_CAPS_CHILD"

// TestReview19CapabilitiesAsTheyWere: a thread gives back not only its fsuid, fsgid and groups but
// also its effective capabilities as they were. Switching fsuid from 0 to a user drops the
// filesystem capabilities, and switching back to 0 raises every one of them that is permitted,
// whether it was effective before or not. In a child whose every thread has lowered its effective
// set (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER permitted, not effective), checks as
// another user must leave every thread with the process's effective set; a bystander must not then
// read a file only CAP_DAC_OVERRIDE could read.
func TestReview19CapabilitiesAsTheyWere(t *testing.T) {
	if os.Getenv(capsChild) != "" {
		capsChildMain(t)
		return
	}
	owner, member, _, share := users(t)
	base := tree(t, owner, member, share, false)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestReview19CapabilitiesAsTheyWere$", "-test.count=1")
	cmd.Env = append(os.Environ(), capsChild+"="+base, "CI=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child (effective capabilities lowered, then checks as the owner): %v\n%s", err, out)
	}
}

// capsChildMain lowers every thread's effective set, runs checks as the owner and compares.
func capsChildMain(t *testing.T) {
	base := os.Getenv(capsChild)
	owner := func() Who {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(base, "own"), &st); err != nil {
			t.Fatal(err)
		}
		return Who{UID: int(st.Uid), GID: int(st.Gid)}
	}()
	secret := filepath.Join(base, "own", "secret") // the owner's, 0600
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(secret, owner.UID, owner.GID); err != nil {
		t.Fatal(err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	lowered := uint32(1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH | 1<<unix.CAP_FOWNER)
	data[0].Effective &^= lowered
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		t.Fatalf("capset on every thread: %v", e)
	}
	runtime.KeepAlive(&data)
	if _, err := os.ReadFile(secret); err == nil {
		t.Fatal("the owner's 0600 file is readable with CAP_DAC_OVERRIDE lowered: the test cannot tell")
	}
	want := procCredentials(t, "/proc/thread-self/status") // every thread's now (the main thread's too)
	everyThreadAs(t, want)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 4 {
				if err := CheckDir(filepath.Join(base, "own"), owner); err != nil {
					t.Errorf("the owner's folder as the owner: %v", err)
				}
			}
		})
	}
	wg.Wait()
	everyThreadAs(t, want)
	var read atomic.Int32
	for range 64 {
		wg.Go(func() {
			if _, err := os.ReadFile(secret); err == nil {
				read.Add(1)
			}
		})
	}
	wg.Wait()
	if n := read.Load(); n > 0 {
		t.Errorf("%d of 64 goroutines read the owner's 0600 file after the checks: their threads took CAP_DAC_OVERRIDE back", n)
	}
}

// fixupChild, set in the environment, makes TestReview19NoSetuidFixupStillTheUsersAnswer the child
// that sets SECBIT_NO_SETUID_FIXUP.
const fixupChild = "CLIHOST_REVIEW19_FIXUP_CHILD"

// TestReview19NoSetuidFixupStillTheUsersAnswer: a check as a user must be the user's answer, never
// root's. It relies on the kernel dropping the filesystem capabilities when fsuid leaves 0, which
// the kernel skips under SECBIT_NO_SETUID_FIXUP (systemd's SecureBits=no-setuid-fixup): the
// thread then keeps CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, and faccessat2 answers as root. In a
// child with that bit set on every thread, the outsider must still be refused root's 0700 folder
// (and a folder below it), and the owner's 0700 folder.
func TestReview19NoSetuidFixupStillTheUsersAnswer(t *testing.T) {
	if base := os.Getenv(fixupChild); base != "" {
		const secbitNoSetuidFixup = 1 << 2
		if _, _, e := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, secbitNoSetuidFixup, 0); e != 0 {
			t.Fatalf("PR_SET_SECUREBITS on every thread: %v", e)
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(base, "own"), &st); err != nil {
			t.Fatal(err)
		}
		outsider := Who{UID: 65534, GID: 65534} // nobody: owns nothing in the tree
		for _, d := range []string{"closed", "closed/open", "own"} {
			if err := CheckDir(filepath.Join(base, d), outsider); err == nil {
				t.Errorf("%s as nobody: allowed (root's answer: the thread kept its filesystem capabilities)", d)
			}
		}
		if err := CheckDir(filepath.Join(base, "own"), Who{UID: int(st.Uid), GID: int(st.Gid)}); err != nil {
			t.Errorf("own as its owner: %v", err)
		}
		return
	}
	owner, member, _, share := users(t)
	base := tree(t, owner, member, share, false)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestReview19NoSetuidFixupStillTheUsersAnswer$", "-test.count=1")
	cmd.Env = append(os.Environ(), fixupChild+"="+base, "CI=true")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child (SECBIT_NO_SETUID_FIXUP set): %v\n%s", err, out)
	}
}
