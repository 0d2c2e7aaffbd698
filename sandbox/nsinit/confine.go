package nsinit

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/seccomp"
	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h), each with its lock: uid 0 gets no capabilities from execve, a uid
// change neither keeps nor drops capabilities behind our back, ambient capabilities cannot be raised.
const (
	secbitNoRoot                  = 1 << 0
	secbitNoRootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7

	lockedSecurebits = secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
)

// noCapabilities is an empty capability set as /proc/<pid>/status shows it.
const noCapabilities = "0000000000000000"

// confine confines the calling thread of the init, which must be locked to it and is the thread
// the program will be forked from; every step binds that thread alone (or the whole process where
// the kernel has no per-thread state: rlimits, dumpable, the descriptor table, the umask):
// no_new_privs, Landlock, locked securebits, an empty bounding set, the plan's uid and gid, no
// capabilities, the plan's rlimits, not dumpable, every descriptor above stderr close-on-exec,
// seccomp, and a check of the result in /proc/thread-self/status. A fork copies the calling
// thread's credentials, bounding set, seccomp filter and Landlock domain, so the program starts
// with exactly this state. The init's other threads keep what the init started with (root, in
// its namespaces or on the host); the program cannot reach them (tests/escape, TestInitReach).
// The uid and gid change clears the thread's parent-death signal: it is set again, and the host
// checked through lifelineFD (see armParentDeath). paths are the descriptors the Landlock rules
// are taken from; they are closed once the Landlock domain is in place. On failure it returns the
// step that failed.
func confine(e envelope, paths *pathTable, lifelineFD int) (step string, err error) {
	p := e.Plan
	seal := p.NoExecMemfd && sealMemfds(e.UserNS) // read before Landlock and the uid change
	if !e.UserNS {
		// The uid change below makes the init's memory dumpable as it says (dumpable.go).
		fd, err := openSuidDumpable()
		if err != nil {
			return "privileges", err
		}
		err = checkSuidDumpable(fd)
		unix.Close(fd)
		if err != nil {
			return "privileges", err
		}
	}
	// First: Landlock needs it on this thread, and nothing may gain privileges from here on.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "no_new_privs", err
	}
	// Landlock comes next, while this thread can still open every path of the plan and list the
	// directories split around deny paths; the domain survives the uid change below.
	if err := restrictLandlock(p, paths); err != nil {
		return "landlock", err
	}
	// The domain holds what it needs of the rules' descriptors: close them before the plan's
	// RLIMIT_NOFILE, which a grant expanded into many paths (sub/* over a thousand files) would
	// otherwise exceed, so that verify's open and the fork's pipe failed with EMFILE.
	paths.close()
	if err := dropPrivileges(p, e.UserNS, boundingSetDropped); err != nil {
		return "privileges", err
	}
	// The init is the program's parent and its forking thread shares the program's uid: no
	// ptrace, no /proc/1/mem or environ. (Per process, at once: the uid change reset it.)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return "not dumpable", err
	}
	// Nothing after this changes the credentials again, which would clear it anew.
	if err := armParentDeath(lifelineFD); err != nil {
		return "parent death signal", err
	}
	// After the capabilities are gone (CAP_SYS_RESOURCE could raise a hard limit again).
	if err := setRlimits(p.Limits); err != nil {
		return "rlimits", err
	}
	// Close-on-exec rather than close: the Go runtime still uses its own descriptors, and the
	// report pipe must stay open here until the program is exec'd.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return "close fds", err
	}
	if p.Seccomp {
		if err := seccomp.Install(seccomp.Options{NoExecMemfd: p.NoExecMemfd, SealMemfds: seal}); err != nil {
			return "seccomp", err
		}
	}
	if err := verify(p, e.UserNS); err != nil {
		return "verify", err
	}
	return "", nil
}

// startProgram forks the program from the calling (confined, locked) thread and execs it in the
// plan's directory with the plan's environment and only stdin, stdout and stderr. The error is
// the exec's (or chdir's) when the program could not be started.
func startProgram(p isolation.Plan) (int, error) {
	return syscall.ForkExec(p.Path, p.Args, &syscall.ProcAttr{
		Dir:   p.Dir,
		Env:   p.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
}

// restrictLandlock enforces the plan's Landlock ruleset on the calling thread, which must have
// no_new_privs set.
func restrictLandlock(p isolation.Plan, paths *pathTable) error {
	mode := netUnrestricted
	switch {
	case p.NoNetwork:
		mode = netDenied
	case p.Egress:
		mode = netEgress
	}
	cfg, err := landlockConfig(mode)
	if err != nil {
		return err
	}
	g, err := grants(p, paths)
	if err != nil {
		return err
	}
	rules, err := landlockRules(cfg, g, paths)
	if err != nil {
		return err
	}
	return enforceLandlock(cfg, rules, netRules(cfg, mode, p.Ingress))
}

// dropPrivileges sets the plan's umask, locks the securebits, empties the capability bounding and
// ambient sets, switches to the plan's uid, gid and supplementary groups (not in a user namespace,
// where the only mapped id is the host user's), and clears the inheritable, permitted and
// effective sets. Securebits, bounding set, credentials and capsets are per thread: this must run
// on the thread that forks the program, and binds it alone. boundingDropped says the thread
// already dropped its bounding set ahead of its call (it cannot grow back).
func dropPrivileges(p isolation.Plan, userNS, boundingDropped bool) error {
	if p.Umask != 0 {
		unix.Umask(p.Umask & 0o777)
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	if !boundingDropped {
		if err := dropBoundingSet(); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if !userNS {
		if err := setThreadCredentials(p.UID, p.GID, p.Groups); err != nil {
			return err
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// maxCapabilities bounds dropBoundingSet: capability sets are 64 bits wide.
const maxCapabilities = 64

// dropBoundingSet drops every capability from the calling thread's bounding set. verify checks
// the set is empty.
//
// A pooled init drops it while it waits for its plan (see prewarm), on the thread it stays locked
// to; verify checks it is empty either way.
func dropBoundingSet() error {
	return eachCapability(unix.PR_CAPBSET_DROP, func(c, _ uintptr, errno unix.Errno) error {
		if errno != 0 {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, errno)
		}
		return nil
	})
}

// checkBoundingSetEmpty checks with system calls that the calling thread's bounding set is empty.
// A capability dropped from it never returns to it: a thread that dropped and checked it ahead of
// its call need not check it again.
func checkBoundingSetEmpty() error {
	return eachCapability(unix.PR_CAPBSET_READ, func(c, in uintptr, errno unix.Errno) error {
		switch {
		case errno != 0:
			return fmt.Errorf("read capability %d of the bounding set: %w", c, errno)
		case in != 0:
			return fmt.Errorf("capability %d is in the bounding set", c)
		}
		return nil
	})
}

// eachCapability calls prctl(op, c) for every capability c, from 0 up to the first number the
// kernel refuses as no capability at all (EINVAL): its CAP_LAST_CAP, without reading
// /proc/sys/kernel/cap_last_cap. It hands each result to f and stops at f's first error.
func eachCapability(op uintptr, f func(c, result uintptr, errno unix.Errno) error) error {
	for c := uintptr(0); c < maxCapabilities; c++ {
		r, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, op, c, 0, 0, 0, 0)
		if errno == unix.EINVAL && c > 0 {
			return nil
		}
		if err := f(c, r, errno); err != nil {
			return err
		}
	}
	return nil
}

// boundingSetDropped is set once the init's forking thread has dropped its bounding set ahead of
// its plan (prewarm).
var boundingSetDropped bool

// setThreadCredentials switches the calling thread, and no other, to the supplementary groups,
// gid and uid given (real, effective and saved), with the raw system calls: Go's
// syscall.Setgroups, Setresgid and Setresuid change every thread of the process (they stop the
// world and signal each thread). A Go program may do this only on a thread locked for good,
// as the init's forking thread is: the runtime then starts no thread from it and runs nothing
// else on it.
func setThreadCredentials(uid, gid int, groups []int) error {
	gids := make([]uint32, len(groups))
	for i, g := range groups {
		gids[i] = uint32(g)
	}
	var list unsafe.Pointer
	if len(gids) > 0 {
		list = unsafe.Pointer(&gids[0])
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gids)), uintptr(list), 0); errno != 0 {
		return fmt.Errorf("setgroups %v: %w", groups, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); errno != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); errno != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, errno)
	}
	return nil
}

// verify reads back the state of this thread from /proc/thread-self/status: no_new_privs set, every
// capability set empty, the seccomp filter in place when asked for, and the plan's uid and gid;
// and its parent-death signal, SIGKILL.
func verify(p isolation.Plan, userNS bool) error {
	data, err := readThreadStatus()
	if err != nil {
		return fmt.Errorf("read /proc/thread-self/status: %w", err)
	}
	status := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	want := map[string]string{
		"NoNewPrivs": "1",
		"CapInh":     noCapabilities, "CapPrm": noCapabilities, "CapEff": noCapabilities,
		"CapBnd": noCapabilities, "CapAmb": noCapabilities,
	}
	if p.Seccomp {
		want["Seccomp"] = "2"
	}
	if !userNS {
		u, g := strconv.Itoa(p.UID), strconv.Itoa(p.GID)
		want["Uid"] = strings.Join([]string{u, u, u, u}, "\t")
		want["Gid"] = strings.Join([]string{g, g, g, g}, "\t")
		want["Groups"] = groupsLine(p.Groups)
	}
	for k, v := range want {
		if got, ok := status[k]; !ok || got != v {
			return fmt.Errorf("%s is %q, want %q", k, got, v)
		}
	}
	if sig, err := parentDeathSignal(); err != nil || sig != int(unix.SIGKILL) {
		return fmt.Errorf("parent-death signal is %d (%v), want SIGKILL", sig, err)
	}
	return nil
}

// readThreadStatus reads /proc/thread-self/status with plain system calls (an open, a read into a
// buffer larger than the file, the read that finds its end, a close), not through an os.File.
func readThreadStatus() ([]byte, error) {
	fd, err := unix.Open("/proc/thread-self/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// memfdNoexecSysctl is vm.memfd_noexec, per PID namespace and inherited by the namespaces below.
const memfdNoexecSysctl = "/proc/sys/vm/memfd_noexec"

// sealMemfds reports whether the seccomp filter must refuse memfds that could be made executable:
// in a user namespace, where the init could not set vm.memfd_noexec, unless the value it inherited
// from the host is 2 already. An unreadable value counts as not 2.
func sealMemfds(userNS bool) bool {
	if !userNS {
		return false
	}
	v, err := readInt(memfdNoexecSysctl)
	return err != nil || v != 2
}

// groupsLine is the Groups line of /proc/PID/status for groups (sorted, without duplicates, as the
// plan's checks left them).
func groupsLine(groups []int) string {
	words := make([]string, len(groups))
	for i, g := range groups {
		words[i] = strconv.Itoa(g)
	}
	return strings.Join(words, " ")
}
