package host

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/cgroup"
	"github.com/clihost/clihost/sandbox/nsinit"
	"github.com/clihost/clihost/sandboxprobe"
)

// DefaultLimits are the operator's per-call resource limits when SandboxOptions.Limits leaves a
// field zero: 1 GiB of memory, 256 processes, 256 MiB each for /tmp and /dev/shm, 1024 open files
// per process, files up to 1 GiB, and no CPU time limit (the call's timeout bounds it).
var DefaultLimits = isolation.Limits{MemoryBytes: 1 << 30, Pids: 256, TmpfsBytes: 256 << 20, NoFile: 1024, FileSize: 1 << 30}

// operatorLimits resolves the operator's limits: a zero field takes DefaultLimits's value, a
// negative one means no limit (0 in the plan).
func operatorLimits(l isolation.Limits) isolation.Limits {
	pick := func(v, def int64) int64 {
		switch {
		case v < 0:
			return 0
		case v == 0:
			return def
		}
		return v
	}
	d := DefaultLimits
	return isolation.Limits{
		MemoryBytes: pick(l.MemoryBytes, d.MemoryBytes),
		Pids:        pick(l.Pids, d.Pids),
		CPU:         time.Duration(pick(int64(l.CPU), int64(d.CPU))),
		NoFile:      pick(l.NoFile, d.NoFile),
		FileSize:    pick(l.FileSize, d.FileSize),
		TmpfsBytes:  pick(l.TmpfsBytes, d.TmpfsBytes),
	}
}

// limitsFor returns the limits of a process of bundle b's tool t (nil: the bundle's own
// commands): the operator's, narrowed by the bundle's and the tool's runner.limits.
func (h *Host) limitsFor(b *manifest.Bundle, t *manifest.ToolEntry) isolation.Limits {
	l := h.limits
	var tr *manifest.ToolRunner
	if t != nil && t.Tool != nil {
		tr = t.Tool.Runner
	}
	m := manifest.EffectiveLimits(b.CLI.Runner, tr)
	if m.MemoryMB > 0 {
		l.MemoryBytes = narrower(l.MemoryBytes, m.MemoryMB<<20)
	}
	if m.CPUMS > 0 {
		l.CPU = time.Duration(narrower(int64(l.CPU), int64(time.Duration(m.CPUMS)*time.Millisecond)))
	}
	return l
}

// narrower is the smaller of two limits, where 0 means none.
func narrower(a, b int64) int64 {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// TimeLimit is the wall-clock limit a call of b's tool runs under unless CallOptions.Timeout
// shortens it (see callTimeout); 0 when b has no such tool.
func TimeLimit(b *manifest.Bundle, tool string) time.Duration {
	t := b.Tool(tool)
	if t == nil || t.Tool == nil {
		return 0
	}
	return callTimeout(b, t)
}

// callTimeout is the wall-clock limit of a call of tool t: the tool's timeout_ms (else
// runner.DefaultTimeout), or runner.limits.timeout_ms when that is shorter.
func callTimeout(b *manifest.Bundle, t *manifest.ToolEntry) time.Duration {
	timeout := runner.DefaultTimeout
	if t.Tool.TimeoutMS > 0 {
		timeout = time.Duration(t.Tool.TimeoutMS) * time.Millisecond
	}
	if m := manifest.EffectiveLimits(b.CLI.Runner, t.Tool.Runner); m.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(m.TimeoutMS)*time.Millisecond)
	}
	return timeout
}

// exhaustedError is the envelope error of a call that failed after reaching a resource limit.
func exhaustedError(res runner.Result, exit *int, stderr string) *Error {
	return &Error{Code: errcode.ResourceExhausted, Message: res.Exhausted, ExitCode: exit, Stderr: stderr, Category: "resource",
		Hint: "the call reached a resource limit of this host (clihostd --limit-*) or of the bundle (runner.limits); narrow the request"}
}

// cgroupWarning is the warning of a call whose control groups could not be removed, or nil.
func cgroupWarning(res runner.Result) []string {
	if res.CgroupErr == nil {
		return nil
	}
	return []string{"the call's control groups could not be removed: " + res.CgroupErr.Error()}
}

// LimitMechanism says what enforces one per-call resource limit on this host (package
// sandboxprobe defines it, for the control API too).
type LimitMechanism = sandboxprobe.LimitMechanism

// LimitMechanisms lists, for each per-call resource limit of bundle b's commands (nil: the
// operator's limits), its value and the mechanism that enforces it on this host (memory and pids:
// a cgroup controller or none; CPU time: cgroup accounting plus RLIMIT_CPU; open files and file
// size: rlimits; /tmp and /dev/shm: the tmpfs size option). With the sandbox off nothing is.
func (h *Host) LimitMechanisms(b *manifest.Bundle) []LimitMechanism {
	l := h.limits
	if b != nil && b.CLI != nil {
		l = h.limitsFor(b, nil)
	}
	mgr := cgroup.Default()
	mech := func(set bool, m string) string {
		if !set || h.opts.Sandbox.Off {
			return "none"
		}
		return m
	}
	bytes := func(n int64) string {
		if n <= 0 {
			return "none"
		}
		return nsinit.FormatBytes(n)
	}
	count := func(n int64) string {
		if n <= 0 {
			return "none"
		}
		return fmt.Sprint(n)
	}
	cpu := "rlimit"
	if m := mgr.Mechanism(cgroup.CPU); m != cgroup.None {
		cpu = string(m) + " accounting + rlimit"
	}
	cpuValue := "none"
	if l.CPU > 0 {
		cpuValue = l.CPU.String()
	}
	return []LimitMechanism{
		{Limit: "memory", Value: bytes(l.MemoryBytes), Mechanism: mech(l.MemoryBytes > 0, string(mgr.Mechanism(cgroup.Memory)))},
		{Limit: "pids", Value: count(l.Pids), Mechanism: mech(l.Pids > 0, string(mgr.Mechanism(cgroup.Pids)))},
		{Limit: "cpu", Value: cpuValue, Mechanism: mech(l.CPU > 0, cpu)},
		{Limit: "nofile", Value: count(l.NoFile), Mechanism: mech(l.NoFile > 0, "rlimit")},
		{Limit: "fsize", Value: bytes(l.FileSize), Mechanism: mech(l.FileSize > 0, "rlimit")},
		{Limit: "tmpfs", Value: bytes(l.TmpfsBytes), Mechanism: mech(l.TmpfsBytes > 0, "size option")},
	}
}

// LimitFlag is one operator limit flag (--limit-memory …) for a flag.FlagSet or a pflag.FlagSet:
// register Value under Name with Usage.
type LimitFlag struct {
	Name, Usage string
	Value       *LimitValue
}

// LimitValue is the value of a limit flag: a size ("1GiB", "256MiB", "512M", bytes), a count, or a
// duration ("10s"); "none" or 0 for no limit. It writes into a field of a SandboxOptions.Limits.
type LimitValue struct {
	kind  byte // 'b' bytes, 'n' count, 'd' duration
	field *int64
}

// LimitFlags returns the operator limit flags writing into l (a SandboxOptions.Limits): their
// defaults are DefaultLimits.
func LimitFlags(l *isolation.Limits) []LimitFlag {
	d := DefaultLimits
	cpu := (*int64)(&l.CPU)
	return []LimitFlag{
		{"limit-memory", fmt.Sprintf("memory of one call, swap included, e.g. 1GiB or none (default %s; enforced by cgroup)", nsinit.FormatBytes(d.MemoryBytes)), &LimitValue{'b', &l.MemoryBytes}},
		{"limit-pids", fmt.Sprintf("processes and threads of one call, or none (default %d; enforced by cgroup)", d.Pids), &LimitValue{'n', &l.Pids}},
		{"limit-tmpfs", fmt.Sprintf("size of a call's private /tmp and of its /dev/shm, each, or none (default %s)", nsinit.FormatBytes(d.TmpfsBytes)), &LimitValue{'b', &l.TmpfsBytes}},
		{"limit-cpu", "CPU time of one call, e.g. 5m, or none (default none: the call's timeout bounds it)", &LimitValue{'d', cpu}},
		{"limit-nofile", fmt.Sprintf("open files per process of a call, or none (default %d)", d.NoFile), &LimitValue{'n', &l.NoFile}},
		{"limit-fsize", fmt.Sprintf("the largest file a call may write, or none (default %s)", nsinit.FormatBytes(d.FileSize)), &LimitValue{'b', &l.FileSize}},
	}
}

// String shows the value as set ("" when it is the default).
func (v *LimitValue) String() string {
	if v == nil || v.field == nil || *v.field == 0 {
		return ""
	}
	switch {
	case *v.field < 0:
		return "none"
	case v.kind == 'b':
		return nsinit.FormatBytes(*v.field)
	case v.kind == 'd':
		return time.Duration(*v.field).String()
	}
	return fmt.Sprint(*v.field)
}

// Type names the value's kind for pflag's help.
func (v *LimitValue) Type() string {
	return map[byte]string{'b': "size", 'n': "count", 'd': "duration"}[v.kind]
}

// Set parses s.
func (v *LimitValue) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "none" || s == "0" {
		*v.field = -1
		return nil
	}
	var n int64
	var err error
	switch v.kind {
	case 'b':
		n, err = ParseSize(s)
	case 'd':
		var d time.Duration
		d, err = time.ParseDuration(s)
		n = int64(d)
	default:
		n, err = strconv.ParseInt(s, 10, 64)
	}
	if err != nil || n <= 0 {
		return fmt.Errorf("%q: want a positive %s or none", s, v.Type())
	}
	*v.field = n
	return nil
}

// sizeUnits are the units ParseSize accepts (upper-cased), by their power of two.
var sizeUnits = map[string]uint{"": 0, "B": 0,
	"K": 10, "KB": 10, "KIB": 10, "M": 20, "MB": 20, "MIB": 20, "G": 30, "GB": 30, "GIB": 30, "T": 40, "TB": 40, "TIB": 40}

// ParseSize parses a byte size: a number with an optional binary unit K, M, G or T (KiB, KB and K
// all mean 1024), spaces allowed around the unit.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num := strings.TrimRightFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	unit := strings.ToUpper(strings.TrimSpace(s[len(num):]))
	shift, ok := sizeUnits[unit]
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n > (1<<62)>>shift {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n << shift, nil
}
