package nsinit

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandbox/seccomp"
	"golang.org/x/sys/unix"
)

// openTreeCloexec is OPEN_TREE_CLOEXEC (= O_CLOEXEC), which x/sys/unix does not define.
const openTreeCloexec = unix.O_CLOEXEC

// sandboxHostname is the hostname inside the sandbox's UTS namespace.
const sandboxHostname = "sandbox"

// devices are the host device nodes bound into the sandbox's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// runInit is the init, PID 1 of the sandbox's PID namespace. It returns its exit status.
//
// It builds what every sandbox has before it reads its plan (see prepareNamespaces): an init
// started ahead of its call by a Pool waits there, with its namespaces made, until the call's plan
// arrives; one started for a call finds its plan already in the pipe.
func runInit() int {
	// Before anything else: a PID 1 drops signals it has no handler for, and the Go runtime would
	// exit on an unhandled SIGTERM. Signals that arrive during setup are forwarded to the program.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	// The init does one thing at a time; with one P, a pooled init woken by its plan after a long
	// wait runs on at once, without other threads looking for work (measured: the plan's read and
	// decode 220 -> 110 µs). initCommand already starts it with GOMAXPROCS=1 (then this is a no-op);
	// this keeps one P for an init started some other way.
	runtime.GOMAXPROCS(1)

	if os.Getpid() != 1 {
		return fail(exitFailure, "init", errors.New("not PID 1 of a new PID namespace"))
	}
	lifelineFD, err := lifeline()
	if err != nil {
		return fail(exitFailure, "init: lifeline", err)
	}
	// From here on this goroutine stays on its thread: the program is forked from it, and what
	// is per thread (the bounding set, then the credentials, Landlock and seccomp) is set on it.
	runtime.LockOSThread()
	if step, err := prepareNamespaces(mountOwnProc); err != nil {
		return fail(exitFailure, step, err)
	}
	if err := loopbackUp(); err != nil {
		return fail(exitFailure, "network: lo up", err)
	}
	if !planWaiting() {
		// Started ahead of its call (a Pool): do what does not depend on the plan now.
		if step, err := prewarm(); err != nil {
			return fail(exitFailure, step, err)
		}
	}
	e, err := readPlan(3)
	if err != nil {
		return fail(exitFailure, "init: plan", err)
	}
	if err := enforceDeadline(e.Deadline); err != nil {
		return fail(exitFailure, "init: deadline", err)
	}
	if e.Pooled {
		unix.Umask(e.HostUmask)
		if err := takeRlimits(e.HostRlimits); err != nil {
			return fail(exitFailure, "rlimits", err)
		}
	}
	if e.Plan.Egress {
		// Refused before the host gets listeners for a sandbox that could not be confined.
		if _, err := landlockConfig(netEgress); err != nil {
			return fail(exitFailure, "landlock", err)
		}
	}
	paths, err := openPlan(e.Plan)
	if err != nil {
		return fail(exitFailure, "resolve", err)
	}
	defer paths.close()
	// vm.memfd_noexec is per PID namespace: set here, it binds the program and everything it
	// starts. (In a user namespace the seccomp filter stands in for it, see sealMemfds.)
	if step, err := buildNamespaces(e.Plan, paths, e.Plan.NoExecMemfd && !e.UserNS); err != nil {
		return fail(exitFailure, step, err)
	}
	switch {
	case e.Plan.Egress:
		if err := sendListeners(egressFD); err != nil {
			return fail(exitFailure, "network: egress listeners", err)
		}
	case e.Pooled:
		unix.Close(egressFD) // a pooled init always has the socket pair; this call has no egress
	}
	if e.StdinNull {
		if err := stdinFromNull(); err != nil {
			return fail(exitFailure, "stdin", err)
		}
	}
	if err := joinCgroups(e.CgroupFDs); err != nil {
		return fail(exitFailure, "cgroup: join", err)
	}
	if step, err := confine(e, paths, lifelineFD); err != nil {
		code := exitFailure
		if step == "verify" {
			code = exitVerify
		}
		return fail(code, step, err)
	}
	go watchHost(lifelineFD)
	prog, err := startProgram(e.Plan)
	if err != nil {
		return fail(exitFailure, "exec "+e.Plan.Path, err)
	}
	// The program was exec'd: from now on the report pipe only carries limit notes.
	if len(e.Plan.Ingress) > 0 {
		go serveIngressDials(ingressFD, e.Plan.Ingress)
	}
	code := supervise(prog, sigs)
	// 128+n is also what a program exiting with that code itself looks like: it can only
	// mislabel its own failure.
	reportLimits(reportFD, e.Plan.Limits, syscall.Signal(max(code-128, 0)))
	reportEnd(code)
	return code
}

// reportEnd ends the sandbox for the host before the init itself exits (the kernel's teardown of
// its namespaces takes a while, and the host need not wait for it): it kills every other process
// of the PID namespace and reaps them until none is left, closes the init's standard streams (the
// host then reads the end of the program's output) and writes the end line with the program's
// status to the report pipe. A process the kill could not reach keeps the init waiting, as its
// exit would have.
func reportEnd(code int) {
	for {
		_ = unix.Kill(-1, unix.SIGKILL) // every process of the namespace but this one
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
			break
		} else if err != nil && !errors.Is(err, unix.EINTR) {
			return // cannot tell whether the sandbox is empty: the init's exit will say
		}
	}
	for fd := range 3 {
		unix.Close(fd)
	}
	_, _ = unix.Write(reportFD, []byte(fmt.Sprintf("%s%d\n", endLine, code)))
}

// prepareNamespaces builds what does not depend on the plan: the mount namespace made private (so
// that nothing mounted or unmounted here reaches the host, and nothing the host mounts later
// appears here, neither read-only nor masked), a fresh /proc for the PID namespace (mountProc),
// the minimal /dev and the hostname; not the loopback interface, which is the network namespace's
// (an init's own; for the zygote's thread, see zygote_net.go). The host's own trees are still in
// place afterwards: the plan's paths are resolved in the host's view (openPlan). On failure it
// returns the failed step and its error.
func prepareNamespaces(mountProc func() error) (string, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "mount: make / private", err
	}
	// Detached copies of the host's device nodes, taken before /dev is covered.
	devs, err := cloneDevices()
	if err != nil {
		return "mount: clone devices", err
	}
	defer closeAll(devs)
	if err := mountProc(); err != nil {
		return "mount: /proc", err
	}
	if err := setupDev(devs); err != nil {
		return "mount: /dev", err
	}
	if err := unix.Sethostname([]byte(sandboxHostname)); err != nil {
		return "sethostname", err
	}
	return "", nil
}

// mountOwnProc mounts at /proc a procfs of the caller's PID namespace (nosuid, nodev, noexec).
func mountOwnProc() error {
	return unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// planWaiting reports whether the plan is already in its pipe (an init started for its call) rather
// than still to come (one waiting in a Pool).
func planWaiting() bool {
	fds := []unix.PollFd{{Fd: 3, Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0
}

// prewarm does, on the init's locked thread, the parts of confine that do not depend on the plan:
// it drops the bounding set (nothing the init does before the program's exec needs it) and builds
// the seccomp program the plan will ask for.
func prewarm() (string, error) {
	if err := dropBoundingSet(); err != nil {
		return "privileges", err
	}
	boundingSetDropped = true
	// The program a host's plan asks for (sandbox.Policy.Plan always sets NoExecMemfd); another
	// is built when a plan asks for it.
	if err := seccomp.Prepare(seccomp.Options{NoExecMemfd: true, SealMemfds: sealMemfds(inUserNamespace())}); err != nil {
		return "seccomp", err
	}
	return "", nil
}

// inUserNamespace reports whether the init runs in a user namespace of its own (the host is not
// root): its uid map is then not the initial namespace's identity map of every uid.
func inUserNamespace() bool {
	data, err := os.ReadFile("/proc/self/uid_map")
	return err != nil || strings.Join(strings.Fields(string(data)), " ") != "0 0 4294967295"
}

// stdinFromNull makes the sandbox's /dev/null the init's standard input, which the program
// inherits: a pooled init was started with a pipe there, and this call has no input.
func stdinFromNull() error {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Dup3(fd, 0, 0)
}

// buildNamespaces finishes the mount namespace for p, after prepareNamespaces, from the descriptors
// of its paths (see openPlan): everything read-only and nosuid, fresh /tmp and /dev/shm, the
// writable and protected trees, the egress files, the pins and the deny masks; with memfdNoexec,
// vm.memfd_noexec set to 2 for the caller's PID namespace. On failure it returns the failed step
// and its error.
func buildNamespaces(p isolation.Plan, paths *pathTable, memfdNoexec bool) (string, error) {
	// Detached copies of the writable roots, taken before / turns read-only, so they keep the
	// host's flags, and of the trees under /tmp that the fresh /tmp will hide.
	trees, err := cloneTrees(p, paths)
	if err != nil {
		return "mount: clone trees", err
	}
	protected, err := cloneProtected(p, paths)
	if err != nil {
		closeTrees(trees)
		return "mount: clone protected trees", err
	}
	defer func() {
		closeTrees(trees)
		closeTrees(protected)
	}()
	if memfdNoexec {
		if err := os.WriteFile(memfdNoexecSysctl, []byte("2"), 0); err != nil {
			return "sysctl vm.memfd_noexec", err
		}
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, ro); err != nil {
		return "mount: make everything read-only", err
	}
	for _, dir := range []string{"/tmp", "/dev/shm"} {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, tmpfsOptions(p.Limits)); err != nil {
			return "mount: " + dir, err
		}
	}
	var tmp unix.Stat_t
	if err := unix.Stat("/tmp", &tmp); err != nil {
		return "mount: /tmp", err
	}
	for _, t := range trees {
		if err := attachTree(t, tmp.Dev); err != nil {
			return "mount: bind " + t.path, err
		}
	}
	for _, t := range protected {
		if err := attachTree(t, tmp.Dev); err != nil {
			return "mount: protect " + t.path, err
		}
	}
	if within(p.Dir, "/tmp") && p.Dir != "/tmp" {
		// A working directory under the host's /tmp that the plan does not bind (the program may
		// not read it) still has to exist to be entered: an empty directory in the sandbox's /tmp
		// (never one created in a host tree bound there).
		fd, err := openTarget(p.Dir, nil)
		if errors.Is(err, unix.ENOENT) {
			fd, err = makeTarget(p.Dir, true, tmp.Dev)
		}
		if err != nil {
			return "mount: working directory", err
		}
		unix.Close(fd)
	}
	if err := sealSkeleton(p, slices.Concat(trees, protected), tmp.Dev); err != nil {
		return "mount: seal /tmp skeleton", err
	}
	if p.Egress {
		// Before the masks: a deny path covering /etc hides these too.
		if err := mountEgressFiles(egressFiles); err != nil {
			return "mount: egress files", err
		}
	}
	if err := pinAncestors(p, paths); err != nil {
		return "mount: pin", err
	}
	if err := maskDenied(p.Deny, paths, trees); err != nil {
		return "mount: mask", err
	}
	return "", nil
}

// sealSkeleton makes read-only the directories the sandbox made in its private /tmp to hold the
// mountpoints of host paths and the working directory (/tmp/ws for a bound /tmp/ws/out): they stand
// for host directories the plan does not bind, and a write there would land in the sandbox's tmpfs,
// which the host never sees, and succeed. Each top directory (/tmp/ws) is covered by a recursive
// clone of itself, read-only (nosuid, nodev, noexec) at its root only, so the host trees bound
// inside keep their own attributes; such a write then fails with EROFS, as it does outside /tmp.
// The rest of /tmp stays the program's free scratch space. trees are the mounts already attached.
func sealSkeleton(p isolation.Plan, trees []tree, tmpDev uint64) error {
	bound := map[string]bool{}
	paths := []string{p.Dir}
	for _, t := range trees {
		bound[t.path] = true
		paths = append(paths, t.path)
	}
	tops := map[string]bool{}
	for _, path := range paths {
		if within(path, "/tmp") && path != "/tmp" {
			top, _, _ := strings.Cut(strings.TrimPrefix(path, "/tmp/"), "/")
			if top = "/tmp/" + top; !bound[top] {
				tops[top] = true
			}
		}
	}
	for _, top := range slices.Sorted(maps.Keys(tops)) {
		if err := sealDir(top, tmpDev); err != nil {
			return fmt.Errorf("%s: %w", top, err)
		}
	}
	return nil
}

// sealDir covers dir, a directory of the sandbox's /tmp (whose device is tmpDev), with a
// recursive clone of itself made read-only at its root. A dir that is missing (its only paths
// were missing read-only trees, left unbound) needs nothing.
func sealDir(dir string, tmpDev uint64) error {
	target, err := openTarget(dir, nil)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(target)
	var st unix.Stat_t
	if err := unix.Fstat(target, &st); err != nil {
		return err
	}
	if st.Dev != tmpDev || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return changedError(dir, "not a directory of the sandbox's /tmp")
	}
	fd, err := cloneAt(target)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, ro); err != nil {
		return fmt.Errorf("set attributes: %w", err)
	}
	if err := attachAt(fd, target); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}

// cloneDevices returns detached bind mounts of the host's device nodes, in the order of devices.
func cloneDevices() ([]int, error) {
	var fds []int
	for _, name := range devices {
		fd, err := unix.OpenTree(unix.AT_FDCWD, "/dev/"+name, unix.OPEN_TREE_CLONE|openTreeCloexec)
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("/dev/%s: %w", name, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// setupDev covers /dev with a small tmpfs holding the device binds, a new devpts instance with its
// ptmx, the usual symbolic links and a mountpoint for /dev/shm.
func setupDev(devs []int) error {
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for i, name := range devices {
		path := "/dev/" + name
		// Created, not opened for writing: a file open for writing on a mount keeps it from
		// turning read-only (EBUSY), and in the zygote a process forked meanwhile by another
		// thread holds a copy of every descriptor for a moment.
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
		if err != nil {
			return err
		}
		unix.Close(fd)
		if err := unix.MoveMount(devs[i], "", unix.AT_FDCWD, path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("bind %s: %w", path, err)
		}
	}
	for _, dir := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	links := [][2]string{
		{"pts/ptmx", "/dev/ptmx"}, {"/proc/self/fd", "/dev/fd"},
		{"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"},
	}
	for _, l := range links {
		if err := os.Symlink(l[0], l[1]); err != nil {
			return err
		}
	}
	return nil
}

// loopbackUp sets IFF_UP on lo, the only interface of the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set flags: %w", err)
	}
	return nil
}

// tree is a detached copy of a host tree (a file or a directory with its submounts) to attach at
// path once the read-only root and the fresh /tmp are in place.
type tree struct {
	path string
	fd   int
	src  unix.Stat_t // the host file it is a copy of
	attr uint64      // MOUNT_ATTR_* flags set on every mount of the tree before it is attached
}

// cloneTrees copies the trees that must be (re)attached: every ReadWrite root (nosuid, nodev, and
// noexec unless an Exec file lies inside), and every ReadOnly or Exec path at or under /tmp that no
// ReadWrite root covers (read-only as well), since the fresh /tmp hides the host's. Each is a clone
// of the descriptor openPlan resolved. Missing ReadOnly and Exec paths under /tmp are skipped. The
// trees come back parents first.
func cloneTrees(p isolation.Plan, paths *pathTable) ([]tree, error) {
	type want struct {
		path     string
		readOnly bool
	}
	var wants []want
	for _, rw := range p.ReadWrite {
		wants = append(wants, want{rw, false})
	}
	for _, ro := range slices.Concat(p.ReadOnly, p.Exec) {
		if _, covered := coveringPath(ro, p.ReadWrite); within(ro, "/tmp") && !covered {
			wants = append(wants, want{ro, true})
		}
	}
	slices.SortStableFunc(wants, func(a, b want) int {
		return strings.Count(a.path, "/") - strings.Count(b.path, "/")
	})
	var trees []tree
	for _, w := range wants {
		src, ok := paths.fd(w.path)
		if !ok {
			continue // missing ReadOnly or Exec path (openPlan refuses a missing ReadWrite root)
		}
		fd, err := cloneAt(src)
		if err != nil {
			closeTrees(trees)
			return nil, fmt.Errorf("%s: %w", w.path, err)
		}
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if w.readOnly {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		if !anyWithin(p.Exec, w.path) {
			attr |= unix.MOUNT_ATTR_NOEXEC
		}
		trees = append(trees, tree{path: w.path, fd: fd, src: paths.st[w.path], attr: attr})
	}
	return trees, nil
}

// cloneProtected copies the Protect paths openPlan resolved, read-only (nosuid, nodev, and noexec
// unless an Exec file lies inside), to be attached over themselves after the ReadWrite roots,
// parents first. Missing ones are skipped.
func cloneProtected(p isolation.Plan, paths *pathTable) ([]tree, error) {
	ordered := slices.SortedStableFunc(slices.Values(p.Protect), func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
	var trees []tree
	for _, path := range ordered {
		src, ok := paths.fd(path)
		if !ok {
			continue
		}
		fd, err := cloneAt(src)
		if err != nil {
			closeTrees(trees)
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		attr := uint64(unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if !anyWithin(p.Exec, path) {
			attr |= unix.MOUNT_ATTR_NOEXEC
		}
		trees = append(trees, tree{path: path, fd: fd, src: paths.st[path], attr: attr})
	}
	return trees, nil
}

// closeTrees closes the detached mounts of trees.
func closeTrees(trees []tree) {
	for _, t := range trees {
		unix.Close(t.fd)
	}
}

// anyWithin reports whether one of paths lies within dir.
func anyWithin(paths []string, dir string) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return within(p, dir) })
}

// attachTree sets t's mount attributes and mounts it at t.path, resolved without symbolic links in
// the sandbox's view: the host file t was cloned from, or a mountpoint in the private /tmp (whose
// device is tmpDev), created with its parents when it is missing.
func attachTree(t tree, tmpDev uint64) error {
	attr := &unix.MountAttr{Attr_set: t.attr}
	if err := unix.MountSetattr(t.fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("set attributes: %w", err)
	}
	target, err := openTarget(t.path, nil)
	if errors.Is(err, unix.ENOENT) && within(t.path, "/tmp") && t.path != "/tmp" {
		target, err = makeTarget(t.path, t.src.Mode&unix.S_IFMT == unix.S_IFDIR, tmpDev)
	}
	if err != nil {
		return err
	}
	defer unix.Close(target)
	var st unix.Stat_t
	if err := unix.Fstat(target, &st); err != nil {
		return err
	}
	if st.Dev != tmpDev && !sameFile(&st, &t.src) {
		return changedError(t.path, "the path names another file")
	}
	if err := attachAt(t.fd, target); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}

// pinAncestors bind-mounts onto itself every directory between a writable root and an existing
// deny path or protected path inside it (ws/.git for ws/.git/hooks, ws/.cli for ws/.cli/gh). A
// mount point cannot be renamed or removed (EBUSY), and the deny path itself becomes one when it
// is masked (a protected path when it is bound read-only), so the program cannot move a masked or
// protected path aside and put its own in its place (a .git/hooks or a bundle of its choosing).
// Landlock does not split writable roots (see grants), so this pinning, the masks and the
// read-only binds are what keep those paths. The directories are resolved without symbolic links,
// in the sandbox's view.
func pinAncestors(p isolation.Plan, paths *pathTable) error {
	pins := map[string]bool{}
	for _, d := range slices.Concat(p.Deny, p.Protect) {
		root, ok := coveringPath(d, p.ReadWrite)
		if !ok || root == d {
			continue
		}
		if _, ok := paths.fd(d); !ok {
			continue // nothing to mask or protect, nothing to pin
		}
		for a := filepath.Dir(d); a != root && within(a, root); a = filepath.Dir(a) {
			pins[a] = true
		}
	}
	// Outer directories first: an inner pin is then taken from (and stays on) the outer one.
	ordered := slices.SortedFunc(maps.Keys(pins), func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
	for _, dir := range ordered {
		if err := pin(dir); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// pin bind-mounts the directory dir onto itself.
func pin(dir string) error {
	target, err := openTarget(dir, nil)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	fd, err := cloneAt(target)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return attachAt(fd, target)
}

// maskDenied mounts over every deny path an empty, read-only directory (mode 0555) or file (mode
// 0444), both taken from one private, detached tmpfs: a denied directory lists as empty and a
// denied file reads as empty, so tree walkers (rg, grep -r, find, git status) go through and see
// nothing of what is denied. Each mask lands on the very file openPlan resolved (see openTarget).
// Deny paths that did not exist then are left alone (no Landlock rule grants them), and so are
// those hidden anyway (under the host's /tmp, outside the trees bound there) or inside an outer
// mask. The mask inodes are recorded in paths (maskDirKey, maskFileKey) for their Landlock rules.
func maskDenied(deny []string, paths *pathTable, trees []tree) error {
	if len(deny) == 0 {
		return nil
	}
	mfd, err := detachedTmpfs("size", "4k", "mode", "0555")
	if err != nil {
		return err
	}
	defer closeDetached(mfd)
	if err := unix.Mkdirat(mfd, "dir", 0o555); err != nil {
		return err
	}
	f, err := unix.Openat(mfd, "file", unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return err
	}
	unix.Close(f)
	for key, name := range map[string]string{maskDirKey: "dir", maskFileKey: "file"} {
		fd, err := openBeneath(mfd, name)
		if err != nil {
			return err
		}
		if err := paths.add(key, fd); err != nil {
			return err
		}
	}
	var treePaths, masked []string
	for _, t := range trees {
		treePaths = append(treePaths, t.path)
	}
	ordered := slices.SortedFunc(slices.Values(deny), func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
	for _, d := range ordered {
		st, ok := paths.st[d]
		if _, inMask := coveringPath(d, masked); !ok || inMask {
			continue
		}
		if _, bound := coveringPath(d, treePaths); within(d, "/tmp") && !bound {
			continue // the host's /tmp is not in the sandbox
		}
		src := "file"
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			src = "dir"
		}
		if err := mountMask(mfd, src, d, &st); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		masked = append(masked, d)
	}
	return nil
}

// closeDetached closes fd, a mount detached from every mount table (fsmount, or open_tree's clone)
// that was never attached, on another thread. The close unmounts it, and the kernel waits there
// for an RCU grace period (namespace_unlock: synchronize_rcu_expedited) before close returns:
// about 0.3 ms on a 2-vCPU VM, which a sandbox's build must not wait for. Nothing needs the
// mount gone sooner: no path leads to it, and its descriptor is close-on-exec. The close runs at
// once, on a thread the caller's is not locked to, before the caller clones the program's process
// (whose copy of the descriptor table would otherwise hold the last reference and pay the wait).
func closeDetached(fd int) {
	go unix.Close(fd)
}

// detachedTmpfs creates a private tmpfs (nosuid, nodev, noexec) with the options opts (key, value,
// key, value...) and returns its detached mount, for mountMask to clone files from.
func detachedTmpfs(opts ...string) (int, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	for i := 0; i+1 < len(opts); i += 2 {
		if err := unix.FsconfigSetString(fsfd, opts[i], opts[i+1]); err != nil {
			return -1, fmt.Errorf("fsconfig: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("fsconfig create: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsmount: %w", err)
	}
	return mfd, nil
}

// mountMask attaches a read-only clone of src (in the mask tmpfs at mfd) over target, which must
// still be the file want describes.
func mountMask(mfd int, src, target string, want *unix.Stat_t) error {
	fd, err := unix.OpenTree(mfd, src, unix.OPEN_TREE_CLONE|openTreeCloexec)
	if err != nil {
		return fmt.Errorf("clone: %w", err)
	}
	defer unix.Close(fd)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("set attributes: %w", err)
	}
	var tfd int
	if want != nil {
		tfd, err = openTarget(target, want)
	} else {
		tfd, err = openNoSymlinks(target)
	}
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	if err := attachAt(fd, tfd); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return nil
}

// closeAll closes fds.
func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// supervise reaps every child of the init (orphans of the sandbox are re-parented to it), forwards
// SIGTERM, SIGINT and SIGHUP to the program, and returns its exit status once it is gone: its exit
// code, or 128+n when signal n killed it. The init's exit then kills what is left in the namespace.
// The reaping runs on the calling thread itself, not handed to another one: the program's exit
// then wakes the init once (each hand-off between threads is a wake-up, which costs up to a few
// hundred microseconds on an idle virtual CPU).
func supervise(prog int, sigs <-chan os.Signal) int {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = syscall.Kill(prog, sig.(syscall.Signal)) // fails only once the program is gone
			case <-stop:
				return
			}
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return fail(exitFailure, "init: wait", err)
		case pid != prog:
			continue
		case ws.Signaled():
			return 128 + int(ws.Signal())
		default:
			return ws.ExitStatus()
		}
	}
}
