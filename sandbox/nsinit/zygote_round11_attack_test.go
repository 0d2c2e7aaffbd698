package nsinit

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// Round 11's attacks on the sandboxes the zygote builds ahead of their calls (zygote_ahead.go):
// a call that runs in a sandbox built ahead must get what a sandbox built for it would give it,
// or be built the usual way; and it must keep its deadline and not hang the host.

// r11FUSE is a FUSE server whose root holds one directory, "d" (inode 2), which lists as empty.
// Once stall is set it leaves unanswered every request of a zygote thread that no longer runs as
// root (a confined thread: a sandbox built ahead looking at its split directories when its call
// comes), until release. Everything else (the host's looks, the zygote's builds, which resolve
// and list as root) is answered.
type r11FUSE struct {
	fd    int
	stall atomic.Bool
	// rootToo stalls the zygote's root threads too (a build) while stall is set.
	rootToo atomic.Bool

	mu       sync.Mutex
	stalled  []uint64
	held     int      // requests it left unanswered, in all
	heldBy   []uint32 // the threads whose requests it left unanswered
	released bool
}

// r11StallingFUSE mounts an r11FUSE under the temporary directory (which every sandbox covers with
// a /tmp of its own, see fixture.HostileFUSE) and returns it with its mountpoint.
func r11StallingFUSE(t *testing.T) (*r11FUSE, string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fixture.Missing(t, "no FUSE: %v", err)
	}
	mnt, err := os.MkdirTemp("", "r11f")
	if err != nil {
		t.Fatal(err)
	}
	opts := "fd=" + strconv.Itoa(fd) + ",rootmode=40000,user_id=0,group_id=0,allow_other"
	if err := unix.Mount("clihost-r11", mnt, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		fixture.Missing(t, "cannot mount FUSE: %v", err)
	}
	s := &r11FUSE{fd: fd}
	t.Cleanup(func() {
		s.release()
		_ = unix.Unmount(mnt, unix.MNT_DETACH)
		os.Remove(mnt)
	})
	go s.serve()
	return s, mnt
}

// release answers the requests left unanswered (ENOENT) and every later one.
func (s *r11FUSE) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
	for _, unique := range s.stalled {
		s.reply(unique, -int32(unix.ENOENT), nil)
	}
	s.stalled = nil
}

// heldCount is how many requests it left unanswered.
func (s *r11FUSE) heldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func (s *r11FUSE) hold(unique uint64, uid, pid uint32) bool {
	if !s.stall.Load() || uid == 0 && !s.rootToo.Load() {
		return false
	}
	if !strings.HasPrefix(tgidCmdline(pid), procName+" "+zygoteMarker) && !strings.HasPrefix(cmdline(int(pid)), procName+" "+zygoteMarker) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return false
	}
	s.stalled = append(s.stalled, unique)
	s.held++
	s.heldBy = append(s.heldBy, pid)
	return true
}

func (s *r11FUSE) reply(unique uint64, errno int32, body []byte) {
	le := binary.LittleEndian
	out := make([]byte, 16+len(body))
	le.PutUint32(out[0:], uint32(len(out)))
	le.PutUint32(out[4:], uint32(errno))
	le.PutUint64(out[8:], unique)
	copy(out[16:], body)
	_, _ = unix.Write(s.fd, out)
}

// r11DirAttr fills a fuse_attr of a directory (0755, root's) with inode ino.
func r11DirAttr(a []byte, ino uint64) {
	le := binary.LittleEndian
	le.PutUint64(a[0:], ino)
	le.PutUint32(a[60:], unix.S_IFDIR|0o755)
	le.PutUint32(a[64:], 2)
	le.PutUint32(a[80:], 4096)
}

func (s *r11FUSE) serve() {
	defer unix.Close(s.fd)
	buf := make([]byte, 1<<20)
	le := binary.LittleEndian
	const (
		opLookup, opForget, opGetattr, opInit      = 1, 2, 3, 26
		opOpendir, opReaddir, opReleasedir, opIntr = 27, 28, 29, 36
		opBatchForget, inHdr, attrSize             = 42, 40, 88
	)
	for {
		n, err := unix.Read(s.fd, buf)
		if err != nil && err != unix.EINTR && err != unix.ENOENT {
			return
		}
		if n < inHdr {
			continue
		}
		op, unique, node := le.Uint32(buf[4:]), le.Uint64(buf[8:]), le.Uint64(buf[16:])
		uid, pid := le.Uint32(buf[24:]), le.Uint32(buf[32:])
		if op == opForget || op == opBatchForget || op == opIntr {
			continue // no reply
		}
		if op != opInit && s.hold(unique, uid, pid) {
			continue
		}
		var body []byte
		errno := int32(0)
		switch op {
		case opInit:
			body = make([]byte, 64)
			le.PutUint32(body[0:], 7)
			le.PutUint32(body[4:], le.Uint32(buf[inHdr+4:]))
			le.PutUint32(body[20:], 4096)
		case opLookup:
			name := strings.TrimRight(string(buf[inHdr:n]), "\x00")
			if node != 1 || name != "d" {
				errno = -int32(unix.ENOENT)
				break
			}
			body = make([]byte, 40+attrSize)
			le.PutUint64(body[0:], 2)
			r11DirAttr(body[40:], 2)
		case opGetattr:
			body = make([]byte, 16+attrSize)
			r11DirAttr(body[16:], node)
		case opOpendir:
			body = make([]byte, 16)
		case opReaddir, opReleasedir:
			// an empty directory; nothing to release
		default:
			errno = -int32(unix.ENOSYS)
		}
		s.reply(unique, errno, body)
	}
}

// TestR11AheadCallOnAStalledSplitDirectoryKeepsItsDeadline: a plan whose read-only tree on a
// FUSE (or NFS) mount is split around a deny path has a sandbox built ahead; then the file
// system stops answering the zygote (a hostile server that sees who asks, or an NFS server gone
// away). A sandbox built for the call would write "pid N" before it resolves anything, so the
// call's deadline (the zygote's watch) and the host's kill of its process group end it; the
// sandbox built ahead looks at its split directories (fits) before it says "pid N": the host's
// Take must still return, and the call must end by its deadline, not hang.
func TestR11AheadCallOnAStalledSplitDirectoryKeepsItsDeadline(t *testing.T) {
	srv, mnt := r11StallingFUSE(t)
	pool := zygotePool(t)
	d := filepath.Join(mnt, "d")
	p := plan(t, "/bin/true", nil)
	p.ReadOnly = append(p.ReadOnly, d)
	p.Deny = []string{filepath.Join(d, "secret")} // absent: d is split around it (listed, kept)
	awaitAhead(t, pool, p)
	srv.stall.Store(true)
	call := p
	call.Timeout = time.Second
	type taken struct {
		cmd   *Cmd
		stdio *Stdio
		err   error
	}
	took := make(chan taken, 1)
	start := time.Now()
	go func() {
		cmd, stdio, err := pool.Take(call, false, nil)
		took <- taken{cmd, stdio, err}
	}()
	var tk taken
	select {
	case tk = <-took:
	case <-time.After(10 * time.Second): // a bound, not a measurement: the deadline is 1 s
		t.Errorf("Pool.Take of a call with a 1s deadline did not return within 10s: the sandbox built ahead hangs on its split directory before it says its PID 1 (%d zygote requests held by the file system)", srv.heldCount())
		srv.release() // the stalled look fails: the call goes stale and is built the usual way
		tk = <-took
	}
	if tk.err != nil || tk.cmd == nil {
		t.Logf("take: %v", tk.err)
		return
	}
	select {
	case <-tk.cmd.Ended():
	case <-time.After(15 * time.Second):
		t.Errorf("the call did not end within 15s of its start although its deadline was 1s")
	}
	for _, f := range []*os.File{tk.stdio.Out, tk.stdio.Err} {
		f.Close()
	}
	t.Logf("call ended after %v, %d requests held", time.Since(start), srv.heldCount())
	tk.cmd.report.Close() // the host lets go of the call
	srv.release()
	closeWithin(t, pool)
}

// TestR11AheadThreadIsNotSignalableByThePlansUser: a sandbox built ahead waits (up to 30 s after
// every paced call) on a thread of the root zygote that already runs with the plan's uid (the
// caller's, on a root daemon). A process of that uid outside any sandbox, which the daemon does
// not trust, must not be able to signal that thread: SIGSTOP or SIGKILL to one thread acts on the
// whole zygote, which builds every user's sandboxes.
func TestR11AheadThreadIsNotSignalableByThePlansUser(t *testing.T) {
	pool := zygotePool(t)
	if !pool.root {
		fixture.Missing(t, "the plan's uid is the host user's on a rootless host")
	}
	p := sh(t, "true")
	awaitAhead(t, pool, p)
	zpid := zygotePID(t, pool)
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(zpid) + "/task")
	if len(tasks) < 3 {
		t.Fatalf("the zygote has %d threads: the test sees nothing", len(tasks))
	}
	for _, task := range tasks {
		tid := task.Name()
		if uid := r11ThreadUID(zpid, tid); uid == strconv.Itoa(nobody) {
			t.Errorf("zygote thread %s runs as the plan's uid while a sandbox built ahead waits", tid)
		}
		// kill(2) with a thread's id checks that thread's credentials.
		probe := exec.Command("/bin/sh", "-c", "kill -0 "+tid)
		probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		if out, err := probe.CombinedOutput(); err == nil {
			t.Errorf("a process of uid %d may signal zygote %d's thread %s (a sandbox built ahead waiting for its call): kill -STOP would stop the zygote of every user (%s)", nobody, zpid, tid, out)
		}
	}
}

// r11ThreadUID is the real uid of thread tid of process pid, or "".
func r11ThreadUID(pid int, tid string) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + tid + "/status")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// TestR11AheadSandboxRefusesAPlanPathWhoseParentBecameALink: a sandbox built for a call refuses
// a plan path with a symbolic link in it (openPlan: the tree changed after the policy check). A
// parent directory renamed and replaced by a link to its new name after the sandbox was built
// ahead leaves every checked inode the same (the host's lstat follows the link) and no mount
// shows it: the call must not run where a sandbox built for it is refused.
func TestR11AheadSandboxRefusesAPlanPathWhoseParentBecameALink(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	conf := filepath.Join(base, "ro/sub/conf")
	fixture.WriteIn(t, conf, map[string]string{"file": "CONF\n"})
	p := sh(t, `cat "$0/file"`, "/bin/cat")
	p.Args = append(p.Args, conf)
	p.ReadOnly = append(p.ReadOnly, conf)
	awaitAhead(t, pool, p)
	sub := filepath.Join(base, "ro/sub")
	if err := os.Rename(sub, sub+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub.real", sub); err != nil {
		t.Fatal(err)
	}
	fresh := run(t, p) // built for the call: refused
	r, ahead := runCounting(t, pool, p)
	if ahead || (fresh.failure != nil) != (r.failure != nil) {
		t.Errorf("a plan path whose parent became a symbolic link: ahead %t, failure %v, stdout %q; a sandbox built for the call: failure %v", ahead, r.failure, r.stdout, fresh.failure)
	}
}

// TestR11AheadSandboxMasksAnAbsentDenyPathMadeSince: a deny path inside a writable root that did
// not exist when the policy was checked (Plan.Absent) nor when the sandbox was built ahead, then
// made by another writer of the workspace (a concurrent call, an editor) as a hard link to a
// secret, is masked for the next call as in a sandbox built for it.
func TestR11AheadSandboxMasksAnAbsentDenyPathMadeSince(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	rw := filepath.Join(base, "rw")
	env := filepath.Join(rw, ".env")
	p := sh(t, `cat "$0" 2>&1; echo done`, "/bin/cat")
	p.Args = append(p.Args, env)
	p.ReadWrite = []string{rw}
	p.Deny = []string{env}
	p.Absent = []string{env}
	awaitAhead(t, pool, p)
	secret := filepath.Join(rw, "elsewhere")
	if err := os.WriteFile(secret, []byte("LINKED SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, env); err != nil {
		t.Fatal(err)
	}
	// The linked file itself stays readable (it is no deny path): only its deny name must not be.
	r, ahead := runCounting(t, pool, p)
	if strings.Contains(r.stdout, "LINKED SECRET") || !strings.Contains(r.stdout, "done") {
		t.Errorf("a deny path made since the sandbox was built ahead: %q (ahead %t), want it masked", r.stdout, ahead)
	}
}

// TestR11AheadCallKeepsItsOwnUmaskAndRlimits: the host's umask and a plan's file size limit are
// the call's, not those the sandbox built ahead was asked with.
func TestR11AheadCallKeepsItsOwnUmaskAndRlimits(t *testing.T) {
	pool := zygotePool(t)
	base := aheadTree(t)
	rw := filepath.Join(base, "rw")
	p := sh(t, `f="$0/out.$$"; : > "$f"; stat -c %a "$f"; head -c 65536 /dev/zero > /tmp/big; echo "status $?"; wc -c < /tmp/big`, "/usr/bin/stat", "/usr/bin/head", "/usr/bin/wc")
	p.Args = append(p.Args, rw)
	p.ReadWrite = []string{rw}
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	awaitAhead(t, pool, p)
	outs, _ := filepath.Glob(filepath.Join(rw, "out.*")) // the earlier calls' (each program is pid 2)
	for _, f := range outs {
		os.Remove(f)
	}
	unix.Umask(0o077)
	r, ahead := runCounting(t, pool, p)
	if !strings.HasPrefix(r.stdout, "600\n") {
		t.Errorf("the host's umask 077 at the call: mode %q (ahead %t), want 600", r.stdout, ahead)
	}
	unix.Umask(0o022)
	awaitAhead(t, pool, p)
	limited := p
	limited.Limits = isolation.Limits{FileSize: 4096}
	r, ahead = runCounting(t, pool, limited)
	if !strings.Contains(r.stdout, "\n4096\n") {
		t.Errorf("a file size limit of 4096 in a sandbox built ahead without one: %q (ahead %t)", r.stdout, ahead)
	}
	if !ahead {
		t.Logf("the limited call did not run ahead (stats %+v)", pool.Stats())
	}
}

// TestR11AheadPlansApartUnderPacedConcurrentCallers: four callers, each with its own plan (each
// denies the others' files and reads its own), call paced so that sandboxes are built ahead for
// all of them while the others run. No call may read another plan's file nor miss its own, and the
// zygote must hold no more descriptors or children once they stop.
func TestR11AheadPlansApartUnderPacedConcurrentCallers(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	fdsBefore, kidsBefore := zygoteBaseline(t, zpid)
	base := aheadTree(t)
	ro := filepath.Join(base, "ro")
	const callers = 4
	files := make([]string, callers)
	for i := range files {
		files[i] = filepath.Join(ro, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(files[i], []byte(fmt.Sprintf("CONTENT-%d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plans := make([]isolation.Plan, callers)
	for i := range plans {
		p := sh(t, `cat "$@" 2>/dev/null; true`, "/bin/cat")
		p.Args = append(p.Args, "sh")
		p.Args = append(p.Args, files...)
		p.ReadOnly = append(p.ReadOnly, ro)
		for j, f := range files {
			if j != i {
				p.Deny = append(p.Deny, f)
			}
		}
		plans[i] = p
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	deadline := time.Now().Add(6 * time.Second)
	for i := range callers {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline); n++ {
				cmd, stdio, err := pool.Take(plans[i], false, nil)
				if err != nil || cmd == nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				r := finishPooled(t, cmd, stdio)
				if want := fmt.Sprintf("CONTENT-%d\n", i); r.stdout != want {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("caller %d call %d: %q, want %q", i, n, r.stdout, want))
					mu.Unlock()
				}
				time.Sleep(time.Duration(15+5*i) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d calls saw another plan's files or missed their own, first: %s", len(bad), bad[0])
	}
	t.Logf("stats %+v", pool.Stats())
	if pool.Stats().ZygoteAhead == 0 {
		t.Error("no call ran in a sandbox built ahead: the test did not reach them")
	}
	// Sandboxes built ahead wait at most aheadIdle; the host's ends are closed by Close.
	pool.zygote().closeAhead()
	zygoteBackTo(t, pool, zpid, fdsBefore, kidsBefore, 10*time.Second, "paced concurrent callers")
}

// r11Tgid is the process (thread group) of thread tid, or -1.
func r11Tgid(tid uint32) int {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(int(tid)) + "/status")
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return -1
}

// TestR11StuckAheadBuildsDoNotPileUp: a file system that answers every call's build but not a
// build ahead (a FUSE server that stalls the zygote's looks when the host did not look just
// before: the daemon compiles each call's policy on the host first, a build ahead has no call)
// leaves one zygote thread stuck in the kernel for every plan that repeats, with its PID 1 and
// mount namespace, while every call succeeds. A stuck call counts toward zygoteMaxAbandoned (the
// pool then starts another zygote); stuck builds ahead must be bounded as well, not pile up in one
// zygote without end.
func TestR11StuckAheadBuildsDoNotPileUp(t *testing.T) {
	srv, mnt := r11StallingFUSE(t)
	srv.rootToo.Store(true)
	pool := zygotePool(t)
	d := filepath.Join(mnt, "d")
	const plans = 3 * zygoteMaxAbandoned
	for i := range plans {
		p := plan(t, "/bin/true", nil)
		p.ReadOnly = append(p.ReadOnly, d)
		p.Deny = []string{filepath.Join(d, fmt.Sprintf("secret%d", i))} // another plan each
		for range 2 {
			srv.stall.Store(false)
			if r := runPooled(t, pool, p); r.code != 0 {
				t.Fatalf("plan %d: exit %d, failure %v", i, r.code, r.failure)
			}
			srv.stall.Store(true) // the pause after the call: the build ahead is left unanswered
			time.Sleep(15 * aheadPause)
		}
	}
	srv.stall.Store(false)
	srv.mu.Lock()
	held := slices.Clone(srv.heldBy)
	srv.mu.Unlock()
	zpid := zygotePID(t, pool)
	inZygote := 0
	for _, tid := range held {
		if r11Tgid(tid) == zpid {
			inZygote++
		}
	}
	t.Logf("%d builds ahead stuck, %d of them in the current zygote %d (stats %+v)", len(held), inZygote, zpid, pool.Stats())
	if len(held) == 0 {
		t.Fatal("no build ahead was stuck: the test did not reach them")
	}
	if inZygote > zygoteMaxAbandoned {
		t.Errorf("the zygote %d has %d threads stuck in the kernel on builds ahead (%d plans repeated), more than the %d abandoned calls a zygote may keep", zpid, inZygote, plans, zygoteMaxAbandoned)
	}
	srv.release()
	closeWithin(t, pool)
}

// TestR11CloseWhileASandboxWaitsAhead: the daemon's stop while a sandbox built ahead waits for its
// call returns at once, and the zygote (with the waiting thread, its PID 1 and its mounts) exits.
func TestR11CloseWhileASandboxWaitsAhead(t *testing.T) {
	pool := zygotePool(t)
	p := sh(t, "true")
	awaitAhead(t, pool, p)
	zpid := zygotePID(t, pool)
	start := time.Now()
	closeWithin(t, pool)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Pool.Close took %v with a sandbox built ahead waiting", d)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(zpid) + "/task"); err != nil {
			return
		}
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(zpid) + "/stat"); strings.Contains(string(b), ") Z ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the zygote %d still runs 5s after Close with a sandbox built ahead waiting", zpid)
		}
	}
}
