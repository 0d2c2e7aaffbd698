package nsinit

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clihost/clihost/internal/kernfile"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// Sandboxes built ahead of their calls. When calls with the same plan repeat (an agent calling one
// tool in one workspace), the host asks the zygote to build the next call's sandbox before that
// call comes: a ready thread builds it as for a call (zcall.build: the plan's paths resolved, the
// mounts, Landlock) and waits, on a socket pair of its own, for the call. The call's own policy is
// still compiled when it comes; the sandbox built ahead runs it only when a sandbox built now would
// be the same, else the call is built the usual way:
//
//   - the call's plan is the plan it was built for, but for what only the program's start reads
//     (its argv, environment, timeout and the limits that are not the tmpfs size: aheadKey);
//   - every path of the plan is the file it was when it was resolved for the build, reached
//     through no symbolic link: the host looks at each again when the call comes
//     (envelope.Files), and the zygote compares;
//   - the sandbox's mount table reads as it did once built: a mask or a bind whose place the host
//     removed or renamed since (the kernel detaches or moves such mounts) shows there;
//   - the host's mount table reads as it did when the host asked for the sandbox, which the thread
//     had checked its copy against (as every ready thread does when it takes a request). The host
//     compares it: a thread in the call's cgroup namespace sees the cgroup mounts' roots anew;
//   - every directory whose entries were listed to split a Landlock grant around a deny path still
//     has the change and modification times it had before it was listed (a new entry in it would
//     have no rule): the zygote says which with the sandbox's readiness, and the host looks at
//     them. A change time so recent that a later change could have kept it (coarse timestamps) is
//     waited out while the sandbox is built, and the directory listed again.
//
// The zygote's checks touch no file system a call's plan names (a stalled one would hold the call
// before its deadline runs): the host's do, as its policy check does. The call's thread then writes
// "pid N" and runs the program as it would have in a sandbox built for it (zcall.run: the
// program's process takes the plan's identity, as in any sandbox); one that does not fit writes
// staleLine instead, and nothing of the call ran. A sandbox waits at most aheadIdle for its call
// (its mounts keep the host's file systems it binds busy), and serves one call. Only plans without
// egress are built ahead (the listeners are the call's), and only plans the zygote serves (no
// ingress). One still being built when the next call comes is not waited for; while one is, no
// other is asked for, and one that never got built counts as a call the zygote abandoned.

// aheadIdle is how long a sandbox built ahead waits for its call before it ends unused: longer
// than an agent's turn between two calls. Meanwhile it looks at the host's mount table every
// zygoteIdle, and ends once it changed (so that it does not keep a file system the host unmounted).
const aheadIdle = 30 * time.Second

// aheadRacy is how old a split directory's change time must be for it to show any later change: a
// file system's timestamps come from a clock that may advance only once a tick (10 ms at HZ=100).
const aheadRacy = 20 * time.Millisecond

// builtAhead is the byte a sandbox built ahead writes on its socket once it waits for its call.
const builtAhead = 'b'

// staleLine is the first report line of a call its sandbox built ahead could not take (see
// aheadSandbox.fits), in place of "pid N": the host sends it the usual way.
const staleLine = "stale"

// errStale says a call was not taken by a sandbox built ahead; nothing of it ran.
var errStale = errors.New("the sandbox built ahead does not fit the call")

// fileID is a file's device and inode number; zero for a path that does not exist.
type fileID struct{ Dev, Ino uint64 }

// aheadKey is what must be equal between the plan of a call and the plan a sandbox was built ahead
// for: e without what only the program's start reads (zcall.run, programFor) and without the
// call's own descriptors, deadline and files.
func aheadKey(e envelope) []byte {
	k := envelope{Protocol: e.Protocol, Plan: e.Plan, UserNS: e.UserNS, HostUmask: e.HostUmask}
	k.Plan.Args, k.Plan.Env, k.Plan.Timeout = nil, nil, 0
	k.Plan.Limits = isolation.Limits{TmpfsBytes: e.Plan.Limits.TmpfsBytes}
	return encodeEnvelope(k)
}

// planFiles looks at every path of p's path lists (pathLists order) as openPlan resolves them,
// through no symbolic link but a final one: the files a sandbox built now would be built from
// (zero for a path that does not resolve so).
func planFiles(p isolation.Plan) []fileID {
	return filesOf(&p, func(path string) (unix.Stat_t, bool) {
		st, err := statNoSymlinks(path)
		return st, err == nil
	})
}

// statNoSymlinks is the stat of path resolved as openNoSymlinks resolves it.
func statNoSymlinks(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openNoSymlinks(path)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	err = unix.Fstat(fd, &st)
	return st, err
}

// ids returns the files openPlan resolved for p's path lists, as planFiles gives them.
func (t *pathTable) ids(p *isolation.Plan) []fileID {
	return filesOf(p, func(path string) (unix.Stat_t, bool) {
		st, ok := t.st[path]
		return st, ok
	})
}

// filesOf is the file look finds for each path of p's path lists (pathLists order); zero where
// it finds none.
func filesOf(p *isolation.Plan, look func(path string) (unix.Stat_t, bool)) []fileID {
	var out []fileID
	for _, list := range pathLists(p) {
		for _, path := range *list {
			var id fileID
			if st, ok := look(path); ok {
				id = fileID{Dev: st.Dev, Ino: st.Ino}
			}
			out = append(out, id)
		}
	}
	return out
}

// aheadSandbox is what a sandbox built ahead was built from, to compare with its call's.
type aheadSandbox struct {
	key   []byte   // aheadKey of the plan
	files []fileID // the files of its paths
	// split are the directories listed to split Landlock grants, as the host looks at them.
	split []aheadSplit
	// own is a descriptor of the thread's mount table, opened before the thread was confined;
	// ownText is the table once the sandbox was built.
	own     int
	ownText []byte
	// unfinished is set until finish: build closes an unfinished one when it fails.
	unfinished bool
}

// aheadSplit is a directory a sandbox built ahead listed to split a Landlock grant, as it was
// before it was listed: the host compares it when the call comes.
type aheadSplit struct {
	Path         string
	Dev, Ino     uint64
	Ctime, Mtime unix.Timespec
}

// same reports whether st is still the directory a was.
func (a aheadSplit) same(st *unix.Stat_t) bool {
	return st.Dev == a.Dev && st.Ino == a.Ino && st.Ctim == a.Ctime && st.Mtim == a.Mtime
}

// newAheadSandbox starts the record of a sandbox built ahead for e, whose paths openPlan resolved
// as paths; it has paths keep the directories split for Landlock.
func newAheadSandbox(e envelope, paths *pathTable) *aheadSandbox {
	paths.keepSplit = true
	return &aheadSandbox{key: aheadKey(e), files: paths.ids(&e.Plan), own: -1, unfinished: true}
}

// openTable opens the thread's mount table through proc, the zygote's directory in the host's
// procfs.
func (b *aheadSandbox) openTable(proc int) error {
	var err error
	b.own, err = unix.Openat(proc, "task/"+strconv.Itoa(unix.Gettid())+"/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	return err
}

// finish completes the record once the thread is confined: the split directories, which must not
// have changed since they were resolved (one whose change time is too recent to show a later
// change is listed again once it is not, and must list the same names), and the sandbox's mount
// table.
func (b *aheadSandbox) finish(paths *pathTable) error {
	split := paths.split
	paths.split = nil
	defer closeSplit(&split)
	var racy []splitDir
	var wait time.Duration
	for _, d := range split {
		if strings.HasPrefix(d.key, ownView) {
			// The host cannot look at the sandbox's own paths.
			return errors.New("a directory of the sandbox's own is split for Landlock")
		}
		var st unix.Stat_t
		if err := unix.Fstat(d.fd, &st); err != nil {
			return err
		}
		if !sameStamp(&st, &d.st) {
			return errors.New("a directory split for Landlock changed while it was read")
		}
		if age := time.Since(time.Unix(st.Ctim.Unix())); age < aheadRacy {
			racy, wait = append(racy, d), max(wait, aheadRacy-age)
		}
	}
	if len(racy) > 0 {
		time.Sleep(wait)
		for _, d := range racy {
			var st unix.Stat_t
			names, err := readDirNames(d.fd)
			if err != nil || unix.Fstat(d.fd, &st) != nil || !sameStamp(&st, &d.st) || !sameNames(names, d.names) {
				return errors.New("a directory split for Landlock changed while it was read")
			}
		}
	}
	for _, d := range split {
		b.split = append(b.split, aheadSplit{Path: d.key, Dev: d.st.Dev, Ino: d.st.Ino, Ctime: d.st.Ctim, Mtime: d.st.Mtim})
	}
	text, err := rereadFD(b.own, nil)
	if err != nil {
		return err
	}
	b.ownText = text
	b.unfinished = false
	return nil
}

// fits reports whether the call of e may run in the sandbox built ahead (see the top of this
// file; the host compares its mount table and the split directories). It touches no file system
// of the plan's.
func (b *aheadSandbox) fits(e envelope) bool {
	if !bytes.Equal(aheadKey(e), b.key) || !slices.Equal(e.Files, b.files) {
		return false
	}
	own, err := rereadFD(b.own, nil)
	return err == nil && bytes.Equal(own, b.ownText)
}

// ready is the message that says the sandbox waits for its call: builtAhead and the split
// directories.
func (b *aheadSandbox) ready() ([]byte, error) {
	split, err := json.Marshal(b.split)
	return append([]byte{builtAhead}, split...), err
}

// close closes the record's descriptor.
func (b *aheadSandbox) close() {
	closeFD(&b.own)
}

// tableIs reports whether the host's mount table still reads t, read on another thread of the
// zygote's: the calling thread may be in a call's cgroup namespace, which shows the cgroup mounts'
// roots otherwise.
func (z *zserver) tableIs(t []byte) bool {
	same := make(chan bool, 1)
	go func() {
		now, err := z.table()
		same <- err == nil && bytes.Equal(now, t)
	}()
	return <-same
}

// sameNames reports whether a and b hold the same names, in any order.
func sameNames(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// sameStamp reports whether a and b are the same file with the same change and modification times.
func sameStamp(a, b *unix.Stat_t) bool {
	return sameFile(a, b) && a.Ctim == b.Ctim && a.Mtim == b.Mtim
}

// splitSame reports whether every directory of split is still the one the sandbox listed.
func splitSame(split []aheadSplit) bool {
	for _, d := range split {
		st, err := statNoSymlinks(d.Path)
		if err != nil || !d.same(&st) {
			return false
		}
	}
	return true
}

// serveAhead builds, on c's prepared thread, the sandbox of the plan c.plan carries, says so on
// c.conn and waits there, at most aheadIdle, for the call to run in it: a request as on the
// zygote's socket. The call runs when the sandbox fits it (aheadSandbox.fits); else its report
// says staleLine. hostTable is the host's mount table the thread copied. A build that fails says
// nothing: the call is built the usual way, and its build says what failed.
func (c *zcall) serveAhead(hostTable []byte) {
	defer c.finish()
	// No host waits for a sandbox built ahead until it takes its call: the zygote may end
	// without it (one stuck in the kernel while it is built would keep the zygote forever).
	c.z.release(c)
	e, err := readPlan(c.plan)
	c.plan = -1 // readPlan closed it
	if err != nil {
		return
	}
	code := exitFailure
	b, _, err := c.build(e, true, &code)
	if err != nil {
		return
	}
	defer b.close()
	null := c.stdin // the sandbox's /dev/null, for a call without input
	c.stdin = -1
	defer closeFD(&null)
	conn := c.conn
	c.conn = -1
	defer unix.Close(conn)
	timeout := unix.NsecToTimeval(zygoteIdle.Nanoseconds())
	if unix.SetsockoptTimeval(conn, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &timeout) != nil {
		return
	}
	msg, err := b.ready()
	if err != nil {
		return
	}
	if _, err := unix.Write(conn, msg); err != nil {
		return
	}
	var req *zcall
	for waited := time.Duration(0); req == nil; waited += zygoteIdle {
		r, st := receiveRequest(conn, false)
		switch {
		case st == received:
			req = r
		case st == closed || waited+zygoteIdle >= aheadIdle || !c.z.tableIs(hostTable):
			return
		}
	}
	c.take(req)
	if c.stdin < 0 {
		c.stdin, null = null, -1
	}
	code = exitFailure
	call, err := readPlan(c.plan)
	c.plan = -1
	if err != nil || !b.fits(call) {
		c.line(staleLine)
		return
	}
	c.z.retain(c)
	c.hostDone = make(chan struct{})
	go c.watch(c.report, call.Deadline)
	c.line("pid " + strconv.Itoa(c.pid1))
	step, err := c.run(call, &code)
	c.report1(step, err, code)
}

// zygoteBuildsAhead reports whether the zygote builds sandboxes ahead for calls of the prepared
// plan p (see the top of this file).
func zygoteBuildsAhead(p isolation.Plan) bool {
	return zygoteServes(p) && !p.Egress
}

// zygoteAhead is how many sandboxes a zygote keeps built ahead (each for another plan).
const zygoteAhead = 2

// aheadRecent is how many of the last calls' plans a zygote remembers: a call whose plan is that
// of another of them has the next sandbox for that plan built ahead.
const aheadRecent = 4

// aheadSandboxes are the host's ends of the sandboxes a zygote builds ahead and the keys of the
// last calls' plans (under zygote.mu), and how many of its calls were taken and have not ended.
type aheadSandboxes struct {
	built   []*aheadConn
	recent  []string
	closed  bool // closeAhead ran: no more are asked for
	taken   atomic.Int64
	running atomic.Int64
}

// aheadPause is how long the zygote must have had no call before it builds a sandbox ahead: calls
// back to back would gain nothing on two cores (the next call starts while it is built, and
// competes with it for the CPU), an agent's calls come after its model's turn.
const aheadPause = 10 * time.Millisecond

// callStarted records that the zygote took a call of the plan of key.
func (z *zygote) callStarted(key string) {
	z.ahead.taken.Add(1)
	z.ahead.running.Add(1)
	z.mu.Lock()
	defer z.mu.Unlock()
	z.ahead.recent = append(z.ahead.recent, key)
	if len(z.ahead.recent) > aheadRecent {
		z.ahead.recent = slices.Delete(z.ahead.recent, 0, 1)
	}
}

// callEnded records the end of a call, and, when ahead is set (its end was reported and its plan
// can be built ahead; key and env are its aheadKey and envelope), has the next sandbox for its plan
// built once the zygote had no call for aheadPause.
func (z *zygote) callEnded(ahead bool, key string, env envelope) {
	if z.ahead.running.Add(-1) != 0 || !ahead {
		return
	}
	taken := z.ahead.taken.Load()
	time.AfterFunc(aheadPause, func() {
		if z.ahead.taken.Load() == taken && z.ahead.running.Load() == 0 {
			z.buildAhead(key, env)
		}
	})
}

// aheadConn is the host's end of the socket of one sandbox built ahead.
type aheadConn struct {
	fd    int
	key   string    // aheadKey of its plan
	at    time.Time // when it was asked for
	table []byte    // the host's mount table then
	drop  *time.Timer
}

// takeAhead sends the call of p (env, key its aheadKey) to a sandbox built ahead for its plan,
// when one is ready. It returns errStale when there is none or it did not take the call (the
// caller sends it the usual way); otherwise it is as request.
func (z *zygote) takeAhead(key string, p isolation.Plan, env envelope, stdin bool, group *cgroup.Group, gate func() error) (*Cmd, *Stdio, error) {
	fd := z.readyAhead(key)
	if fd < 0 {
		return nil, nil, errStale
	}
	defer unix.Close(fd)
	env.Files = planFiles(p)
	return z.request(fd, true, env, stdin, group, gate)
}

// readyAhead returns the host's end of a sandbox built ahead for the plan of key, which is waiting
// for its call and still fits what the host sees (its mount table, the split directories), or -1;
// the sandbox is then no longer the zygote's to give. One still being built is left for a later
// call: the call is not made to wait for it (a build can hang on a file system that does not
// answer).
func (z *zygote) readyAhead(key string) int {
	z.mu.Lock()
	i := slices.IndexFunc(z.ahead.built, func(a *aheadConn) bool { return a.key == key })
	if i < 0 {
		z.mu.Unlock()
		return -1
	}
	a := z.ahead.built[i]
	z.ahead.built = slices.Delete(z.ahead.built, i, i+1)
	z.mu.Unlock()
	buf := make([]byte, 16<<10)
	n, _, err := unix.Recvfrom(a.fd, buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
	fresh := time.Since(a.at) < aheadIdle
	if errors.Is(err, unix.EAGAIN) && fresh {
		z.mu.Lock()
		z.ahead.built = append(z.ahead.built, a)
		z.mu.Unlock()
		return -1
	}
	z.letGo(a, err)
	var split []aheadSplit
	if err != nil || n < 1 || n > len(buf) || buf[0] != builtAhead || !fresh || json.Unmarshal(buf[1:n], &split) != nil {
		unix.Close(a.fd)
		return -1
	}
	if table, err := mountTableNow(); err != nil || !bytes.Equal(table, a.table) || !splitSame(split) {
		unix.Close(a.fd)
		return -1
	}
	return a.fd
}

// letGo stops a's timer once it is no longer in the list; recvErr is what a look at its socket
// found: a sandbox still being built then (EAGAIN: stuck, or slower than aheadIdle) counts as a
// call the zygote abandoned (its thread may hang in the kernel for good).
func (z *zygote) letGo(a *aheadConn, recvErr error) {
	a.drop.Stop()
	if errors.Is(recvErr, unix.EAGAIN) {
		z.abandon()
	}
}

// building reports whether the sandbox of a has not said yet that it is ready (nor ended).
func (a *aheadConn) building() bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(a.fd, b[:], unix.MSG_DONTWAIT|unix.MSG_PEEK)
	return errors.Is(err, unix.EAGAIN)
}

// buildAhead asks the zygote to build a sandbox ahead for the next call of env's plan (key its
// aheadKey), when two of the last calls had that plan and none is built for it yet (see
// callEnded).
func (z *zygote) buildAhead(key string, env envelope) {
	z.mu.Lock()
	n := 0
	for _, k := range z.ahead.recent {
		if k == key {
			n++
		}
	}
	repeated := n >= 2
	has := slices.ContainsFunc(z.ahead.built, func(a *aheadConn) bool { return a.key == key })
	// One at a time is built: a build stuck in the kernel does not have others pile up behind it.
	building := slices.ContainsFunc(z.ahead.built, (*aheadConn).building)
	closed := z.ahead.closed
	z.mu.Unlock()
	if !repeated || has || building || closed {
		return
	}
	table, err := mountTableNow()
	if err != nil {
		return
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return
	}
	fd := pair[0]
	defer unix.Close(pair[1])
	env.Files = nil
	planR, err := writePlan(env)
	if err != nil {
		unix.Close(fd)
		return
	}
	defer planR.Close()
	body, _ := json.Marshal(zygoteHeader{Build: true})
	if err := unix.Sendmsg(int(z.conn.Fd()), body, unix.UnixRights(int(planR.Fd()), pair[1]), nil, 0); err != nil {
		unix.Close(fd)
		return
	}
	a := &aheadConn{fd: fd, key: key, at: time.Now(), table: table}
	// Unused by then, it has ended: its end is closed here too.
	a.drop = time.AfterFunc(aheadIdle, func() { z.dropAhead(a) })
	z.mu.Lock()
	if z.ahead.closed {
		z.mu.Unlock()
		a.drop.Stop()
		unix.Close(fd)
		return
	}
	z.ahead.built = append(z.ahead.built, a)
	var evicted []*aheadConn
	if len(z.ahead.built) > zygoteAhead {
		evicted = slices.Clone(z.ahead.built[:len(z.ahead.built)-zygoteAhead])
		z.ahead.built = slices.Delete(z.ahead.built, 0, len(evicted))
	}
	z.mu.Unlock()
	for _, a := range evicted {
		z.closeConn(a)
	}
}

// closeConn lets go of a, no longer in the list, and closes its end: its sandbox ends.
func (z *zygote) closeConn(a *aheadConn) {
	var stuck error
	if a.building() {
		stuck = unix.EAGAIN
	}
	z.letGo(a, stuck)
	unix.Close(a.fd)
}

// dropAhead closes the host's end of a, unless a call took it or it was closed already.
func (z *zygote) dropAhead(a *aheadConn) {
	z.mu.Lock()
	i := slices.Index(z.ahead.built, a)
	if i >= 0 {
		z.ahead.built = slices.Delete(z.ahead.built, i, i+1)
	}
	z.mu.Unlock()
	if i >= 0 {
		z.closeConn(a)
	}
}

// closeAhead closes the host's ends of the sandboxes built ahead, and asks for none any more:
// each ends unused.
func (z *zygote) closeAhead() {
	z.mu.Lock()
	built := z.ahead.built
	z.ahead.built, z.ahead.closed = nil, true
	z.mu.Unlock()
	for _, a := range built {
		a.drop.Stop()
		unix.Close(a.fd)
	}
}

// mountTableNow reads this process's mount table (the zygote's: it shares the host's mount
// namespace).
func mountTableNow() ([]byte, error) {
	return kernfile.AppendAt(nil, unix.AT_FDCWD, "/proc/self/mountinfo")
}
