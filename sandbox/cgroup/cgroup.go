// Package cgroup puts each sandboxed call into its own control groups, limits them (memory without
// swap, processes, CPU time accounting), tells afterwards which limit the call hit, kills
// everything in them at once and removes them.
//
// Hosts differ. A daemon that owns a delegated cgroup v2 subtree (systemd's Delegate=yes) gets
// cgroup v2 for every controller the subtree offers; a host with the legacy or hybrid hierarchy
// (cgroup v1 controllers under /sys/fs/cgroup/<controller>, the unified mount carrying few or
// no controllers) gets cgroup v1 for the controllers mounted there, as long as the daemon may
// create groups in them (root). Detection is per controller (Manager.Mechanism); a controller
// neither offers is not enforced by cgroup, and the caller falls back to rlimits.
//
// Call groups are created as children of the daemon's own group (per controller on v1), named
// "clihost-<daemon pid>-<n>", so that Reap can tell the groups of a daemon that is gone from those
// of a live one sharing the same parent.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clihost/clihost/internal/kernfile"
	"golang.org/x/sys/unix"
)

// Mechanism says what enforces a limit.
type Mechanism string

// The mechanisms of Manager.Mechanism.
const (
	V2   Mechanism = "cgroup v2"
	V1   Mechanism = "cgroup v1"
	None Mechanism = "none"
)

// The controllers a call group uses. On cgroup v1, CPU is the cpuacct controller (usage).
const (
	Memory = "memory"
	Pids   = "pids"
	CPU    = "cpu"
)

// controllers are the limit controllers, in the order status lists them.
var controllers = []string{Memory, Pids, CPU}

// v1Names maps a controller to its cgroup v1 hierarchy's controller name.
var v1Names = map[string]string{Memory: "memory", Pids: "pids", CPU: "cpuacct"}

// groupPrefix starts the name of every call group.
const groupPrefix = "clihost-"

// Limits are the cgroup limits of one call; zero means no limit of that kind.
type Limits struct {
	MemoryBytes int64         // memory.max (v2) or memory.limit_in_bytes (v1), swap included
	Pids        int64         // pids.max
	CPU         time.Duration // CPU time of the whole group; enforced by WatchCPU, not by the kernel
}

// Manager creates call groups under the daemon's own groups.
type Manager struct {
	v2     string // the daemon's own v2 group (absolute directory), "" when v2 is not used
	mech   map[string]Mechanism
	v1     map[string]string // controller -> the daemon's own v1 group directory
	owner  int
	seq    atomic.Int64
	reason string // why a controller is not enforced, for Describe
}

// Default returns the manager of this process, detected once (see Detect).
var Default = sync.OnceValue(Detect)

// Detect finds, per controller, the mechanism this process can use: cgroup v2 when its own unified
// group offers the controller and is writable (then the process moves itself into a leaf child
// "clihostd" if it must, to enable the controllers for its children), else cgroup v1 when the
// controller's hierarchy is mounted and a group can be created in the process's own group, else
// None. It never fails: what it cannot use is None, with the reason in Reason.
func Detect() *Manager {
	m := &Manager{mech: map[string]Mechanism{}, v1: map[string]string{}, owner: os.Getpid()}
	for _, c := range controllers {
		m.mech[c] = None
	}
	own, err := ownGroups()
	if err != nil {
		m.reason = err.Error()
		return m
	}
	var reasons []string
	if dir, ok := own.v2Dir(); ok {
		if got, err := m.useV2(dir); err != nil {
			reasons = append(reasons, "cgroup v2: "+err.Error())
		} else {
			for _, c := range got {
				m.mech[c] = V2
			}
		}
	}
	for _, c := range controllers {
		if m.mech[c] == V2 {
			continue
		}
		dir, ok := own.v1Dir(v1Names[c])
		if !ok {
			continue
		}
		if err := probeWritable(dir); err != nil {
			reasons = append(reasons, fmt.Sprintf("cgroup v1 %s: %v", v1Names[c], err))
			continue
		}
		m.v1[c] = dir
		m.mech[c] = V1
	}
	m.reason = strings.Join(reasons, "; ")
	return m
}

// Mechanism says what enforces controller c (Memory, Pids or CPU) for this manager's groups.
func (m *Manager) Mechanism(c string) Mechanism { return m.mech[c] }

// Reason says why a controller is not enforced by cgroup, or "" when nothing was refused.
func (m *Manager) Reason() string { return m.reason }

// useV2 prepares the v2 group dir for call groups: it enables the memory, pids and cpu
// controllers it offers in its subtree_control (moving this process into a leaf child when the
// group has processes, as the "no internal processes" rule requires), and returns them.
func (m *Manager) useV2(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	offered := strings.Fields(string(data))
	var want []string
	for _, c := range controllers {
		if slices.Contains(offered, c) {
			want = append(want, c)
		}
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("%s offers none of memory, pids, cpu (it has %q)", dir, strings.TrimSpace(string(data)))
	}
	if err := unix.Access(filepath.Join(dir, "cgroup.subtree_control"), unix.W_OK); err != nil {
		return nil, fmt.Errorf("%s is not delegated to this process: %w", dir, err)
	}
	enable := "+" + strings.Join(want, " +")
	err = kernfile.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), enable)
	if errors.Is(err, unix.EBUSY) {
		// Processes in dir: move this one (all its threads) to a leaf, then enable.
		leaf := filepath.Join(dir, "clihostd")
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := kernfile.WriteFile(filepath.Join(leaf, "cgroup.procs"), "0"); err != nil {
			return nil, fmt.Errorf("move the daemon to %s: %w", leaf, err)
		}
		err = kernfile.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), enable)
	}
	if err != nil {
		return nil, fmt.Errorf("enable %s in %s: %w", enable, dir, err)
	}
	m.v2 = dir
	return want, nil
}

// probeWritable checks that a group can be created in dir, by creating and removing one.
func probeWritable(dir string) error {
	probe := filepath.Join(dir, fmt.Sprintf("%sprobe-%d", groupPrefix, os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Remove(probe)
}

// Group is the control groups of one call.
type Group struct {
	name   string
	v2     string            // the v2 group directory, "" without v2
	v1     map[string]string // controller -> v1 group directory
	limits Limits
	// applied says limits are written into the groups (Apply succeeded).
	applied bool
	mgr     *Manager
	// base are the group's counters when its current call was given it (Reuse): Events reports
	// what they counted since. Zero for a group's first call. Under baseMu: a CPU watch of the
	// last call (WatchCPU) may still read it while Reuse sets it.
	baseMu sync.Mutex
	base   Events
}

// New creates the groups of one call under the daemon's own groups and sets l in them. A manager
// with no usable controller returns (nil, nil): the call then has no group.
func (m *Manager) New(l Limits) (*Group, error) {
	g, err := m.NewSlot()
	if err != nil || g == nil {
		return g, err
	}
	if err := g.Apply(l); err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

// NewSlot creates a group without limits for a process started before its call is known (a
// sandbox init waiting in nsinit.Pool): its cgroup v2 directory when this manager uses v2, for the
// process to be cloned into (V2Dir); the v1 groups come with Apply. A manager with no usable
// controller returns (nil, nil).
func (m *Manager) NewSlot() (*Group, error) {
	if m.v2 == "" && len(m.v1) == 0 {
		return nil, nil
	}
	g := &Group{name: fmt.Sprintf("%s%d-%d", groupPrefix, m.owner, m.seq.Add(1)), v1: map[string]string{}, mgr: m}
	if m.v2 != "" {
		g.v2 = filepath.Join(m.v2, g.name)
		if err := os.Mkdir(g.v2, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup: create %s: %w", g.v2, err)
		}
	}
	return g, nil
}

// MakeV1 creates g's groups in every cgroup v1 hierarchy this manager uses, without limits (Apply
// writes them later), so that a process started before its call can join them ahead of it
// (TasksFiles). On error the caller removes g.
func (g *Group) MakeV1() error {
	for c, parent := range g.mgr.v1 {
		if _, made := g.v1[c]; made {
			continue
		}
		dir := filepath.Join(parent, g.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup: create %s: %w", dir, err)
		}
		g.v1[c] = dir
	}
	return nil
}

// MemoryCurrent reads the memory g's cgroup v2 group holds now (memory.current), or false without
// one (no v2 group, or no memory controller there).
func (g *Group) MemoryCurrent() (int64, bool) {
	if g == nil || g.v2 == "" {
		return 0, false
	}
	n, err := readInt(filepath.Join(g.v2, "memory.current"))
	return n, err == nil
}

// Apply sets the call's limits l in g: it creates the v1 groups they need (TasksFiles lists them
// afterwards) and writes l into the controller files. The limits already written are not written
// again (a group made ahead of its call with the limits the call has). It writes only what l sets:
// a group that has other limits (Applied) is not reset to l; use a new one. On error the caller
// removes g.
func (g *Group) Apply(l Limits) error {
	if g.applied && g.limits == l {
		return nil
	}
	g.applied = false
	g.limits = l
	for c, parent := range g.mgr.v1 {
		if _, made := g.v1[c]; made || !g.needs(c) {
			continue
		}
		dir := filepath.Join(parent, g.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup: create %s: %w", dir, err)
		}
		g.v1[c] = dir
	}
	if err := g.setLimits(g.mgr); err != nil {
		return err
	}
	g.applied = true
	return nil
}

// Applied returns the limits Apply wrote into g, and false before it did (or for a nil g).
func (g *Group) Applied() (Limits, bool) {
	if g == nil {
		return Limits{}, false
	}
	return g.limits, g.applied
}

// needs reports whether the group needs a v1 hierarchy for controller c. Joining a v1 group costs
// the init a migration each (milliseconds on a multi-threaded process), so the group joins only
// those its limits use, and pids always: it lists every process of the call, for KillAll.
func (g *Group) needs(c string) bool {
	switch c {
	case Memory:
		return g.limits.MemoryBytes > 0
	case CPU:
		return g.limits.CPU > 0
	}
	return true
}

// setLimits writes g's limits into the controller files of the mechanism each controller uses.
func (g *Group) setLimits(m *Manager) error {
	l := g.limits
	var writes [][2]string
	if l.MemoryBytes > 0 {
		n := strconv.FormatInt(l.MemoryBytes, 10)
		switch m.mech[Memory] {
		case V2:
			writes = append(writes, [2]string{filepath.Join(g.v2, "memory.max"), n},
				[2]string{filepath.Join(g.v2, "memory.swap.max"), "0"}, [2]string{filepath.Join(g.v2, "memory.oom.group"), "1"})
		case V1:
			writes = append(writes, [2]string{filepath.Join(g.v1[Memory], "memory.limit_in_bytes"), n},
				[2]string{filepath.Join(g.v1[Memory], "memory.memsw.limit_in_bytes"), n})
		}
	}
	if l.Pids > 0 {
		n := strconv.FormatInt(l.Pids, 10)
		switch m.mech[Pids] {
		case V2:
			writes = append(writes, [2]string{filepath.Join(g.v2, "pids.max"), n})
		case V1:
			writes = append(writes, [2]string{filepath.Join(g.v1[Pids], "pids.max"), n})
		}
	}
	for _, w := range writes {
		err := kernfile.WriteFile(w[0], w[1])
		// Without swap accounting (or without swap) there is no swap file to limit.
		if errors.Is(err, os.ErrNotExist) && (strings.HasSuffix(w[0], ".swap.max") || strings.HasSuffix(w[0], ".memsw.limit_in_bytes")) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cgroup: set %s: %w", w[0], err)
		}
	}
	return nil
}

// Name is the group's name, the same in every hierarchy.
func (g *Group) Name() string { return g.name }

// V2Dir is the group's cgroup v2 directory, "" when no controller uses v2. Open it (O_PATH or
// O_DIRECTORY) for SysProcAttr.CgroupFD to start the init in it (CLONE_INTO_CGROUP).
func (g *Group) V2Dir() string { return g.v2 }

// TasksFiles are the tasks files of the group's v1 hierarchies. The init's thread that forks the
// program joins them by writing "0" (itself) to descriptors the host opened; the program, forked
// from that thread, starts in the group. Moving one thread, unlike a whole process through
// cgroup.procs, does not take the kernel's global threadgroup lock, whose RCU grace period
// cost milliseconds per call.
func (g *Group) TasksFiles() []string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(g.v1)) {
		out = append(out, filepath.Join(g.v1[c], "tasks"))
	}
	return out
}

// Events are the limit events counted in a group.
type Events struct {
	OOMKills   int64         // processes the OOM killer killed because of the memory limit
	PidsMax    int64         // forks refused by the process limit
	CPUUsage   time.Duration // CPU time used by the group (user and system)
	CPUCounted bool          // CPUUsage was read from the group
}

// Events reads the group's limit events and its CPU usage, counted since its current call was
// given it (see Reuse).
func (g *Group) Events() Events { return g.counters().minus(g.since()) }

// minus is what counters e counted since they read base (never below zero: a counter that could
// not be read is -1).
func (e Events) minus(base Events) Events {
	e.OOMKills, e.PidsMax = max(e.OOMKills-base.OOMKills, 0), max(e.PidsMax-base.PidsMax, 0)
	e.CPUUsage = max(e.CPUUsage-base.CPUUsage, 0)
	return e
}

// since returns the counters Events counts from.
func (g *Group) since() Events {
	g.baseMu.Lock()
	defer g.baseMu.Unlock()
	return g.base
}

// counters reads the group's counters as the kernel keeps them, from its creation; a counter
// that cannot be read is -1 (the CPU usage: CPUCounted false).
func (g *Group) counters() Events {
	e := Events{OOMKills: -1, PidsMax: -1}
	if g.v2 != "" {
		e.OOMKills = keyed(filepath.Join(g.v2, "memory.events"), "oom_kill")
		e.PidsMax = keyed(filepath.Join(g.v2, "pids.events"), "max")
	}
	if d, ok := g.v1[Memory]; ok {
		e.OOMKills = max(e.OOMKills, keyed(filepath.Join(d, "memory.oom_control"), "oom_kill"))
	}
	if d, ok := g.v1[Pids]; ok {
		e.PidsMax = max(e.PidsMax, keyed(filepath.Join(d, "pids.events"), "max"))
	}
	e.CPUUsage, e.CPUCounted = g.rawCPUUsage()
	return e
}

// cpuUsage is Events' CPUUsage and CPUCounted alone: one file read, for WatchCPU's polls.
func (g *Group) cpuUsage() (time.Duration, bool) {
	usage, counted := g.rawCPUUsage()
	return max(usage-g.since().CPUUsage, 0), counted
}

// rawCPUUsage is the group's CPU usage from its creation.
func (g *Group) rawCPUUsage() (time.Duration, bool) {
	var usage time.Duration
	counted := false
	if g.v2 != "" {
		if us := keyed(filepath.Join(g.v2, "cpu.stat"), "usage_usec"); us >= 0 {
			usage, counted = time.Duration(us)*time.Microsecond, true
		}
	}
	if d, ok := g.v1[CPU]; ok {
		if ns, err := readInt(filepath.Join(d, "cpuacct.usage")); err == nil {
			usage, counted = time.Duration(ns), true
		}
	}
	return usage, counted
}

// reusedMemoryShare bounds the memory a group's last call may have left charged to it (file
// pages it read or wrote, which the kernel reclaims when the group needs room) for the group to be
// reused: at most 1/reusedMemoryShare of its memory limit.
const reusedMemoryShare = 4

// reusedPinnedBytes bounds the memory of it the kernel cannot reclaim (memory.stat's shmem and
// unevictable: files on a tmpfs, such as a workspace there, with no swap allowed) for a group to
// be reused: such pages would shrink the next call's limit for good. The call's own /tmp and
// /dev/shm go with its mount namespace, which may outlive its end by a moment.
const reusedPinnedBytes = 1 << 20

// ErrNotReusable is Reuse's error for a group that must be removed rather than reused.
var ErrNotReusable = errors.New("cgroup: not reusable")

// Reuse readies g, whose call has ended, for another call with the same limits, sparing that call
// a group made and one removed (a memory cgroup's creation and teardown cost about a tenth of a
// pooled call's CPU): the counters Events reports start from zero again. It fails, and the caller
// removes g, when a process is left in g, its last call reached a limit (the out-of-memory
// killer, the process limit, its CPU time), more than a quarter of its memory limit is still
// charged to it or more than 1 MiB of memory the kernel cannot reclaim (tmpfs pages), its limits
// are no longer those Apply wrote, or a counter or its usage cannot be read.
func (g *Group) Reuse() error {
	if g == nil || !g.applied {
		return fmt.Errorf("%w: no limits applied", ErrNotReusable)
	}
	if n, err := g.tasksLeft(); err != nil || n > 0 {
		return fmt.Errorf("%w: %d processes left (%v)", ErrNotReusable, n, err)
	}
	now := g.counters()
	since := now.minus(g.since())
	switch {
	case now.OOMKills < 0 && g.needsMemory(), now.PidsMax < 0:
		return fmt.Errorf("%w: its counters cannot be read", ErrNotReusable)
	case since.OOMKills > 0 || since.PidsMax > 0 || g.limits.CPU > 0 && (!since.CPUCounted || since.CPUUsage >= g.limits.CPU):
		return fmt.Errorf("%w: its call reached a limit", ErrNotReusable)
	}
	if g.needsMemory() {
		used, err := g.memoryCharged()
		if err != nil || used > g.limits.MemoryBytes/reusedMemoryShare {
			return fmt.Errorf("%w: %d bytes still charged (%v)", ErrNotReusable, used, err)
		}
		if pinned, err := g.memoryPinned(); err != nil || pinned > reusedPinnedBytes {
			return fmt.Errorf("%w: %d bytes that cannot be reclaimed still charged (%v)", ErrNotReusable, pinned, err)
		}
	}
	if err := g.limitsIntact(); err != nil {
		return fmt.Errorf("%w: %v", ErrNotReusable, err)
	}
	g.baseMu.Lock()
	g.base = now
	g.baseMu.Unlock()
	return nil
}

// needsMemory reports whether g has a memory limit in a controller this manager uses.
func (g *Group) needsMemory() bool {
	return g.limits.MemoryBytes > 0 && g.mgr.mech[Memory] != None
}

// tasksLeft counts the processes in g: its pids.current where the pids controller counts them
// (every group has it, see needs), else the entries of its process lists.
func (g *Group) tasksLeft() (int64, error) {
	if f := g.file(Pids, "pids.current", "pids.current"); f != "" {
		return readInt(f)
	}
	return int64(len(g.procs())), nil
}

// memoryPinned reads how much of the memory charged to g the kernel cannot reclaim without swap:
// memory.stat's shmem and unevictable (the group's own, not its children's, on v1).
func (g *Group) memoryPinned() (int64, error) {
	stat := g.file(Memory, "memory.stat", "memory.stat")
	if stat == "" {
		return 0, nil
	}
	v := keyedValues(stat, "shmem", "unevictable") // one read: memory.stat sums the whole group
	shmem, unevictable := v[0], v[1]
	if shmem < 0 || unevictable < 0 {
		return 0, fmt.Errorf("cgroup: %s: no shmem or unevictable", stat)
	}
	return shmem + unevictable, nil
}

// limitsIntact checks that the memory and process limits Apply wrote are still those in the
// controller files: a group is reused only as it was made.
func (g *Group) limitsIntact() error {
	var errs []error
	for _, l := range []struct {
		want      int64
		c, v2, v1 string
	}{{g.limits.MemoryBytes, Memory, "memory.max", "memory.limit_in_bytes"}, {g.limits.Pids, Pids, "pids.max", "pids.max"}} {
		if l.want <= 0 {
			continue
		}
		f := g.file(l.c, l.v2, l.v1)
		if got, err := readInt(f); f != "" && (err != nil || got != l.want) {
			errs = append(errs, fmt.Errorf("%s is %d, not %d (%v)", f, got, l.want, err))
		}
	}
	return errors.Join(errs...)
}

// memoryCharged reads the memory charged to g (memory.current on v2, memory.usage_in_bytes on v1).
func (g *Group) memoryCharged() (int64, error) {
	if f := g.file(Memory, "memory.current", "memory.usage_in_bytes"); f != "" {
		return readInt(f)
	}
	return 0, nil
}

// file is the path of g's control file of controller c: v2 in its cgroup v2 group when c uses v2,
// v1 in its group of c's v1 hierarchy when it joined one; else "".
func (g *Group) file(c, v2, v1 string) string {
	switch {
	case g.v2 != "" && g.mgr.mech[c] == V2:
		return filepath.Join(g.v2, v2)
	case g.v1[c] != "":
		return filepath.Join(g.v1[c], v1)
	}
	return ""
}

// WatchCPU polls the group's CPU usage until stop is closed and closes the returned channel once
// it reaches the group's CPU limit. Without a limit or without CPU accounting it returns nil (a
// nil channel never fires).
func (g *Group) WatchCPU(stop <-chan struct{}) <-chan struct{} {
	if g == nil || g.limits.CPU <= 0 {
		return nil
	}
	if _, counted := g.cpuUsage(); !counted {
		return nil
	}
	every := min(max(g.limits.CPU/20, 20*time.Millisecond), 500*time.Millisecond)
	hit := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if usage, _ := g.cpuUsage(); usage >= g.limits.CPU {
					close(hit)
					return
				}
			}
		}
	}()
	return hit
}

// KillAll kills every process in the group and waits (at most two seconds) until the group is
// empty: cgroup.kill on v2; on v1 every process listed in cgroup.procs gets SIGKILL, repeated until
// none is left (a process forked meanwhile is listed on the next round; the pids limit bounds how
// many there can be, and a call's init takes its whole PID namespace with it). It is safe to call on a nil group and more than once; the
// daemon calls it at a call's end, at its deadline and when draining.
func (g *Group) KillAll() error {
	if g == nil {
		return nil
	}
	deadline := time.Now().Add(2 * time.Second)
	if g.v2 != "" {
		if err := kernfile.WriteFile(filepath.Join(g.v2, "cgroup.kill"), "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cgroup: kill %s: %w", g.v2, err)
		}
	}
	for {
		pids := g.procs()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %s still has %d processes after SIGKILL", g.name, len(pids))
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL) // ESRCH: gone meanwhile
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procs lists the processes of every hierarchy of the group.
func (g *Group) procs() []int {
	dirs := slices.Collect(maps.Values(g.v1))
	if g.v2 != "" {
		dirs = append(dirs, g.v2)
	}
	var out []int
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			if pid, err := strconv.Atoi(strings.TrimSpace(s.Text())); err == nil && !slices.Contains(out, pid) {
				out = append(out, pid)
			}
		}
		f.Close()
	}
	return out
}

// Remove kills what is left in the group (KillAll) and removes its directories. Safe on a nil group.
func (g *Group) Remove() error {
	if g == nil {
		return nil
	}
	dirs := slices.Collect(maps.Values(g.v1))
	if g.v2 != "" {
		dirs = append(dirs, g.v2)
	}
	// A group whose processes are gone (a sandbox whose init was reaped) goes at once: the kernel
	// removes only an empty one. Reading its process lists first cost more than the removal.
	var left []string
	for _, d := range dirs {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			left = append(left, d)
		}
	}
	if len(left) == 0 {
		return nil
	}
	killErr := g.KillAll()
	var errs []error
	for _, d := range left {
		if err := rmdir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(append([]error{killErr}, errs...)...)
}

// rmdir removes an empty cgroup directory, retrying briefly while the kernel finishes releasing
// the processes that just died (EBUSY). A directory already gone is not an error.
func rmdir(dir string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: remove %s: %w", dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Reap kills and removes the call groups left behind by daemons that are gone (a crash or kill -9):
// every group under this manager's parents named clihost-<pid>-<n> whose pid is not a running
// process. Groups of live daemons (this one included) are left alone, and so, until it exits, are
// those of a dead daemon whose pid a new process took. It returns the names removed. The daemon
// calls it at start.
func (m *Manager) Reap() ([]string, error) {
	stale := map[string]*Group{}
	for _, c := range slices.Sorted(maps.Keys(m.v1)) {
		m.collectStale(stale, m.v1[c], func(g *Group, dir string) { g.v1[c] = dir })
	}
	if m.v2 != "" {
		m.collectStale(stale, m.v2, func(g *Group, dir string) { g.v2 = dir })
	}
	var removed []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(stale)) {
		if err := stale[name].Remove(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// collectStale adds the groups in parent whose owner pid is not running to stale, recording each
// directory with add.
func (m *Manager) collectStale(stale map[string]*Group, parent string, add func(*Group, string)) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		owner, ok := ownerPid(e.Name())
		if !e.IsDir() || !ok || owner == m.owner || !errors.Is(unix.Kill(owner, 0), unix.ESRCH) {
			continue // not a call group, or its daemon (or a process that reused its pid) is alive
		}
		g, seen := stale[e.Name()]
		if !seen {
			g = &Group{name: e.Name(), v1: map[string]string{}}
			stale[e.Name()] = g
		}
		add(g, filepath.Join(parent, e.Name()))
	}
}

// ownerPid parses the daemon pid out of a group name clihost-<pid>-<n>.
func ownerPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, groupPrefix)
	if !ok {
		return 0, false
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(pid)
	return n, err == nil && n > 0
}

// keyed reads "key value" lines (memory.events, pids.events, cpu.stat, memory.oom_control) and
// returns the value of key, or -1.
func keyed(path, key string) int64 { return keyedValues(path, key)[0] }

// keyedValues is keyed for each of keys, from one read of the file.
func keyedValues(path string, keys ...string) []int64 {
	out := make([]int64, len(keys))
	for i := range out {
		out[i] = -1
	}
	data, err := kernfile.ReadFile(path)
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if i := slices.Index(keys, k); ok && i >= 0 && out[i] < 0 {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				out[i] = n
			}
		}
	}
	return out
}

// readInt reads a file holding one decimal integer.
func readInt(path string) (int64, error) {
	data, err := kernfile.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}

// Live lists the names of this manager's call groups that still exist (in any hierarchy): after
// every call has ended, none.
func (m *Manager) Live() []string {
	parents := slices.Collect(maps.Values(m.v1))
	if m.v2 != "" {
		parents = append(parents, m.v2)
	}
	prefix := fmt.Sprintf("%s%d-", groupPrefix, m.owner)
	var out []string
	for _, p := range parents {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && !slices.Contains(out, e.Name()) {
				out = append(out, e.Name())
			}
		}
	}
	slices.Sort(out)
	return out
}
