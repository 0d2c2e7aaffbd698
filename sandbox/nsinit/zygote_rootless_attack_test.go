package nsinit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"golang.org/x/sys/unix"
)

// The attacks of this file are a hostile program's inside a call served by the zygote, aimed at
// what the rootless zygote (a daemon that is not root: the zygote in a user namespace of its own,
// the program with the same kuid as PID 1, the zygote and the daemon, every call in one user
// namespace) could have opened up. They run in both modes: as root, and again as nobody through
// TestZygoteRootless (os.Geteuid() != 0 there).

// attackProbeEnv makes this test binary, run as a sandbox's program, run attackProbe with the
// mode the variable names instead of testing.
const attackProbeEnv = "NSINIT_TEST_ATTACK_PROBE"

// attackProbe runs one of the probes of this file inside a sandbox and prints one line per step,
// "step: result". Modes: pid1 (system calls and /proc files aimed at PID 1, the zygote's memory),
// exec (ways to execute a copy of this binary that is not on an executable path), plant and look
// (leave, then look for, traces in the IPC objects a neighbouring call could share), and the
// network probes of zygote_net_test.go (netProbe).
func attackProbe(mode string) int {
	if len(os.Args) > 1 && os.Args[1] == "ran" {
		fmt.Println("ran from", os.Args[0])
		return 0
	}
	switch mode {
	case "pid1":
		probePID1()
	case "exec":
		probeExec()
	case "plant":
		probePlant()
	case "look":
		probeLook()
	case "tty":
		probeTerminal()
	case "netlook", "netleave-tw", "netleave-cycle", "netlisten":
		netProbe(mode)
	case "netpass", "netcatch", "netmeet", "netleave-metrics", "netrto", "netsysctl":
		netReviewProbe(mode) // zygote_net_review_attack_test.go
	default:
		fmt.Println("unknown mode", mode)
		return 2
	}
	return 0
}

// errName is err's errno name, "ok" for nil.
func errName(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	default:
		return err.Error()
	}
}

// errnoName is e's name, "ok" for 0.
func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return unix.ErrnoName(e)
}

// probePID1 aims at PID 1 (a clone of the zygote sharing its memory, with the program's uid in a
// user namespace) every system call and /proc file a process of the same uid might use on it.
func probePID1() {
	var lim unix.Rlimit
	_, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&lim)), 0, 0)
	fmt.Println("prlimit get:", errnoName(e))
	if e == 0 {
		// Lowers PID 1's own soft limit on core size (already 0 or not: the write is what counts).
		var core unix.Rlimit
		_, _, e = unix.RawSyscall6(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_CORE, 0, uintptr(unsafe.Pointer(&core)), 0, 0)
		if e == 0 {
			core.Cur = 0
			_, _, e = unix.RawSyscall6(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_CORE, uintptr(unsafe.Pointer(&core)), 0, 0, 0)
		}
		fmt.Println("prlimit set:", errnoName(e))
		// Raising a hard limit takes CAP_SYS_RESOURCE in the initial user namespace.
		core.Max = unix.RLIM_INFINITY
		core.Cur = unix.RLIM_INFINITY
		_, _, e = unix.RawSyscall6(unix.SYS_PRLIMIT64, 1, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&core)), 0, 0, 0)
		fmt.Println("prlimit raise:", errnoName(e))
	}
	fmt.Println("setpriority:", errName(unix.Setpriority(unix.PRIO_PROCESS, 1, 19)))
	// Every process of the uid: the kernel reaches only those this PID namespace shows.
	fmt.Println("setpriority user:", errName(unix.Setpriority(unix.PRIO_USER, 0, 19)))
	var set unix.CPUSet
	set.Set(0)
	fmt.Println("sched_setaffinity:", errName(unix.SchedSetaffinity(1, &set)))
	// ioprio_set(IOPRIO_WHO_PROCESS, 1, IOPRIO_CLASS_IDLE)
	_, _, e = unix.RawSyscall(unix.SYS_IOPRIO_SET, 1, 1, 3<<13)
	fmt.Println("ioprio_set:", errnoName(e))
	// ioprio_set(IOPRIO_WHO_USER, the caller's uid, IOPRIO_CLASS_IDLE): as PRIO_USER.
	_, _, e = unix.RawSyscall(unix.SYS_IOPRIO_SET, 3, uintptr(os.Getuid()), 3<<13)
	fmt.Println("ioprio_set user:", errnoName(e))
	_, _, e = unix.RawSyscall6(unix.SYS_KCMP, 1, uintptr(os.Getpid()), 0 /* KCMP_FILE */, 0, 0, 0)
	fmt.Println("kcmp:", errnoName(e))
	var head, size uintptr
	_, _, e = unix.RawSyscall(unix.SYS_GET_ROBUST_LIST, 1, uintptr(unsafe.Pointer(&head)), uintptr(unsafe.Pointer(&size)))
	fmt.Println("get_robust_list:", errnoName(e))
	buf := make([]byte, 64)
	local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
	remote := []unix.RemoteIovec{{Base: 0x400000, Len: len(buf)}}
	_, err := unix.ProcessVMReadv(1, local, remote, 0)
	fmt.Println("process_vm_readv:", errName(err))
	pidfd, err := unix.PidfdOpen(1, 0)
	fmt.Println("pidfd_open:", errName(err))
	if err == nil {
		_, err = unix.PidfdGetfd(pidfd, 0, 0)
		fmt.Println("pidfd_getfd:", errName(err))
		_, _, e = unix.RawSyscall(unix.SYS_PROCESS_MRELEASE, uintptr(pidfd), 0, 0)
		fmt.Println("process_mrelease:", errnoName(e))
		_, _, e = unix.RawSyscall6(unix.SYS_PROCESS_MADVISE, uintptr(pidfd), uintptr(unsafe.Pointer(&local[0])), 1, unix.MADV_PAGEOUT, 0, 0)
		fmt.Println("process_madvise:", errnoName(e))
		unix.Close(pidfd)
	}
	for _, f := range []string{"root", "cwd", "exe", "ns/user", "ns/mnt"} {
		_, err := os.Readlink("/proc/1/" + f)
		fmt.Printf("readlink %s: %s\n", f, errName(err))
	}
	for _, f := range []string{"oom_score_adj", "oom_adj", "clear_refs", "timerslack_ns", "autogroup",
		"comm", "attr/current", "loginuid", "coredump_filter", "mem", "setgroups", "uid_map"} {
		fd, err := unix.Open("/proc/1/"+f, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		fmt.Printf("open %s for writing: %s\n", f, errName(err))
	}
	// The user namespace the zygote shares with every call, and its parent: a descriptor is no
	// way in without setns, which the filter refuses.
	fd, err := unix.Open("/proc/self/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	fmt.Println("open ns/user:", errName(err))
	if err == nil {
		parent, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), 0xb702 /* NS_GET_PARENT */, 0)
		fmt.Println("NS_GET_PARENT:", errnoName(e))
		if e == 0 {
			fmt.Println("setns parent:", errName(unix.Setns(int(parent), unix.CLONE_NEWUSER)))
		}
		fmt.Println("setns own:", errName(unix.Setns(fd, 0)))
		unix.Close(fd)
	}
	fmt.Println("unshare user:", errName(unix.Unshare(unix.CLONE_NEWUSER)))
	_, _, e = unix.RawSyscall6(unix.SYS_ADD_KEY, uintptr(unsafe.Pointer(&[]byte("user\x00")[0])),
		uintptr(unsafe.Pointer(&[]byte("clihost-attack\x00")[0])), uintptr(unsafe.Pointer(&buf[0])), 4,
		0xfffffffb /* KEY_SPEC_USER_KEYRING */, 0)
	fmt.Println("add_key:", errnoName(e))
	// Signals: PID 1 reads SIGCHLD only, and reaps; a forged one (rt_sigqueueinfo, same uid) is
	// harmless, the others are ignored by a PID 1 from inside its namespace.
	info := make([]byte, 128)
	*(*int32)(unsafe.Pointer(&info[0])) = int32(unix.SIGCHLD)
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
	_, _, e = unix.RawSyscall(unix.SYS_RT_SIGQUEUEINFO, 1, uintptr(unix.SIGCHLD), uintptr(unsafe.Pointer(&info[0])))
	fmt.Println("rt_sigqueueinfo SIGCHLD:", errnoName(e))
	for _, sig := range []unix.Signal{unix.SIGSEGV, unix.SIGKILL, unix.SIGSTOP, unix.SIGTERM} {
		fmt.Printf("kill %d: %s\n", sig, errName(unix.Kill(1, sig)))
	}
	time.Sleep(100 * time.Millisecond)
	status, _ := os.ReadFile("/proc/1/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "State:") {
			fmt.Println("PID 1", strings.Join(strings.Fields(line), " "))
		}
	}
}

// probeExec tries to execute a copy of this binary from places Landlock's execute right does not
// cover: memfds made with every combination of flags the filter might let through (with and
// without the seal, after a chmod), a secret memory area, O_TMPFILE files in the writable /tmp and
// /dev/shm, linked or not, and plain files there.
func probeExec() {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		fmt.Println("read self:", err)
		return
	}
	argv, env := []string{"probe", "ran"}, []string{attackProbeEnv + "=ran"}
	try := func(what string, fd int) {
		if _, err := unix.Write(fd, self); err != nil {
			fmt.Printf("%s write: %s\n", what, errName(err))
			return
		}
		fmt.Printf("%s fchmod: %s\n", what, errName(unix.Fchmod(fd, 0o755)))
		fmt.Printf("%s exec: %s\n", what, errName(unix.Exec("/proc/self/fd/"+strconv.Itoa(fd), argv, env)))
		empty, _ := unix.BytePtrFromString("")
		argvp, _ := syscall.SlicePtrFromStrings(argv)
		envp, _ := syscall.SlicePtrFromStrings(env)
		_, _, e := unix.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(empty)),
			uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), unix.AT_EMPTY_PATH, 0)
		fmt.Printf("%s execveat: %s\n", what, errnoName(e))
	}
	for _, flags := range []struct {
		name string
		v    int
	}{
		{"0", 0}, {"ALLOW_SEALING", unix.MFD_ALLOW_SEALING}, {"EXEC", unix.MFD_EXEC},
		{"HUGETLB", unix.MFD_HUGETLB}, {"NOEXEC_SEAL", unix.MFD_NOEXEC_SEAL},
		{"NOEXEC_SEAL|ALLOW_SEALING", unix.MFD_NOEXEC_SEAL | unix.MFD_ALLOW_SEALING},
		{"NOEXEC_SEAL|EXEC", unix.MFD_NOEXEC_SEAL | unix.MFD_EXEC},
		{"NOEXEC_SEAL|HUGETLB", unix.MFD_NOEXEC_SEAL | unix.MFD_HUGETLB},
		{"high bit|0", 1 << 40},
	} {
		name, _ := unix.BytePtrFromString("probe")
		r, _, e := unix.RawSyscall(unix.SYS_MEMFD_CREATE, uintptr(unsafe.Pointer(name)), uintptr(flags.v), 0)
		fmt.Printf("memfd %s: %s\n", flags.name, errnoName(e))
		if e == 0 {
			fd := int(r)
			if flags.v&unix.MFD_ALLOW_SEALING != 0 {
				seals, _ := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
				fmt.Printf("memfd %s seals: %#x\n", flags.name, seals)
			}
			if flags.v&unix.MFD_HUGETLB == 0 {
				try("memfd "+flags.name, fd)
			}
			unix.Close(fd)
		}
	}
	r, _, e := unix.RawSyscall(unix.SYS_MEMFD_SECRET, 0, 0, 0)
	fmt.Println("memfd_secret:", errnoName(e))
	if e == 0 {
		fd := int(r)
		fmt.Println("memfd_secret ftruncate:", errName(unix.Ftruncate(fd, int64(len(self)))))
		fmt.Println("memfd_secret exec:", errName(unix.Exec("/proc/self/fd/"+strconv.Itoa(fd), argv, env)))
		unix.Close(fd)
	}
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o755)
		fmt.Printf("O_TMPFILE %s: %s\n", dir, errName(err))
		if err == nil {
			try("O_TMPFILE "+dir, fd)
			linked := dir + "/linked"
			err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, linked, unix.AT_SYMLINK_FOLLOW)
			fmt.Printf("O_TMPFILE %s link: %s\n", dir, errName(err))
			if err == nil {
				fmt.Printf("O_TMPFILE %s linked exec: %s\n", dir, errName(unix.Exec(linked, argv, env)))
			}
			unix.Close(fd)
		}
		plain := dir + "/plain"
		if err := os.WriteFile(plain, self, 0o755); err != nil {
			fmt.Printf("plain %s: %s\n", dir, errName(err))
			continue
		}
		fmt.Printf("plain %s exec: %s\n", dir, errName(unix.Exec(plain, argv, env)))
	}
}

// probeTerminal opens /dev/tty (the controlling terminal of the session it was started in),
// writes attackMark to it, makes its process group the terminal's foreground one (ignoring SIGTTOU,
// the kernel lets a background group do that) and reads the next line typed there.
func probeTerminal() {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_CLOEXEC, 0)
	fmt.Println("tty open:", errName(err))
	if err != nil {
		return
	}
	_, err = unix.Write(fd, []byte(attackMark+"\n"))
	fmt.Println("tty write:", errName(err))
	signal.Ignore(unix.SIGTTOU, unix.SIGTTIN)
	fmt.Println("tty foreground:", errName(unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())))
	_ = unix.SetNonblock(fd, true)
	buf := make([]byte, 256)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		n, err := unix.Read(fd, buf)
		if n > 0 {
			fmt.Printf("tty read: %q\n", buf[:n])
			return
		}
		if err != unix.EAGAIN {
			fmt.Println("tty read:", errName(err))
			return
		}
	}
	fmt.Println("tty read: nothing")
}

// attackMark is what probePlant leaves and probeLook looks for.
const attackMark = "clihost-attack"

// ipcKey is the System V IPC key of probePlant's objects.
const ipcKey = 0x434c4948

// probePlant leaves a trace wherever the calls of one user namespace might meet: a System V shared
// memory segment, message queue and semaphore set, a POSIX message queue, an abstract and a
// /tmp unix socket, a file in /dev/shm and /tmp; then says "planted" and waits for its end.
func probePlant() {
	id, err := unix.SysvShmGet(ipcKey, 4096, unix.IPC_CREAT|0o666)
	fmt.Println("shmget:", errName(err))
	if err == nil {
		if b, err := unix.SysvShmAttach(id, 0, 0); err == nil {
			copy(b, attackMark)
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_MSGGET, ipcKey, unix.IPC_CREAT|0o666, 0)
	fmt.Println("msgget:", errnoName(e))
	_, _, e = unix.RawSyscall(unix.SYS_SEMGET, ipcKey, 1, unix.IPC_CREAT|0o666)
	fmt.Println("semget:", errnoName(e))
	name, _ := unix.BytePtrFromString(attackMark)
	_, _, e = unix.RawSyscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_CREAT|unix.O_RDWR, 0o666, 0, 0, 0)
	fmt.Println("mq_open:", errnoName(e))
	for _, addr := range []string{"@" + attackMark, "/tmp/" + attackMark + ".sock"} {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			sa := &unix.SockaddrUnix{Name: addr}
			if err = unix.Bind(fd, sa); err == nil {
				err = unix.Listen(fd, 1)
			}
		}
		fmt.Printf("listen %s: %s\n", addr, errName(err))
	}
	for _, f := range []string{"/dev/shm/" + attackMark, "/tmp/" + attackMark} {
		fmt.Printf("write %s: %s\n", f, errName(os.WriteFile(f, []byte(attackMark), 0o666)))
	}
	fmt.Println("planted")
	_ = os.Stdout.Sync()
	// Waits until the host closes its standard input.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// probeLook looks for probePlant's traces and prints "found X" for each it sees.
func probeLook() {
	if _, err := unix.SysvShmGet(ipcKey, 0, 0); err == nil {
		fmt.Println("found shm")
	}
	if _, _, e := unix.RawSyscall(unix.SYS_MSGGET, ipcKey, 0, 0); e == 0 {
		fmt.Println("found msg")
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SEMGET, ipcKey, 0, 0); e == 0 {
		fmt.Println("found sem")
	}
	name, _ := unix.BytePtrFromString(attackMark)
	if _, _, e := unix.RawSyscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), unix.O_RDWR, 0, 0, 0, 0); e == 0 {
		fmt.Println("found mq")
	}
	for _, addr := range []string{"@" + attackMark, "/tmp/" + attackMark + ".sock"} {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil && unix.Connect(fd, &unix.SockaddrUnix{Name: addr}) == nil {
			fmt.Println("found socket", addr)
		}
	}
	for _, f := range []string{"/dev/shm/" + attackMark, "/tmp/" + attackMark} {
		if _, err := os.Stat(f); err == nil {
			fmt.Println("found file", f)
		}
	}
	fmt.Println("looked")
}

// probePlan is a plan running a copy of this test binary (in a directory every user can read: the
// build directory may be under /tmp, which the sandbox covers) as attackProbe in mode, with the
// seccomp filter and the memfd seal every plan clihost makes has.
func probePlan(t *testing.T, mode string) isolation.Plan {
	t.Helper()
	p := plan(t, testBinaryIn(t, workTree(t, "/var/tmp")), nil)
	p.Env = append(p.Env, attackProbeEnv+"="+mode)
	p.Seccomp, p.NoExecMemfd = true, true
	return p
}

// lines maps each "step: result" line of out to its result.
func lines(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			m[k] = v
		}
	}
	return m
}

// procValue is the content of /proc/pid/file, trimmed.
func procValue(t *testing.T, pid int, file string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// ioprio is pid's I/O priority (ioprio_get).
func ioprio(t *testing.T, pid int) uintptr {
	t.Helper()
	r, _, e := unix.RawSyscall(unix.SYS_IOPRIO_GET, 1 /* IOPRIO_WHO_PROCESS */, uintptr(pid), 0)
	if e != 0 {
		t.Fatalf("ioprio_get %d: %v", pid, e)
	}
	return r
}

// TestZygotePID1KnobsReachNoOtherProcess: from a rootless host, the program has the uid of PID 1
// (a clone of the zygote that shares its memory), of the zygote and of the daemon, in the one user
// namespace of every call. What a process of the same uid may do to another: PID 1's limits,
// priority, affinity and I/O class (its own, not the zygote's: PID 1 shares the zygote's memory,
// not its signal struct; and PRIO_USER and IOPRIO_WHO_USER, for every process of the uid, reach
// only those of the call's PID namespace); nothing that reads or maps its memory or descriptors
// (kcmp, get_robust_list, process_vm_readv, pidfd_getfd, process_madvise, its /proc links), no
// /proc file of it open for writing (oom_score_adj would carry over to the zygote and every call's
// PID 1, which share its memory), no user namespace entered or made, no key; and no signal stops
// it (here EPERM: Landlock's signal scope). The zygote's own oom_score_adj, nice, I/O priority and
// limits are as before, and it serves the next call. (From a root host PID 1 is root's, without
// any capability, and the program, of another uid, may not even read its limits.)
func TestZygotePID1KnobsReachNoOtherProcess(t *testing.T) {
	pool := zygotePool(t)
	zpid := zygotePID(t, pool)
	before := []string{procValue(t, zpid, "oom_score_adj"), procValue(t, zpid, "limits"), procValue(t, zpid, "stat")}
	ioprioBefore := ioprio(t, zpid)
	r := runPooled(t, pool, probePlan(t, "pid1"))
	requireZygoteServed(t, pool, 1)
	if r.code != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	got := lines(r.stdout)
	refused := []string{"kcmp", "get_robust_list", "process_vm_readv", "pidfd_getfd", "process_madvise",
		"readlink root", "readlink cwd", "readlink exe", "readlink ns/user", "readlink ns/mnt",
		"setns own", "unshare user", "add_key"}
	if got["prlimit get"] == "ok" { // PID 1 of the program's uid: its limits may be read, not raised
		refused = append(refused, "prlimit raise")
	}
	for _, f := range []string{"oom_score_adj", "oom_adj", "clear_refs", "timerslack_ns", "autogroup",
		"comm", "attr/current", "loginuid", "coredump_filter", "mem", "setgroups", "uid_map"} {
		refused = append(refused, "open "+f+" for writing")
	}
	for _, step := range refused {
		if v, ok := got[step]; !ok || v == "ok" {
			t.Errorf("%s: %q, want it refused", step, v)
		}
	}
	if v, ok := got["setns parent"]; ok && v == "ok" {
		t.Errorf("the program entered the parent of the zygote's user namespace")
	}
	if !strings.Contains(r.stdout, "PID 1 State: S") {
		t.Errorf("PID 1 is not sleeping after the signals: %q", r.stdout)
	}
	// The zygote's oom_score_adj is what a write to PID 1's would change (a shared memory); its
	// limits and nice (field 19 of stat) are its own.
	after := []string{procValue(t, zpid, "oom_score_adj"), procValue(t, zpid, "limits"), procValue(t, zpid, "stat")}
	if after[0] != before[0] || after[1] != before[1] {
		t.Errorf("the zygote's oom_score_adj or limits changed: %q -> %q", before[:2], after[:2])
	}
	if nice := func(stat string) string {
		_, rest, _ := strings.Cut(stat, ") ")
		if f := strings.Fields(rest); len(f) > 16 {
			return f[16]
		}
		return "?"
	}; nice(after[2]) != nice(before[2]) {
		t.Errorf("the zygote's nice changed: %s -> %s", nice(before[2]), nice(after[2]))
	}
	if got := ioprio(t, zpid); got != ioprioBefore {
		t.Errorf("the zygote's I/O priority changed: %#x -> %#x", ioprioBefore, got)
	}
	if r := runPooled(t, pool, plan(t, "/bin/true", nil)); r.code != 0 || r.failure != nil {
		t.Errorf("the next call: exit %d, failure %v", r.code, r.failure)
	}
	requireZygoteServed(t, pool, 2)
}

// TestZygoteExecOnlyFromExecutablePaths: a program may run no code it wrote (from a rootless host,
// where vm.memfd_noexec cannot be set, the seccomp filter's seal stands in for it): no memfd
// without MFD_NOEXEC_SEAL, whatever its other flags (high bits included); a sealed one cannot be
// made executable; no secret memory, O_TMPFILE file (linked or not) or plain file in the writable
// /tmp and /dev/shm is executed, through /proc/self/fd or execveat.
func TestZygoteExecOnlyFromExecutablePaths(t *testing.T) {
	pool := zygotePool(t)
	r := runPooled(t, pool, probePlan(t, "exec"))
	requireZygoteServed(t, pool, 1)
	if r.code != 0 || strings.Contains(r.stdout, "ran from") {
		t.Fatalf("exit %d, stdout %q, stderr %q: the program ran code it wrote", r.code, r.stdout, r.stderr)
	}
	got := lines(r.stdout)
	for step, v := range got {
		if strings.HasSuffix(step, " exec") || strings.HasSuffix(step, " execveat") {
			if v == "ok" {
				t.Errorf("%s: ok", step)
			}
		}
	}
	for _, step := range []string{"memfd EXEC", "memfd NOEXEC_SEAL fchmod", "memfd NOEXEC_SEAL|ALLOW_SEALING fchmod"} {
		if v, ok := got[step]; !ok || v == "ok" {
			t.Errorf("%s: %q, want it refused", step, v)
		}
	}
	if os.Geteuid() != 0 {
		// The seal: every memfd without MFD_NOEXEC_SEAL is refused.
		for _, step := range []string{"memfd 0", "memfd ALLOW_SEALING", "memfd HUGETLB", "memfd high bit|0"} {
			if got[step] != "EPERM" {
				t.Errorf("%s: %q, want EPERM (the filter's seal)", step, got[step])
			}
		}
	}
	if got["memfd NOEXEC_SEAL"] != "ok" {
		t.Errorf("memfd NOEXEC_SEAL: %q: a sealed memfd must still be allowed", got["memfd NOEXEC_SEAL"])
	}
}

// TestZygoteCallsShareNoIPC: two calls at once from one zygote (from a rootless host, in one user
// namespace, with one uid): what the first leaves in System V IPC, POSIX message queues, abstract
// and /tmp unix sockets, /dev/shm and /tmp, the second does not see.
func TestZygoteCallsShareNoIPC(t *testing.T) {
	pool := zygotePool(t)
	cmd, stdio := takeReady(t, pool, probePlan(t, "plant"), true)
	out := bufio.NewReader(stdio.Out)
	var planted strings.Builder
	for {
		line, err := out.ReadString('\n')
		planted.WriteString(line)
		if err != nil || line == "planted\n" {
			break
		}
	}
	t.Logf("planter: %s", planted.String())
	if !strings.HasSuffix(planted.String(), "planted\n") || strings.Count(planted.String(), ": ok") < 7 {
		t.Fatalf("the first call did not plant everything: %q", planted.String())
	}
	r := runPooled(t, pool, probePlan(t, "look"))
	stdio.In.Close() // the planter ends
	if r := finishPooled(t, cmd, stdio); r.code != 0 {
		t.Errorf("the planter: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "looked") || strings.Contains(r.stdout, "found") {
		t.Errorf("exit %d, stdout %q: the second call saw the first's traces", r.code, r.stdout)
	}
	requireZygoteServed(t, pool, 2)
}

const terminalEnv = "NSINIT_TEST_TERMINAL"

// TestZygoteHostsTerminalIsOutOfReach: a daemon started from a terminal (a developer's clihostd)
// has it as its controlling terminal. A call's program must not open it (/dev/tty, which every
// sandbox grants for a program's own terminal) to write to it, nor make itself the terminal's
// foreground and read what is typed there. A copy of this test binary runs as the leader of a
// session whose terminal is a pty this test holds, and runs a call through its pool's zygote (and
// one through a pooled init) that tries both; the test "types" a line into the pty once it sees
// the program's mark. (Both did, as root and rootless, before the zygote and the pool's inits got
// sessions of their own.)
func TestZygoteHostsTerminalIsOutOfReach(t *testing.T) {
	if mode := os.Getenv(terminalEnv); mode != "" {
		terminalChild(t, mode)
		return
	}
	requireRoot(t)
	for _, mode := range []string{"zygote", "init"} {
		t.Run(mode, func(t *testing.T) {
			seen, child := onTerminal(t, mode)
			if strings.Contains(seen, attackMark) || strings.Contains(child, "tty read: \"") || !strings.Contains(child, "tty open: ENXIO") {
				t.Errorf("a program served by the pool's %s reached the daemon's controlling terminal:\nterminal %q\nhost %s", mode, seen, child)
			}
		})
	}
}

// onTerminal runs terminalChild in mode in a copy of this test binary that leads a session whose
// controlling terminal is a new pty, types a line into it once the call's mark shows there, and
// returns what the pty showed and what the copy printed.
func onTerminal(t *testing.T, mode string) (seen, child string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestZygoteHostsTerminalIsOutOfReach$", "-test.v")
	cmd.Env = []string{terminalEnv + "=" + mode, rootlessZygoteEnv + "=" + os.Getenv(rootlessZygoteEnv), "CI=" + os.Getenv("CI")}
	typed := false
	child, seen, waitErr := fixture.OnTerminal(t, cmd, func(shown string) string {
		if typed || !strings.Contains(shown, attackMark) {
			return ""
		}
		typed = true
		return "typed-secret\n"
	})
	t.Logf("host: %s\nterminal: %q", child, seen)
	if strings.Contains(child, "skip:") {
		fixture.Missing(t, "%s", child) // under CI=true, a failure: the zygote must run there
	}
	if waitErr != nil || !strings.Contains(child, "served by "+mode) {
		t.Fatalf("the host failed (%v): %s", waitErr, child)
	}
	return seen, child
}

// terminalChild is TestZygoteHostsTerminalIsOutOfReach's host, a session leader with a terminal:
// it runs one call (through its pool's zygote, or an init: mode) whose program tries the
// terminal (probeTerminal), and prints what the program said.
func terminalChild(t *testing.T, mode string) {
	pool := NewPool(PoolConfig{Max: 1, NoZygote: mode != "zygote"})
	defer pool.Close()
	if mode == "zygote" {
		awaitZygote(pool)
		pool.mu.Lock()
		z, zerr := pool.zyg, pool.zygErr
		pool.mu.Unlock()
		if z == nil {
			fmt.Printf("skip: no zygote: %v\n", zerr)
			return
		}
	}
	r := runPooled(t, pool, probePlan(t, "tty"))
	fmt.Print(r.stdout)
	if s := pool.Stats(); mode == "zygote" && s.Zygote >= 1 || mode == "init" && s.Zygote == 0 {
		fmt.Println("served by " + mode)
	}
}
