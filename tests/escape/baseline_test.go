package escape

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBaseline is the corpus's general positive control: the same attempts, run by the same probe
// through the same host with the sandbox turned off, get through (or fail with the kernel's own
// error, not the sandbox's). So each errno the other tests assert comes from the sandbox, not
// from a probe that cannot do what it claims. Only attempts harmless to the host are repeated
// here (no mounts, ptrace, writes outside the test's own files); unsandboxed, the probe runs as
// the test's user (root).
func TestBaseline(t *testing.T) {
	s := newSuite(t)
	hs := startHostServices(t, s)
	reached := func(name string, c func() *counter) func(*testing.T, *suite) {
		return func(t *testing.T, _ *suite) {
			t.Helper()
			deadline := time.Now().Add(2 * time.Second)
			for c().get() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if c().get() == 0 {
				t.Errorf("host side: the %s received nothing from the unsandboxed probe", name)
			}
		}
	}
	table := []probeCase{
		{name: "read-undeclared", bundle: "ro", probe: "read", args: out("secret"), want: allowed("outside secret")},
		{name: "read-denied", bundle: "ro", probe: "read", args: in(roWS, "secret.txt"), want: allowed("denied by fs.deny")},
		{name: "read-token", bundle: "state", ws: emptyWS, probe: "read", args: out("state/token"), want: allowed("clihostd-token")},
		{name: "write-workspace", bundle: "ro", probe: "write", args: in(roWS, "baseline.txt"), want: allowed(""), after: hostHas("ro", "baseline.txt", true)},
		{name: "chmod-undeclared", bundle: "ro", probe: "chmod", args: out("owned"), want: allowed("")},
		{name: "drop-exec", bundle: "ro", probe: "drop-exec", args: func(s *suite) []string {
			return []string{"/proc/self/exe", filepath.Join(s.ro, "dropped"), "escaped", "drop-exec"}
		}, want: allowed("a dropped copy")},
		{name: "exec-unlisted", bundle: "ro", probe: "exec", args: lit("/usr/bin/id"), want: allowed("uid=0")},
		{name: "memfd-execveat", bundle: "ro", probe: "memfd-execveat", want: allowed("the probe ran from a memfd")},
		{name: "tcp-host-loopback", bundle: "ro", probe: "tcp", args: lit(hs.tcpAddr), want: allowed("200 OK"), after: reached("loopback HTTP server", func() *counter { return hs.tcp })},
		{name: "udp-host-loopback", bundle: "ro", probe: "udp", args: lit(hs.udpAddr), want: allowed(""), after: reached("loopback UDP server", func() *counter { return hs.udp })},
		{name: "unix-host-tmp", bundle: "ro", probe: "unix", args: lit(hs.tmpSock), want: allowed("host unix service")},
		{name: "unix-abstract", bundle: "ro", probe: "unix", args: lit(hs.abstr), want: allowed("host abstract service")},
		{name: "socket-raw", bundle: "ro", probe: "socket", args: lit("raw"), want: allowed("")},
		{name: "kill-host-process", bundle: "ro", probe: "kill", args: func(*suite) []string { return []string{itoa(os.Getpid()), "0"} }, want: allowed("")},
		{name: "setns-own-netns", bundle: "ro", probe: "setns", args: lit("/proc/self/ns/net"), want: allowed("")},
		{name: "keyctl", bundle: "ro", probe: "syscall", args: lit("keyctl"), want: allowed("returned")},
		// Without the filter the kernel answers these itself, with another errno than its EPERM.
		{name: "perf_event_open", bundle: "ro", probe: "syscall", args: lit("perf_event_open"), want: denied("perf_event_open", "EFAULT")},
		{name: "clone3", bundle: "ro", probe: "syscall", args: lit("clone3"), want: denied("clone3", "EINVAL")},
		{name: "tiocsti-not-a-tty", bundle: "ro", probe: "tiocsti", args: lit("stdin"), want: denied("ioctl TIOCSTI", "ENOTTY")},
	}
	if sysctl("vm/memfd_noexec") == "0" {
		table = append(table,
			probeCase{name: "memfd-create-exec", bundle: "ro", probe: "memfd-create-exec", want: allowed("")},
			probeCase{name: "memfd-fexecve", bundle: "ro", probe: "memfd-fexecve", want: allowed("the probe ran from a memfd")})
	}
	if sysctl("net/mptcp/enabled") == "1" {
		table = append(table, probeCase{name: "socket-mptcp", bundle: "ro", probe: "socket", args: lit("mptcp"), want: allowed("")})
	}
	if sysctl("kernel/io_uring_disabled") == "0" {
		table = append(table, probeCase{name: "io_uring_setup", bundle: "ro", probe: "syscall", args: lit("io_uring_setup"), want: denied("io_uring_setup", "EFAULT")})
	}
	if runtime.GOARCH == "amd64" {
		table = append(table,
			probeCase{name: "int80-i386", bundle: "ro", probe: "int80", want: allowed("returned")},
			probeCase{name: "x32", bundle: "ro", probe: "x32", want: allowed("returned")},
			probeCase{name: "drop-ldso", bundle: "ro", probe: "drop-ldso", args: func(s *suite) []string {
				return []string{"/usr/bin/true", filepath.Join(s.ro, "dropped-true")}
			}, want: allowed("")},
			probeCase{name: "ldso-unlisted", bundle: "ro", probe: "exec", args: lit(ldso, "/usr/bin/id"), want: allowed("uid=0")},
		)
	}
	for i := range table {
		table[i].unsandboxed = true
	}
	s.run(t, table)
}

// sysctl reads /proc/sys/name, trimmed; "" when it cannot.
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
