package nsinit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// limitNote starts a line the init writes to the report pipe after the program ran, naming a limit
// it saw the program reach: "limit fsize", "limit cpu", "limit tmpfs /tmp". The program cannot
// write to the pipe (it is closed on exec), so it cannot fake one.
const limitNote = "limit "

// callLimits is what Command prepared for a plan's cgroup limits: the call's group, the v1 tasks
// files the init's forking thread joins, and the v2 directory the init is cloned into.
type callLimits struct {
	group *cgroup.Group
	tasks []*os.File
	dir   *os.File
}

// groupLimits are the control group limits of the plan's limits l.
func groupLimits(l isolation.Limits) cgroup.Limits {
	return cgroup.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPU: l.CPU}
}

// newCallLimits creates the call's control groups when l has cgroup limits and this host offers
// cgroups (cgroup.Default); without either it returns an empty callLimits and the rlimits are the
// only bound. Creating them on a host that offers them must succeed: the call fails closed.
func newCallLimits(l isolation.Limits) (callLimits, error) {
	if !cgroupLimits(l) {
		return callLimits{}, nil
	}
	g, err := cgroup.Default().New(groupLimits(l))
	if err != nil || g == nil {
		return callLimits{}, err
	}
	out := callLimits{group: g}
	for _, path := range g.TasksFiles() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			out.close()
			return callLimits{}, fmt.Errorf("cgroup: %w", err)
		}
		out.tasks = append(out.tasks, f)
	}
	if d := g.V2Dir(); d != "" {
		f, err := os.OpenFile(d, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			out.close()
			return callLimits{}, fmt.Errorf("cgroup: %w", err)
		}
		out.dir = f
	}
	return out, nil
}

// close releases everything of l (the groups included); for failures before the init starts.
func (l callLimits) close() {
	closeFiles(append(slices.Clone(l.tasks), l.dir))
	_ = l.group.Remove()
}

// Group is the call's control groups (nil when the plan had no cgroup limits or the host offers
// no cgroups): KillAll kills everything the call started.
func (c *Cmd) Group() *cgroup.Group { return c.group }

// Release kills what is left in the call's control groups and removes them. Call it once the init
// has been waited for and Exhausted has been asked.
func (c *Cmd) Release() error {
	err := c.group.Remove()
	c.group = nil
	return err
}

// Exhausted names the limit the program reached, after Wait and Failure, or returns "": the
// memory limit when the group's OOM killer killed a process, the CPU time limit when cpuHit
// (WatchCPU fired) or the group used it all or the init saw SIGXCPU, the process limit when a
// fork was refused, the file size limit when the init saw SIGXFSZ, and a full /tmp or /dev/shm.
// A program that exited 0 reached none that matters (a limit a child of it hit, it handled): ""
// for it, and the groups' counters are not read, which spares a successful call three file reads
// on its path.
func (c *Cmd) Exhausted(cpuHit bool) string {
	if c.reported && c.status == 0 {
		return ""
	}
	l := c.limits
	var ev cgroup.Events
	if c.group != nil {
		ev = c.group.Events()
	}
	cpu := cpuHit || slices.Contains(c.notes, "cpu") || (l.CPU > 0 && ev.CPUCounted && ev.CPUUsage >= l.CPU)
	switch {
	case ev.OOMKills > 0:
		return fmt.Sprintf("memory limit %s reached (the CLI was killed by the kernel's OOM killer)", FormatBytes(l.MemoryBytes))
	case cpu:
		return fmt.Sprintf("CPU time limit %s reached (the CLI was killed)", l.CPU)
	case ev.PidsMax > 0:
		return fmt.Sprintf("process limit %d reached (the CLI could not start another process or thread)", l.Pids)
	case slices.Contains(c.notes, "fsize"):
		return fmt.Sprintf("file size limit %s reached (the CLI was killed writing a larger file)", FormatBytes(l.FileSize))
	}
	for _, n := range c.notes {
		if dir, ok := strings.CutPrefix(n, "tmpfs "); ok {
			return fmt.Sprintf("%s is full (%s)", dir, FormatBytes(l.TmpfsBytes))
		}
	}
	return ""
}

// FormatBytes writes n in the largest binary unit that divides it: "1 GiB", "256 MiB", "1000 B".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// joinCgroups moves the calling thread, which must be locked to its goroutine and is the one the
// program will be forked from, into its call's cgroup v1 groups through the tasks descriptors the
// host opened, and closes them. The program and everything it starts then live in the groups.
func joinCgroups(fds []int) error {
	var errs []error
	for _, fd := range fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			errs = append(errs, fmt.Errorf("fd %d: %w", fd, err))
		}
		unix.Close(fd)
	}
	return errors.Join(errs...)
}

// rlimitResources are the resource limits a pooled init takes from the host when it is taken. Not
// RLIMIT_NOFILE: Go raises its own soft limit at start and hands children the one it found, so the
// host's current value is not what an init started for its call gets (the init kept the one it
// was started with, as that init would).
var rlimitResources = []int{unix.RLIMIT_AS, unix.RLIMIT_CORE, unix.RLIMIT_CPU, unix.RLIMIT_DATA,
	unix.RLIMIT_FSIZE, unix.RLIMIT_LOCKS, unix.RLIMIT_MEMLOCK, unix.RLIMIT_MSGQUEUE, unix.RLIMIT_NICE,
	unix.RLIMIT_NPROC, unix.RLIMIT_RSS, unix.RLIMIT_RTPRIO, unix.RLIMIT_RTTIME,
	unix.RLIMIT_SIGPENDING, unix.RLIMIT_STACK}

// hostRlimits reads this process's resource limits (rlimitResources).
func hostRlimits() ([]rlimit, error) {
	out := make([]rlimit, 0, len(rlimitResources))
	for _, r := range rlimitResources {
		var l unix.Rlimit
		if err := unix.Getrlimit(r, &l); err != nil {
			return nil, fmt.Errorf("getrlimit %d: %w", r, err)
		}
		out = append(out, rlimit{Resource: r, Cur: l.Cur, Max: l.Max})
	}
	return out, nil
}

// takeRlimits sets the host's resource limits on a pooled init, before the plan's own (setRlimits)
// lower some further. A hard limit the host raised past the init's own cannot be raised here (the
// init is not privileged over it): the init's is kept, a lower one, and the soft limit is capped
// by it.
func takeRlimits(host []rlimit) error {
	for _, h := range host {
		want := syscall.Rlimit{Cur: h.Cur, Max: h.Max}
		err := syscall.Setrlimit(h.Resource, &want)
		if errors.Is(err, unix.EPERM) {
			var now syscall.Rlimit
			if err = syscall.Getrlimit(h.Resource, &now); err == nil {
				want.Max = min(want.Max, now.Max)
				want.Cur = min(want.Cur, want.Max)
				err = syscall.Setrlimit(h.Resource, &want)
			}
		}
		if err != nil {
			return fmt.Errorf("resource %d: %w", h.Resource, err)
		}
	}
	return nil
}

// setRlimits lowers the soft and hard rlimits of the init to the plan's, for the program to
// inherit: open files, file size and CPU time (SIGXCPU at the limit, SIGKILL a second later).
// Core dumps are always off, soft and hard: a core would write the program's memory into a
// writable tree or, where core_pattern is a pipe, hand it to a root helper outside the sandbox.
// RLIMIT_NPROC is not used: it counts every process of the uid on the whole host, not the call's.
func setRlimits(l isolation.Limits) error {
	set := func(name string, res int, soft, hard uint64) error {
		// syscall.Setrlimit, not x/sys: it also drops the runtime's saved RLIMIT_NOFILE, which
		// ForkExec would otherwise restore in the child.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
			return fmt.Errorf("%s %d: %w", name, soft, err)
		}
		return nil
	}
	if err := set("RLIMIT_CORE", unix.RLIMIT_CORE, 0, 0); err != nil {
		return err
	}
	if l.NoFile > 0 {
		if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(l.NoFile), uint64(l.NoFile)); err != nil {
			return err
		}
	}
	if l.FileSize > 0 {
		if err := set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(l.FileSize), uint64(l.FileSize)); err != nil {
			return err
		}
	}
	if l.CPU > 0 {
		secs := uint64((l.CPU + time.Second - 1) / time.Second)
		if err := set("RLIMIT_CPU", unix.RLIMIT_CPU, secs, secs+1); err != nil {
			return err
		}
	}
	return nil
}

// tmpfsOptions are the mount options of the sandbox's /tmp and /dev/shm: world-writable with the
// sticky bit and, with a size limit, that size and one inode per 4 KiB of it (at least 1024).
func tmpfsOptions(l isolation.Limits) string {
	if l.TmpfsBytes <= 0 {
		return "mode=1777"
	}
	return fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", l.TmpfsBytes, max(l.TmpfsBytes/4096, 1024))
}

// reportLimits writes to the report pipe (fd), after the program ended, the limits the init saw
// it reach: SIGXFSZ or SIGXCPU as the signal that killed it (sig, 0 when none), and a full /tmp or
// /dev/shm (no block or no inode left).
func reportLimits(fd int, l isolation.Limits, sig syscall.Signal) {
	note := func(s string) { _, _ = unix.Write(fd, []byte(limitNote+s+"\n")) }
	switch sig {
	case unix.SIGXFSZ:
		note("fsize")
	case unix.SIGXCPU:
		note("cpu")
	}
	if l.TmpfsBytes <= 0 {
		return
	}
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		var st unix.Statfs_t
		if unix.Statfs(dir, &st) == nil && (st.Bavail == 0 || st.Ffree == 0) {
			note("tmpfs " + dir)
		}
	}
}
