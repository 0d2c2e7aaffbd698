//go:build linux && (amd64 || arm64)

package seccomp

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// The kernel tests re-execute the test binary as a helper that installs the
// filter and then makes one syscall, printing "RESULT <errno name>" (or
// "RESULT ok"). Running without the filter as well ("baseline") shows that
// the filter, not the kernel's own checks, produced the result.
const (
	envProbe     = "CLIHOST_SECCOMP_PROBE"
	envNoFilter  = "CLIHOST_SECCOMP_NO_FILTER"
	envNoMemfd   = "CLIHOST_SECCOMP_NO_EXEC_MEMFD"
	envSealMemfd = "CLIHOST_SECCOMP_SEAL_MEMFDS"
)

// probe is one experiment run in the helper. It calls install, which
// installs the filter unless the run is a baseline, at the point where the
// filter must take effect, and returns the result to report.
type probe func(install func()) string

var probes = map[string]probe{
	"ptrace_traceme": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0))
	},
	// A multithreaded process cannot create a user namespace (EINVAL), so
	// the baseline differs from the filter's EPERM.
	"unshare_newuser": func(install func()) string {
		install()
		return errResult(unix.Unshare(unix.CLONE_NEWUSER))
	},
	"unshare_newns": func(install func()) string {
		install()
		return errResult(unix.Unshare(unix.CLONE_NEWNS))
	},
	// CLONE_NEWNS|CLONE_FS is rejected with EINVAL before any process is
	// created, so the baseline is safe to run from Go.
	"clone_newns": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_FS|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0))
	},
	// A zero size is EINVAL without the filter.
	"clone3": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0))
	},
	"setns": func(install func()) string {
		install()
		return errResult(unix.Setns(-1, unix.CLONE_NEWNET))
	},
	"mount": func(install func()) string {
		install()
		return errResult(unix.Mount("none", "/nonexistent/clihost-seccomp", "tmpfs", 0, ""))
	},
	"umount2": func(install func()) string {
		install()
		return errResult(unix.Unmount("/nonexistent/clihost-seccomp", unix.MNT_DETACH))
	},
	"fsopen": func(install func()) string {
		install()
		fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		return fdResult(fd, err)
	},
	// A NULL params pointer is EFAULT without the filter.
	"io_uring_setup": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, 0, 0))
	},
	"bpf": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_BPF, 0xffff, 0, 0))
	},
	"open_by_handle_at": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), 0, 0))
	},
	"socket_packet":         socketProbe(unix.AF_PACKET, unix.SOCK_RAW, 0),
	"socket_packet_highbit": socketProbe(1<<32|unix.AF_PACKET, unix.SOCK_RAW, 0),
	"socket_vsock":          socketProbe(unix.AF_VSOCK, unix.SOCK_STREAM, 0),
	"socket_inet_raw":       socketProbe(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP),
	"socket_inet_raw_flags": socketProbe(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP),
	"socket_inet6_raw":      socketProbe(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6),
	"socket_inet_packet":    socketProbe(unix.AF_INET, unix.SOCK_PACKET, 0x0300),
	"socket_inet_mptcp":     socketProbe(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP),
	"socket_inet6_mptcp":    socketProbe(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP),
	"socket_inet_stream":    socketProbe(unix.AF_INET, unix.SOCK_STREAM, 0),
	"socket_inet_dgram":     socketProbe(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP),
	"socket_unix":           socketProbe(unix.AF_UNIX, unix.SOCK_STREAM, 0),
	"socket_netlink_route":  socketProbe(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE),
	"socket_netlink_audit":  socketProbe(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT),
	"socketpair_unix": func(install func()) string {
		install()
		return socketpairResult(unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0))
	},
	"socketpair_inet": func(install func()) string {
		install()
		return socketpairResult(unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0))
	},
	"tiocsti":          ttyProbe(unix.TIOCSTI),
	"tiocsti_highbits": ttyProbe(1<<32 | unix.TIOCSTI),
	"tioclinux":        ttyProbe(unix.TIOCLINUX),
	"tcgets":           ttyProbe(unix.TCGETS),
	"personality_linux32": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_PERSONALITY, 0x0008, 0, 0)) // PER_LINUX32
	},
	"personality_query": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0))
	},
	"personality_linux": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(unix.SYS_PERSONALITY, 0, 0, 0))
	},
	"memfd_exec":    memfdProbe(unix.MFD_EXEC | unix.MFD_CLOEXEC),
	"memfd_cloexec": memfdProbe(unix.MFD_CLOEXEC),
	"memfd_sealed":  memfdProbe(unix.MFD_NOEXEC_SEAL | unix.MFD_CLOEXEC),
	// fd -1 is EBADF without the filter, so the baseline does not exec.
	"execveat_empty_path": func(install func()) string {
		install()
		empty := []byte{0}
		argv := []*byte{nil}
		return rawResult(unix.RawSyscall6(unix.SYS_EXECVEAT, ^uintptr(0), uintptr(unsafe.Pointer(&empty[0])),
			uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&argv[0])), unix.AT_EMPTY_PATH, 0))
	},
	// Syscall number -1 must reach the kernel (ENOSYS), not be killed.
	"nr_minus_one": func(install func()) string {
		install()
		return rawResult(unix.RawSyscall(^uintptr(0), 0, 0, 0))
	},
	// The calling thread carries the filter and no_new_privs; the others keep
	// what they had (Install binds one thread, the one that forks the program).
	"status": func(install func()) string {
		install()
		self, err := os.Readlink("/proc/thread-self")
		if err != nil {
			return err.Error()
		}
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err.Error()
		}
		for _, task := range tasks {
			st, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
			if err != nil {
				return err.Error()
			}
			name := task.Name()
			if strings.HasSuffix(self, "/task/"+name) {
				name = "self"
			}
			for _, line := range strings.Split(string(st), "\n") {
				if strings.HasPrefix(line, "Seccomp") || strings.HasPrefix(line, "NoNewPrivs") {
					fmt.Printf("task %s %s\n", name, line)
				}
			}
		}
		return "ok"
	},
	// Forking and executing an ordinary program still works.
	"exec_true": func(install func()) string {
		install()
		return errResult(exec.Command("/bin/true").Run())
	},
	// The filter survives execve; a shell can fork, exec and read /proc.
	"exec_sh": func(install func()) string {
		install()
		const script = `ls / && grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status && echo "RESULT ok"`
		return errResult(syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ()))
	},
	// Real-world runtimes with threads, subprocesses and (node) io_uring.
	"node": commandProbe("node", "-e", `
		const cp = require("child_process"), fs = require("fs"), wt = require("worker_threads");
		fs.writeFileSync("/dev/null", fs.readFileSync("/proc/self/status"));
		console.log(cp.execFileSync("/bin/sh", ["-c", "echo child"]).toString().trim());
		fs.readFile("/proc/self/status", "utf8", (err, s) => {
			if (err) throw err;
			const w = new wt.Worker("require('worker_threads').parentPort.postMessage('worker')", {eval: true});
			w.on("message", (m) => console.log(m, s.match(/^Seccomp:.*$/m)[0]));
		});`),
	"python3": commandProbe("python3", "-c", `
import subprocess, threading
out = []
t = threading.Thread(target=lambda: out.append(subprocess.run(["/bin/echo", "child"], capture_output=True, check=True).stdout))
t.start(); t.join()
print(out[0].decode().strip())`),
}

func socketProbe(family, typ, proto uintptr) probe {
	return func(install func()) string {
		install()
		fd, _, errno := unix.RawSyscall(unix.SYS_SOCKET, family, typ, proto)
		if errno != 0 {
			return unix.ErrnoName(errno)
		}
		unix.Close(int(fd))
		return "ok"
	}
}

func memfdProbe(flags int) probe {
	return func(install func()) string {
		install()
		fd, err := unix.MemfdCreate("clihost-seccomp", flags)
		return fdResult(fd, err)
	}
}

// ttyProbe issues ioctl cmd on a pty that is the helper's controlling
// terminal, so that TIOCSTI succeeds without the filter.
func ttyProbe(cmd uintptr) probe {
	return func(install func()) string {
		tty, err := openControllingPty()
		if err != nil {
			return err.Error()
		}
		install()
		var buf [64]byte // a char for TIOCSTI, a struct termios for TCGETS
		buf[0] = '\n'
		return rawResult(unix.RawSyscall(unix.SYS_IOCTL, uintptr(tty), cmd, uintptr(unsafe.Pointer(&buf[0]))))
	}
}

// openControllingPty allocates a pty through /dev/ptmx, starts a session
// and makes the pty's slave side its controlling terminal.
func openControllingPty() (int, error) {
	ptm, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(ptm, unix.TIOCSPTLCK, 0); err != nil {
		return -1, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(ptm, unix.TIOCGPTN)
	if err != nil {
		return -1, fmt.Errorf("ptsname: %w", err)
	}
	if _, err := unix.Setsid(); err != nil {
		return -1, fmt.Errorf("setsid: %w", err)
	}
	pts, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open pts: %w", err)
	}
	if err := unix.IoctlSetInt(pts, unix.TIOCSCTTY, 0); err != nil {
		return -1, fmt.Errorf("TIOCSCTTY: %w", err)
	}
	return pts, nil
}

// commandProbe runs name with args after Install and passes on its output.
func commandProbe(name string, args ...string) probe {
	return func(install func()) string {
		install()
		out, err := exec.Command(name, args...).CombinedOutput()
		os.Stdout.Write(out)
		return errResult(err)
	}
}

func rawResult(_, _ uintptr, errno unix.Errno) string {
	if errno != 0 {
		return unix.ErrnoName(errno)
	}
	return "ok"
}

func errResult(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func fdResult(fd int, err error) string {
	if err == nil {
		unix.Close(fd)
	}
	return errResult(err)
}

func socketpairResult(fds [2]int, err error) string {
	if err == nil {
		unix.Close(fds[1])
	}
	return fdResult(fds[0], err)
}

// TestHelperProcess is the child side of the kernel tests; it does nothing
// unless envProbe is set.
func TestHelperProcess(t *testing.T) {
	name, ok := os.LookupEnv(envProbe)
	if !ok {
		t.Skip("runs only as a child of the kernel tests")
	}
	p := probes[name]
	if p == nil {
		fmt.Printf("RESULT unknown probe %q\n", name)
		os.Exit(2)
	}
	// KILL_PROCESS dumps core; keep cores out of the package directory.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		fmt.Printf("RESULT setrlimit: %v\n", err)
		os.Exit(2)
	}
	// Install binds the calling thread: the probe runs on it, and forks from it.
	runtime.LockOSThread()
	install := func() {
		if os.Getenv(envNoFilter) != "" {
			return
		}
		if err := Install(Options{NoExecMemfd: os.Getenv(envNoMemfd) != "", SealMemfds: os.Getenv(envSealMemfd) != ""}); err != nil {
			fmt.Printf("RESULT install: %v\n", err)
			os.Exit(2)
		}
	}
	fmt.Printf("RESULT %s\n", p(install))
	os.Exit(0)
}

// runProbe runs probe name in a helper process and returns its result, its
// whole output, and how it ended.
func runProbe(t *testing.T, name string, filtered bool, opts Options) (result, output string, state *os.ProcessState) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envProbe+"="+name)
	if !filtered {
		cmd.Env = append(cmd.Env, envNoFilter+"=1")
	}
	if opts.NoExecMemfd {
		cmd.Env = append(cmd.Env, envNoMemfd+"=1")
	}
	if opts.SealMemfds {
		cmd.Env = append(cmd.Env, envSealMemfd+"=1")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run helper %s: %v", name, err)
	}
	output = stdout.String()
	for _, line := range strings.Split(output, "\n") {
		if r, ok := strings.CutPrefix(line, "RESULT "); ok {
			result = r
		}
	}
	if stderr.Len() > 0 {
		t.Logf("helper %s stderr: %s", name, stderr.String())
	}
	return result, output, cmd.ProcessState
}

func TestKernelErrnos(t *testing.T) {
	memfd := Options{NoExecMemfd: true}
	sealed := Options{NoExecMemfd: true, SealMemfds: true} // a user namespace's stand-in for vm.memfd_noexec=2
	tests := []struct {
		probe string
		opts  Options
		want  string
		// baseline runs the probe without the filter too and requires a
		// different result, proving the filter produced want. It is false
		// where the unfiltered syscall would be unsafe to make.
		baseline bool
	}{
		{"ptrace_traceme", Options{}, "EPERM", false},
		{"unshare_newuser", Options{}, "EPERM", true},
		{"unshare_newns", Options{}, "EPERM", true},
		{"clone_newns", Options{}, "EPERM", true},
		{"clone3", Options{}, "ENOSYS", true},
		{"setns", Options{}, "EPERM", true},
		{"mount", Options{}, "EPERM", true},
		{"umount2", Options{}, "EPERM", true},
		{"fsopen", Options{}, "EPERM", true},
		{"io_uring_setup", Options{}, "EPERM", true},
		{"bpf", Options{}, "EPERM", true},
		{"open_by_handle_at", Options{}, "EPERM", true},
		{"socket_packet", Options{}, "EAFNOSUPPORT", true},
		{"socket_packet_highbit", Options{}, "EAFNOSUPPORT", true},
		{"socket_vsock", Options{}, "EAFNOSUPPORT", true},
		{"socket_inet_raw", Options{}, "EPERM", true},
		{"socket_inet_raw_flags", Options{}, "EPERM", true},
		{"socket_inet6_raw", Options{}, "EPERM", true},
		{"socket_inet_packet", Options{}, "EPERM", true},
		{"socket_inet_mptcp", Options{}, "EPERM", true},
		{"socket_inet6_mptcp", Options{}, "EPERM", true},
		{"socket_inet_stream", Options{}, "ok", false},
		{"socket_inet_dgram", Options{}, "ok", false},
		{"socket_unix", Options{}, "ok", false},
		{"socket_netlink_route", Options{}, "ok", false},
		{"socket_netlink_audit", Options{}, "EPROTONOSUPPORT", true},
		{"socketpair_unix", Options{}, "ok", false},
		{"socketpair_inet", Options{}, "EAFNOSUPPORT", true},
		{"tiocsti", Options{}, "EPERM", true},
		{"tiocsti_highbits", Options{}, "EPERM", true},
		{"tioclinux", Options{}, "EPERM", true},
		{"tcgets", Options{}, "ok", false},
		{"personality_linux32", Options{}, "EPERM", true},
		{"personality_query", Options{}, "ok", false},
		{"personality_linux", Options{}, "ok", false},
		{"memfd_exec", memfd, "EPERM", true},
		{"memfd_exec", Options{}, "ok", false},
		{"memfd_cloexec", memfd, "ok", false},
		{"memfd_cloexec", sealed, "EPERM", true},
		{"memfd_exec", sealed, "EPERM", true},
		{"memfd_sealed", sealed, "ok", false},
		{"execveat_empty_path", sealed, "EPERM", true},
		{"execveat_empty_path", memfd, "EPERM", true},
		{"execveat_empty_path", Options{}, "EBADF", false},
		{"nr_minus_one", Options{}, "ENOSYS", false},
		{"exec_true", memfd, "ok", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%+v", tc.probe, tc.opts), func(t *testing.T) {
			t.Parallel()
			got, out, _ := runProbe(t, tc.probe, true, tc.opts)
			if got != tc.want {
				t.Errorf("with filter: got %q, want %q; output:\n%s", got, tc.want, out)
			}
			if !tc.baseline {
				return
			}
			base, out, _ := runProbe(t, tc.probe, false, tc.opts)
			switch {
			case base == "":
				t.Errorf("baseline: no result; output:\n%s", out)
			case base == tc.want:
				// Possible without privileges or on a hardened kernel;
				// the VM tests still cover the rule.
				t.Logf("baseline is also %s: the kernel refuses this on its own here", base)
			default:
				t.Logf("baseline %s", base)
			}
		})
	}
}

func TestKernelStatus(t *testing.T) {
	got, out, _ := runProbe(t, "status", true, Options{})
	if got != "ok" {
		t.Fatalf("got %q; output:\n%s", got, out)
	}
	tasks := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "task" {
			tasks[f[1]] = true
		}
	}
	if !tasks["self"] || len(tasks) < 2 {
		t.Fatalf("want the calling thread and others, got %v; output:\n%s", tasks, out)
	}
	for task := range tasks {
		for _, want := range []string{"Seccomp:\t2", "NoNewPrivs:\t1", "Seccomp_filters:\t1"} {
			if has := strings.Contains(out, "task "+task+" "+want+"\n"); has != (task == "self") {
				t.Errorf("task %s: has %q is %v, want %v; output:\n%s", task, want, has, task == "self", out)
			}
		}
	}
}

func TestKernelExecShell(t *testing.T) {
	got, out, _ := runProbe(t, "exec_sh", true, Options{NoExecMemfd: true})
	if got != "ok" {
		t.Fatalf("got %q; output:\n%s", got, out)
	}
	for _, want := range []string{"usr\n", "proc\n", "Seccomp:\t2\n", "NoNewPrivs:\t1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestKernelRuntimes(t *testing.T) {
	for name, want := range map[string][]string{
		"node":    {"child\n", "worker Seccomp:\t2\n"},
		"python3": {"child\n"},
	} {
		t.Run(name, func(t *testing.T) {
			fixture.Need(t, name)
			t.Parallel()
			got, out, _ := runProbe(t, name, true, Options{NoExecMemfd: true})
			if got != "ok" {
				t.Fatalf("got %q; output:\n%s", got, out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
