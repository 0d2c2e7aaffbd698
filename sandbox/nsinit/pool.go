package nsinit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clihost/clihost/internal/filestamp"
	"github.com/clihost/clihost/internal/kernfile"

	"github.com/clihost/clihost/internal/spawn"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// A Pool keeps sandbox inits started ahead of their calls, so that a call does not wait for a Go
// executable to start and for its namespaces to be made. Each init is started exactly as Command
// starts one, runs prepareNamespaces (private mounts, /proc, /dev, hostname, loopback) and then
// blocks reading its plan; Take hands one to a call, writes the call's plan, and the init goes on
// as a cold one would: it resolves the plan's paths, builds the rest of the mount namespace,
// confines itself and execs the program. An init serves one call and is never reused.
//
// The pool is bounded (PoolConfig.Max) and adapts to the call rate: a Take that finds it empty
// starts the call cold and raises the number of inits kept ready, up to Max; a pool not taken from
// for PoolConfig.Idle keeps one fewer, down to one. A background goroutine refills it.
//
// What an init fixed when it started must still hold when it is taken, or it is discarded and the
// call starts cold: the executable it was started from (UseHelper, or the file replaced on disk),
// and the host's mount table (an init's mount namespace is a copy made when it started: a mount
// or unmount, a remount, a move or a change of propagation on the host since then, seen by
// comparing /proc/self/mountinfo at each Take and once a second, see mountTable, empties the pool,
// which also lets an unmounted file system go). Inits that die while waiting (a host that cannot build
// the sandbox) are discarded, and after repeated failures the pool stops starting inits for a
// while, so a broken host does not spin.
type Pool struct {
	cfg  PoolConfig
	root bool

	mu          sync.Mutex
	idle        []*warmInit
	target      int // inits kept ready
	starting    int
	closed      bool
	lastTake    time.Time
	failures    int        // inits that died before being taken, in a row
	pauseTo     time.Time  // no new inits before this, after repeated failures
	mounts      mountTable // reads the host's mount table
	stats       PoolStats
	zyg         *zygote   // serves the calls it can (zygoteServes); nil when off, unsupported or gone
	zygErr      error     // why there is no zygote
	zygRetry    time.Time // when a zygote that died may be started again
	zygStarting bool
	slots       []*cgroup.Group // control groups made ahead for the zygote's calls (MakeV1, slotLimits)
	// slotLimits are the limits of the last zygote call that had some (most calls have the
	// daemon's defaults): the slots made after it are made with them, so that a call with the
	// same limits does not write them on its path. nil: none yet.
	slotLimits *cgroup.Limits
	// kept are the control groups of the zygote's calls that ended, kept for the next call of the
	// same caller, uid and limits (keepGroup): that call neither makes a group nor has one removed.
	kept      map[keptKey][]*cgroup.Group
	keptCount int

	wake chan struct{}
	done chan struct{}
	wg   sync.WaitGroup // the refiller and the discards in flight
}

// PoolConfig bounds a Pool.
type PoolConfig struct {
	// Max is the most inits kept ready; 0 means DefaultPoolMax.
	Max int
	// Idle is how long the pool goes without a Take before it keeps one init fewer; 0 means one
	// minute.
	Idle time.Duration
	// NoZygote keeps the zygote off: every call takes an init (see zygote_serve.go).
	NoZygote bool
}

// DefaultPoolMax is the default bound of a Pool: two inits per CPU, at most 8.
func DefaultPoolMax() int { return min(2*runtime.NumCPU(), 8) }

// PoolStats counts what a Pool did.
type PoolStats struct {
	Hits      int64 // calls that took a ready init
	Misses    int64 // calls that found none ready and started cold
	Started   int64 // inits started
	Discarded int64 // inits discarded unused (stale, dead, or at Close)
	Ready     int   // inits ready now
	Target    int   // inits the pool keeps ready now
	Zygote    int64 // calls the zygote served (neither a hit nor a miss)
	// ZygoteAhead counts those of them that ran in a sandbox the zygote built ahead for their plan.
	ZygoteAhead int64
	// GroupsReused counts the zygote's calls given the control group an earlier call of theirs
	// left (keepGroup).
	GroupsReused int64
	ZygoteUp     bool // a zygote runs now and takes calls
	// ZygoteErr says why no zygote serves calls ("" when one does, or is off).
	ZygoteErr string
}

// warmInit is one started init waiting for its plan, with the host's ends of its descriptors.
type warmInit struct {
	cmd    *exec.Cmd
	planW  *os.File // the plan pipe's write end: the init reads until it is closed
	report *os.File // the report pipe's read end (the lifeline)
	egress *egressConn
	stdin  *os.File // write end of the init's standard input
	stdout *os.File // read ends of its standard output and error
	stderr *os.File
	group  *cgroup.Group   // its cgroup slot (a v2 group it was cloned into), or nil
	exe    filestamp.Stamp // the executable it was started from
	table  []byte          // the host's mount table when it was started (see startInit)
	// cgroupFDs are the init's descriptors of its group's v1 tasks files (made when it started).
	cgroupFDs []int
}

// NewPool returns a Pool and starts filling it in the background. Start it after SetOwner (an init
// carries the owner tag of its start) and UseHelper (a later change discards the inits already
// started), on a host where Check succeeds. Close it when done: it kills the inits still waiting.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Max <= 0 {
		cfg.Max = DefaultPoolMax()
	}
	if cfg.Idle <= 0 {
		cfg.Idle = time.Minute
	}
	p := &Pool{cfg: cfg, root: os.Geteuid() == 0, target: 1, lastTake: time.Now(),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	p.wg.Add(1)
	go p.refill()
	return p
}

// Close kills the inits waiting in the pool and waits until they are gone. Takes after Close start
// every call cold.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	close(p.done)
	for _, w := range idle {
		p.discard(w)
	}
	p.wg.Wait()
	p.mu.Lock()
	z, slots := p.zyg, p.slots
	p.zyg, p.slots = nil, nil
	for _, groups := range p.kept {
		slots = append(slots, groups...)
	}
	p.kept, p.keptCount = nil, 0
	p.mu.Unlock()
	for _, g := range slots {
		_ = g.Remove()
	}
	if z != nil {
		z.close() // once the calls it serves have ended
	}
}

// Done returns a channel closed when the pool is closed.
func (p *Pool) Done() <-chan struct{} { return p.done }

// Stats reports what the pool did so far and holds now.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Ready, s.Target = len(p.idle), p.target
	s.ZygoteUp = p.zyg != nil
	if p.zygErr != nil {
		s.ZygoteErr = p.zygErr.Error()
	}
	return s
}

// Groups names the control groups made ahead of calls: those of the inits waiting in the pool
// (cgroup v2 slots; none on cgroup v1, where a call's groups are made when it is taken) and those
// kept for the zygote's calls, as cgroup.Manager.Live names them.
func (p *Pool) Groups() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, w := range p.idle {
		if w.group != nil {
			out = append(out, w.group.Name())
		}
	}
	for _, g := range p.slots {
		out = append(out, g.Name())
	}
	for _, groups := range p.kept {
		for _, g := range groups {
			out = append(out, g.Name())
		}
	}
	return out
}

// Stdio is the host's ends of a pooled init's standard streams: write the program's input to In
// and close it (nil when Take was told there is none: the program reads /dev/null), read its
// output from Out and Err until end of file.
type Stdio struct {
	In       *os.File
	Out, Err *os.File
}

// Take starts p's program in an init from the pool: it checks and resolves the plan as Command
// does (an invalid plan is an error), writes it to a ready init and returns that init's Cmd,
// already started, with the host's ends of its standard streams (stdin: whether the program gets
// input on a pipe, else /dev/null). It returns a nil Cmd and no error when the pool has no init
// that can serve this plan (none ready, the plan has Ingress, a memory limit below what a waiting
// init holds, an init that could not take the call's limits, the pool is closed): start the call
// with Command then. The caller goes on as after Start: CloseChildEnds is not needed; Listeners
// (with Egress), Wait, Failure, Exhausted and Release are.
//
// gate, when not nil, is what must happen before the program starts. The zygote builds the
// sandbox while Take runs gate, and starts the program once gate returned nil; an init gets its
// plan only after gate returned. An error from gate is Take's, and the program never ran. Take
// may run gate and still return no Cmd (the call then starts cold): the caller must not run it
// twice (runner wraps it in sync.OnceValue).
func (p *Pool) Take(plan isolation.Plan, stdin bool, gate func() error) (*Cmd, *Stdio, error) {
	prepared, err := prepare(plan, p.root)
	if err != nil {
		return nil, nil, err
	}
	if z := p.zygote(); z != nil && zygoteServes(prepared) {
		var slot *cgroup.Group
		key := keptKey{caller: prepared.NetworkKey, uid: prepared.UID, limits: groupLimits(prepared.Limits)}
		reused := false
		if cgroupLimits(prepared.Limits) {
			slot, reused = p.slot(key)
		}
		cmd, stdio, err := z.take(prepared, stdin, slot, gate)
		if cmd != nil || err != nil {
			p.mu.Lock()
			p.stats.Zygote++
			if cmd != nil && cmd.ahead {
				p.stats.ZygoteAhead++
			}
			if cmd != nil && reused {
				p.stats.GroupsReused++
			}
			p.mu.Unlock()
			if cmd != nil && cmd.group != nil {
				cmd.keep = func(g *cgroup.Group) bool { return p.keepGroup(key, g) }
			}
			return cmd, stdio, err
		}
		// The zygote is gone (before it got the request: gate did not run); the refiller starts
		// another.
	}
	if gate != nil {
		if err := gate(); err != nil {
			return nil, nil, err
		}
	}
	if len(prepared.Ingress) > 0 {
		return nil, nil, nil
	}
	w := p.pop() // never a dead or stale one
	if w == nil {
		return nil, nil, nil
	}
	if !w.fits(prepared.Limits) {
		p.putBack(w) // the call's memory limit is below what the waiting init holds: start it cold
		p.count(false)
		return nil, nil, nil
	}
	data, err := p.encode(w, prepared, stdin)
	if err != nil {
		// What is wrong with the plan (its size) is the call's error; the init is untouched.
		p.putBack(w)
		return nil, nil, err
	}
	cmd, stdio, err := p.give(w, prepared, stdin, data)
	if err != nil {
		// The call's limits were written: what failed may be theirs (a limit the kernel enforced
		// on the init). The call starts cold; neither another init nor the pool pays for it.
		p.discard(w)
		p.count(false)
		return nil, nil, nil
	}
	p.count(true)
	return cmd, stdio, nil
}

// zygote returns the pool's zygote while it is alive (nil otherwise: one that died or whose
// executable changed is dropped, and the refiller starts another).
func (p *Pool) zygote() *zygote {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.zyg != nil && !p.zyg.alive() {
		go p.zyg.close()
		p.zyg, p.zygRetry = nil, time.Now().Add(time.Second) // not in a loop, if it keeps dying
		p.kick()
	}
	return p.zyg
}

// zygoteSlots is how many control groups a pool with a zygote keeps made ahead of calls.
const zygoteSlots = 2

// keptKey is whose calls a kept control group may serve (Pool.keepGroup): the caller
// (isolation.Plan.NetworkKey: the control socket's user or the MCP agent), the uid the call runs
// as, and its limits. A group never serves another caller: the file pages its last call left
// charged to it show in its memory.stat.
type keptKey struct {
	caller string
	uid    int
	limits cgroup.Limits
}

// The bounds of the kept groups: all of them, and per keptKey (a caller's calls at once each end
// with a group; more than a few are not needed again soon).
const (
	maxKeptGroups = 8
	maxKeptPerKey = 2
)

// slot returns a control group for a zygote call of key: one an earlier call of key left
// (reused true), else one made ahead with the key's limits, or nil when none is ready (the call
// then makes its own); the refiller makes another, with those limits.
func (p *Pool) slot(key keptKey) (g *cgroup.Group, reused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if groups := p.kept[key]; len(groups) > 0 {
		g = groups[len(groups)-1]
		if p.kept[key] = groups[:len(groups)-1]; len(p.kept[key]) == 0 {
			delete(p.kept, key)
		}
		p.keptCount--
		return g, true
	}
	l := key.limits
	p.slotLimits = &l
	p.kick() // whether or not one was ready: the refiller makes the next before the next call
	if len(p.slots) == 0 {
		return nil, false
	}
	g = p.slots[len(p.slots)-1]
	p.slots = p.slots[:len(p.slots)-1]
	return g, false
}

// keepGroup keeps g, the control group of a zygote call of key that ended and that cgroup.Reuse
// readied for another call, for the next call of key (slot), and reports whether it did: not when
// the pool is closed or holds as many as its bounds allow (the caller then removes g).
func (p *Pool) keepGroup(key keptKey, g *cgroup.Group) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.keptCount >= maxKeptGroups || len(p.kept[key]) >= maxKeptPerKey {
		return false
	}
	if p.kept == nil {
		p.kept = map[keptKey][]*cgroup.Group{}
	}
	p.kept[key] = append(p.kept[key], g)
	p.keptCount++
	return true
}

// fillSlots makes control groups until zygoteSlots are ready, while the pool has a zygote.
func (p *Pool) fillSlots() {
	for {
		p.mu.Lock()
		want := p.zyg != nil && !p.closed && len(p.slots) < zygoteSlots
		limits := p.slotLimits
		p.mu.Unlock()
		if !want {
			return
		}
		g, err := cgroup.Default().NewSlot()
		if err == nil && g != nil {
			err = g.MakeV1()
		}
		if err == nil && g != nil && limits != nil {
			err = g.Apply(*limits)
		}
		if err != nil || g == nil {
			_ = g.Remove()
			return // no cgroups, or none to be had now: calls make their own
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = g.Remove()
			return
		}
		p.slots = append(p.slots, g)
		p.mu.Unlock()
	}
}

// startZygote starts the pool's zygote when the pool may have one and there is
// none (and none died in the last minute). A host whose kernel cannot run one keeps the reason
// (PoolStats.ZygoteErr) and never tries again.
func (p *Pool) startZygote() {
	p.mu.Lock()
	want := !p.cfg.NoZygote && p.zyg == nil && !p.zygStarting && !p.closed &&
		!errors.Is(p.zygErr, ErrUnavailable) && time.Now().After(p.zygRetry)
	if want {
		p.zygStarting = true
	}
	p.mu.Unlock()
	if !want {
		return
	}
	z, err := startZygote(p.root)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.zygStarting = false
	switch {
	case err != nil:
		p.zygErr, p.zygRetry = err, time.Now().Add(time.Minute)
	case p.closed || p.zyg != nil:
		go z.close()
	default:
		p.zyg, p.zygErr = z, nil
	}
}

// count records a Take that found a ready init: served by it (a hit; an init served its call, so
// the failures "in a row" start again), or started cold after all (a miss that a bigger pool
// would not have avoided: the target stays).
func (p *Pool) count(served bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if served {
		p.stats.Hits++
		p.failures = 0
	} else {
		p.stats.Misses++
	}
}

// fits reports whether the call's memory limit l leaves room for what the waiting init already
// holds in its cgroup v2 group (on v1 it joins its groups with its plan, and they are empty until
// then): a limit below that would have the kernel kill the init as the limit is written.
func (w *warmInit) fits(l isolation.Limits) bool {
	if l.MemoryBytes <= 0 || w.group == nil {
		return true
	}
	used, ok := w.group.MemoryCurrent()
	return !ok || l.MemoryBytes > 2*used
}

// putBack returns an init Take did not use to the front of the pool.
func (p *Pool) putBack(w *warmInit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		go p.discard(w)
		return
	}
	p.idle = append([]*warmInit{w}, p.idle...)
}

// pop takes the oldest ready init that is still usable, or returns nil (a miss: the pool then
// aims to keep one more ready). Stale inits found on the way are discarded.
func (p *Pool) pop() *warmInit {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	var stale []*warmInit
	table, exe := p.host()
	var w *warmInit
	for len(p.idle) > 0 && w == nil {
		w, p.idle = p.idle[0], p.idle[1:]
		if !w.current(table, exe) || spawn.Exited(w.cmd.Process.Pid) {
			stale = append(stale, w)
			w = nil
		}
	}
	p.lastTake = time.Now()
	if w == nil {
		p.stats.Misses++
		p.target = min(p.target+1, p.cfg.Max)
	}
	p.mu.Unlock()
	for _, s := range stale {
		p.discard(s)
	}
	p.kick()
	return w
}

// encode is the envelope of the prepared plan for w: the plan, its deadline, and what an init
// started for the call would inherit from the host now (umask, resource limits). An error leaves w
// as it was.
func (p *Pool) encode(w *warmInit, prepared isolation.Plan, stdin bool) ([]byte, error) {
	env, err := pooledEnvelope(prepared, stdin)
	if err != nil {
		return nil, err
	}
	env.UserNS, env.CgroupFDs = !p.root, w.cgroupFDs
	data := encodeEnvelope(env)
	if len(data) > maxPlanSize {
		return nil, fmt.Errorf("nsinit: plan is %d bytes, more than %d", len(data), maxPlanSize)
	}
	return data, nil
}

// pooledEnvelope is the envelope of the prepared plan for a sandbox built ahead of its call (an
// init from the pool, or the zygote's thread): the plan, its deadline, and what a sandbox started
// for the call would inherit from the host now (umask, resource limits).
func pooledEnvelope(prepared isolation.Plan, stdin bool) (envelope, error) {
	deadline, err := deadlineFor(prepared.Timeout)
	if err != nil {
		return envelope{}, fmt.Errorf("nsinit: deadline: %w", err)
	}
	umask, err := hostUmask()
	if err != nil {
		return envelope{}, fmt.Errorf("nsinit: %w", err)
	}
	rlimits, err := hostRlimits()
	if err != nil {
		return envelope{}, fmt.Errorf("nsinit: %w", err)
	}
	return envelope{Protocol: planProtocol, Plan: prepared, Deadline: deadline, Pooled: true,
		StdinNull: !stdin, HostUmask: umask, HostRlimits: rlimits}, nil
}

// give hands w its call: the call's cgroup limits, then its encoded plan (data); it returns the
// Cmd the caller goes on with. On error the caller discards w.
func (p *Pool) give(w *warmInit, prepared isolation.Plan, stdin bool, data []byte) (*Cmd, *Stdio, error) {
	if err := w.applyLimits(prepared.Limits); err != nil {
		return nil, nil, err
	}
	if _, err := w.planW.Write(data); err != nil {
		return nil, nil, fmt.Errorf("nsinit: write plan: %w", err)
	}
	w.planW.Close()
	w.planW = nil
	io := &Stdio{In: w.stdin, Out: w.stdout, Err: w.stderr}
	if !stdin {
		w.stdin.Close()
		io.In = nil
	}
	egress := w.egress
	if !prepared.Egress {
		egress.close() // the init closes its end too
		egress = nil
	}
	egress.bound(prepared)
	return &Cmd{Cmd: w.cmd, report: w.report, egress: egress, group: w.group, limits: prepared.Limits}, io, nil
}

// applyLimits writes the call's cgroup limits l into w's groups, made when it started (the v2 group
// it was cloned into, the v1 groups its forking thread joins through the descriptors it has), when
// l has some.
func (w *warmInit) applyLimits(l isolation.Limits) error {
	if w.group == nil || !cgroupLimits(l) {
		return nil
	}
	if err := w.group.Apply(groupLimits(l)); err != nil {
		return fmt.Errorf("nsinit: %w", err)
	}
	return nil
}

// hostUmask reads this process's umask from /proc/self/status (setting it to read it back would
// change it for the other goroutines meanwhile).
func hostUmask() (int, error) {
	data, err := kernfile.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("umask: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return 0, fmt.Errorf("umask: %q: %w", v, err)
			}
			return int(n), nil
		}
	}
	return 0, errors.New("umask: not in /proc/self/status")
}

// host reads what a waiting init must still match: the host's mount table (nil when it cannot be
// read: then none matches) and the init executable. Called with p.mu held (the table is p.mounts'
// buffer).
func (p *Pool) host() (table []byte, exe filestamp.Stamp) {
	table, err := p.mounts.read()
	if err != nil {
		table = nil
	}
	exe, _ = filestamp.Path(executable())
	return table, exe
}

// current reports whether w still matches the host: started from exe, its mount namespace a copy
// of table.
func (w *warmInit) current(table []byte, exe filestamp.Stamp) bool {
	return table != nil && bytes.Equal(w.table, table) && w.exe == exe
}

// kick wakes the refiller.
func (p *Pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// noteFailure counts an init that died before serving a call; after three in a row the pool
// starts none for a minute.
func (p *Pool) noteFailure() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures++
	if p.failures >= 3 {
		p.pauseTo = time.Now().Add(time.Minute)
		p.failures = 0
	}
}

// refill keeps the pool at its target: it starts inits when it is woken (a Take) and, once a
// second, drops dead and stale inits and shrinks the target after PoolConfig.Idle without a Take.
func (p *Pool) refill() {
	defer p.wg.Done()
	p.wg.Go(p.startZygote)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-p.wake:
			p.wg.Go(p.startZygote)
		case <-tick.C:
			p.sweep()
			p.wg.Go(p.startZygote)
		}
		p.fillSlots()
		for p.wantMore() {
			w, err := p.startInit()
			p.mu.Lock()
			p.starting--
			if err == nil && !p.closed {
				p.idle = append(p.idle, w)
				p.stats.Started++
				p.mu.Unlock()
				continue
			}
			p.mu.Unlock()
			if w != nil {
				p.discard(w)
			}
			if err != nil && !errors.Is(err, errMountsChanged) {
				p.noteFailure()
				break
			}
		}
	}
}

// wantMore reports whether the refiller should start another init, and counts it as starting.
func (p *Pool) wantMore() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || time.Now().Before(p.pauseTo) || len(p.idle)+p.starting >= p.target {
		return false
	}
	p.starting++
	return true
}

// sweep discards the inits that died or went stale while waiting, and keeps one fewer ready after
// PoolConfig.Idle without a Take.
func (p *Pool) sweep() {
	p.mu.Lock()
	var drop []*warmInit
	table, exe := p.host()
	kept := p.idle[:0]
	dead := 0
	for _, w := range p.idle {
		switch {
		case spawn.Exited(w.cmd.Process.Pid):
			dead++
			drop = append(drop, w)
		case !w.current(table, exe):
			drop = append(drop, w)
		default:
			kept = append(kept, w)
		}
	}
	p.idle = kept
	if time.Since(p.lastTake) > p.cfg.Idle && p.target > 1 {
		p.target--
		p.lastTake = time.Now()
	}
	for len(p.idle) > p.target {
		drop = append(drop, p.idle[len(p.idle)-1])
		p.idle = p.idle[:len(p.idle)-1]
	}
	p.mu.Unlock()
	for _, w := range drop {
		p.discard(w)
	}
	for range dead {
		p.noteFailure()
	}
}

// discard kills an init that will serve no call, in the background: it waits for it, closes the
// host's ends and removes its cgroup slot.
func (p *Pool) discard(w *warmInit) {
	p.mu.Lock()
	p.stats.Discarded++
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		closeFiles([]*os.File{w.planW, w.report, w.stdin, w.stdout, w.stderr})
		w.egress.close()
		_ = w.group.Remove()
	}()
}

// startInit starts one init for the pool, as Command would start one for a call, but with its plan
// pipe kept open, its socket pair always made, pipes for its standard streams, and a cgroup slot
// (see cgroup.Manager.NewSlot) to be given the call's limits by Take.
func (p *Pool) startInit() (w *warmInit, err error) {
	w = &warmInit{}
	var childEnds []*os.File
	defer func() { closeFiles(childEnds) }()
	abort := func(what string, err error) (*warmInit, error) {
		closeFiles([]*os.File{w.planW, w.report, w.stdin, w.stdout, w.stderr})
		w.egress.close()
		_ = w.group.Remove()
		return nil, fmt.Errorf("nsinit: pool: %s: %w", what, err)
	}
	pipe := func(host **os.File, hostIsWrite bool) error {
		r, wr, err := os.Pipe()
		if err != nil {
			return err
		}
		if hostIsWrite {
			*host = wr
			childEnds = append(childEnds, r)
		} else {
			*host = r
			childEnds = append(childEnds, wr)
		}
		return nil
	}
	var planR, reportW, egressChild, inR, outW, errW *os.File
	steps := []struct {
		host      **os.File
		hostWrite bool
		child     **os.File
	}{{&w.planW, true, &planR}, {&w.report, false, &reportW}, {&w.stdin, true, &inR}, {&w.stdout, false, &outW}, {&w.stderr, false, &errW}}
	for _, s := range steps {
		if err := pipe(s.host, s.hostWrite); err != nil {
			return abort("pipe", err)
		}
		*s.child = childEnds[len(childEnds)-1]
	}
	if w.egress, egressChild, err = newEgressPair(); err != nil {
		return abort("socket pair", err)
	}
	childEnds = append(childEnds, egressChild)
	if w.group, err = cgroup.Default().NewSlot(); err == nil && w.group != nil {
		err = w.group.MakeV1()
	}
	if err != nil {
		return abort("cgroup", err)
	}
	cmd := initCommand(p.root)
	// A session of its own, without the daemon's controlling terminal, which the program could
	// otherwise open as /dev/tty (see startZygote). (Command's own callers choose: see Command.)
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid = false, true
	cmd.ExtraFiles = []*os.File{planR, reportW, egressChild, nil} // fd 6: no ingress
	if w.group != nil {
		// The v1 tasks files, at fds 7…: the init's forking thread joins them once it has its plan.
		for _, path := range w.group.TasksFiles() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return abort("cgroup", err)
			}
			childEnds = append(childEnds, f)
			w.cgroupFDs = append(w.cgroupFDs, 3+len(cmd.ExtraFiles))
			cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if w.group != nil && w.group.V2Dir() != "" {
		dir := w.group.V2Dir()
		f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return abort("cgroup", err)
		}
		childEnds = append(childEnds, f)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(f.Fd())
	}
	w.exe, _ = filestamp.Path(cmd.Path)
	// The init's mount namespace is a copy of the table at its clone: read the table before and
	// after, and keep the init only if both agree (a mount made and undone in between could be in
	// the copy), so that Take can tell the init's copy from the host's table then.
	p.mu.Lock()
	before, err := p.mounts.read()
	before = bytes.Clone(before)
	p.mu.Unlock()
	if err != nil {
		return abort("mount table", err)
	}
	if err := spawn.Start(cmd); err != nil {
		return abort("start", errors.Join(ErrUnavailable, err))
	}
	w.cmd = cmd
	p.mu.Lock()
	after, err := p.mounts.read()
	same := err == nil && bytes.Equal(before, after)
	p.mu.Unlock()
	if !same {
		return w, errMountsChanged
	}
	w.table = before
	return w, nil
}

// errMountsChanged is startInit's answer when the host's mount table changed while it started an
// init: the init is discarded, and the refiller starts another.
var errMountsChanged = errors.New("nsinit: pool: the mount table changed while an init started")
