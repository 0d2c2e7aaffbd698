package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// helperPath is the clihost-sandbox helper TestMain built.
var helperPath string

// TestMain builds the clihost-sandbox helper and has host.Call start every sandbox with it, as an
// installed clihostd does (the test binary itself stays able to act as the init, as a fallback).
func TestMain(m *testing.M) {
	nsinit.Main()
	dir, err := os.MkdirTemp("", "clihost-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helper := filepath.Join(dir, nsinit.HelperName)
	helperPath = helper
	build := exec.Command("go", "build", "-o", helper, "github.com/clihost/clihost/cmd/clihost-sandbox")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", nsinit.HelperName, err, out)
		os.Exit(1)
	}
	if err := os.Chmod(dir, 0o755); err == nil {
		if err := nsinit.UseHelper(helper); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// BenchmarkPeerClihostTrue is the measure: one warm host.Call of a tool that runs
// /usr/bin/true, in the kernel sandbox, through a pool as clihostd keeps one — on a root host its
// zygote (the clihost-sandbox helper started once) builds the sandbox on a thread made ready ahead
// of the call (validation, argv, policy compilation, the rest of the mounts, masks, Landlock, uid
// and capability drop, seccomp, exec, wait, output parsing, audit to nowhere). zygote/call is the
// share of calls the zygote built, ahead/call the share it built before the call came (calls back
// to back on two cores leave it little time: see BenchmarkPeerClihostTrueAfterPause),
// groups-reused/call the share given the control groups the call before left.
func BenchmarkPeerClihostTrue(b *testing.B) { benchmarkZygoteCall(b, 0) }

// BenchmarkPeerClihostTrueAfterPause is BenchmarkPeerClihostTrue with each call made after
// agentPause (the timer stopped), as an agent calls a tool after its model's turn: the zygote has
// built the call's sandbox ahead of it (ahead/call), and of those given the control groups their
// last call left (groups-reused/call). Compare BenchmarkPeerBwrapTrueAfterPause.
func BenchmarkPeerClihostTrueAfterPause(b *testing.B) { benchmarkZygoteCall(b, agentPause) }

// agentPause is the pause before each call of the *AfterPause benchmarks.
const agentPause = 100 * time.Millisecond

// benchmarkZygoteCall times calls of fixture.True through a pool with its zygote, each after pause.
func benchmarkZygoteCall(b *testing.B, pause time.Duration) {
	pool := nsinit.NewPool(nsinit.PoolConfig{})
	defer pool.Close()
	benchmarkCallIn(b, fixture.True(), fixture.Workspace(b), host.SandboxOptions{Pool: pool}, pause)
	s := pool.Stats()
	calls := float64(max(s.Zygote+s.Hits+s.Misses, 1))
	b.ReportMetric(float64(s.Zygote)/calls, "zygote/call")
	b.ReportMetric(float64(s.ZygoteAhead)/calls, "ahead/call")
	b.ReportMetric(float64(s.GroupsReused)/calls, "groups-reused/call")
}

// BenchmarkPeerClihostInitPoolTrue is BenchmarkPeerClihostTrue with the pool's zygote off: every
// sandbox is an init the pool started ahead of the call (what a host without the zygote gets: not
// root, another architecture, a kernel without procfs's pidns option).
func BenchmarkPeerClihostInitPoolTrue(b *testing.B) {
	pool := nsinit.NewPool(nsinit.PoolConfig{NoZygote: true})
	defer pool.Close()
	benchmarkCall(b, host.SandboxOptions{Pool: pool})
	s := pool.Stats()
	b.ReportMetric(float64(s.Hits)/float64(max(s.Hits+s.Misses, 1)), "pool-hits/call")
}

// BenchmarkPeerClihostEgressTrue is BenchmarkPeerClihostTrue for a tool with a network grant
// (egress to one host, as gh's and kubectl's tools have): its sandbox also gets the egress
// listeners, made in its network namespace and served by the host's proxies while it runs.
func BenchmarkPeerClihostEgressTrue(b *testing.B) {
	pool := nsinit.NewPool(nsinit.PoolConfig{})
	defer pool.Close()
	benchmarkCallOf(b, egressTrue(), host.SandboxOptions{Pool: pool})
	s := pool.Stats()
	b.ReportMetric(float64(s.Zygote)/float64(max(s.Zygote+s.Hits+s.Misses, 1)), "zygote/call")
}

// BenchmarkPeerClihostEgressInitPoolTrue is BenchmarkPeerClihostEgressTrue with the pool's zygote
// off: every egress sandbox is an init of the pool's.
func BenchmarkPeerClihostEgressInitPoolTrue(b *testing.B) {
	pool := nsinit.NewPool(nsinit.PoolConfig{NoZygote: true})
	defer pool.Close()
	benchmarkCallOf(b, egressTrue(), host.SandboxOptions{Pool: pool})
	s := pool.Stats()
	b.ReportMetric(float64(s.Hits)/float64(max(s.Hits+s.Misses, 1)), "pool-hits/call")
}

// egressTrue is the `true` fixture bundle granted egress to one host.
func egressTrue() map[string]string {
	files := fixture.True()
	files["true/CLI.md"] = strings.Replace(files["true/CLI.md"], "egress: []", `egress: ["api.example.test"]`, 1)
	return files
}

// BenchmarkPeerClihostWriteProject is BenchmarkPeerClihostTrue for a tool that may write its
// workspace (fs.write: ["./**"], as a formatter's or git's tools) in a project-sized git work tree
// (fixture.Project): the git rule's walks of that workspace (the nested git search, the snapshot
// before the call and the sweep after it) are on the call's path. BenchmarkPeerBwrapProject is
// its peer; BenchmarkPeerClihostTrue is the same call in an empty workspace.
func BenchmarkPeerClihostWriteProject(b *testing.B) {
	pool := nsinit.NewPool(nsinit.PoolConfig{})
	defer pool.Close()
	benchmarkCallIn(b, fixture.TrueWriting(), fixture.Project(b), host.SandboxOptions{Pool: pool}, 0)
}

// BenchmarkPeerClihostWriteTrue is BenchmarkPeerClihostTrue for a tool that may write its
// workspace, a folder that is not a git work tree (as gh's ~/.config/gh or an output folder): its
// nested git search is asked again at each call, its policy used again while no folder changed.
func BenchmarkPeerClihostWriteTrue(b *testing.B) {
	pool := nsinit.NewPool(nsinit.PoolConfig{})
	defer pool.Close()
	benchmarkCallIn(b, fixture.TrueWriting(), fixture.Workspace(b), host.SandboxOptions{Pool: pool}, 0)
}

// BenchmarkPeerClihostColdTrue is the same call with every sandbox started when the call needs it
// (no pool: what clihostctl's in-process calls do).
func BenchmarkPeerClihostColdTrue(b *testing.B) { benchmarkCall(b, host.SandboxOptions{}) }

// BenchmarkPeerClihostUnsandboxedTrue is the same call with the sandbox off (clihostd
// --sandbox=off): what the sandbox itself costs is the difference.
func BenchmarkPeerClihostUnsandboxedTrue(b *testing.B) {
	benchmarkCall(b, host.SandboxOptions{Off: true})
}

// benchmarkCall is benchmarkCallOf the `true` fixture bundle.
func benchmarkCall(b *testing.B, sb host.SandboxOptions) { benchmarkCallOf(b, fixture.True(), sb) }

// benchmarkCallOf is benchmarkCallIn an empty workspace.
func benchmarkCallOf(b *testing.B, files map[string]string, sb host.SandboxOptions) {
	benchmarkCallIn(b, files, fixture.Workspace(b), sb, 0)
}

// benchmarkCallIn times warm host.Call calls of the tool run of the bundle true in files, in
// workspace ws, with sandbox options sb.
func benchmarkCallIn(b *testing.B, files map[string]string, ws string, sb host.SandboxOptions, pause time.Duration) {
	if err := nsinit.Check(); err != nil && !sb.Off {
		missing(b, "the kernel sandbox is unavailable: %v", err)
	}
	if os.Geteuid() != 0 && !sb.Off {
		missing(b, "the sandbox benchmark runs as root (as CI does)")
	}
	h := host.New(fixture.Registry(b, files), host.Options{Sandbox: sb})
	bd, err := h.Bundle("true")
	if err != nil {
		b.Fatal(err)
	}
	call := func() {
		if env := h.Call(context.Background(), bd, "run", map[string]any{}, host.Caller{Workspace: ws}, host.CallOptions{}); !env.OK {
			b.Fatalf("%+v", env.Error)
		}
	}
	call() // the version check, once
	defer reportCPU(b)()
	reused, watched := h.PoliciesReused(), h.PoliciesWatched()
	loop(b, pause, call)
	b.ReportMetric(float64(h.PoliciesReused()-reused)/float64(max(b.N, 1)), "policies-reused/call")
	b.ReportMetric(float64(h.PoliciesWatched()-watched)/float64(max(b.N, 1)), "policies-watched/call")
}
