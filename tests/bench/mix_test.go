package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// BenchmarkDaemonVsPeers runs, in each iteration of one loop, one after the other: a warm MCP
// tools/call through the built clihostd (helper beside it; as BenchmarkPeerDaemonMCPTrue), the
// same call in process (host.Call, as BenchmarkPeerClihostTrue: its init from a pool, as the
// daemon's are), that call again from a host with a state directory as the daemon has (SandboxOptions.StateDir: the uid's home is then
// <state>/homes/<uid>, made, checked and masked on every call, instead of /nonexistent),
// /bin/true under bwrap with srt's namespace and mount set (as BenchmarkPeerBwrapTrue) and plain
// os/exec of /bin/true, and last host.Call with every init started for its call (no pool:
// hostcall-cold-ms, as clihostctl's in-process calls). On a machine shared with other work, load that comes and goes hits them
// all alike, so their ratios hold where separate benchmarks' do not. It reports each one's median
// (daemon-ms, hostcall-ms, hostcall-state-ms, bwrap-ms, exec-ms), daemon/bwrap, hostcall/bwrap,
// and the daemon path's extra time over host.Call (daemon-extra-ms) and over host.Call with a
// state directory (daemon-extra-state-ms), differences of the medians.
func BenchmarkDaemonVsPeers(b *testing.B) {
	bwrap := lookPath(b, "bwrap", "apt-get install bubblewrap")
	dir := b.TempDir()
	bwrapArgv := append([]string{bwrap}, bwrapArgs(b, dir)...)
	probe(b, exec.Command(bwrapArgv[0], bwrapArgv[1:]...))
	d := startDaemon(b, must(b, daemonBin))
	c := d.newClient(b)
	ws := fixture.Workspace(b)
	state := b.TempDir()
	fixture.Reachable(b, state)
	pool := nsinit.NewPool(nsinit.PoolConfig{})
	defer pool.Close()
	hostCall := hostCaller(b, ws, host.SandboxOptions{Pool: pool})
	hostCallState := hostCaller(b, ws, host.SandboxOptions{StateDir: state, Pool: pool})
	hostCallCold := hostCaller(b, ws, host.SandboxOptions{})
	steps := []struct {
		metric string
		run    func() error
	}{
		{"daemon-ms", c.call},
		{"hostcall-ms", hostCall},
		{"hostcall-state-ms", hostCallState},
		{"bwrap-ms", func() error { run(b, dir, bwrapArgv); return nil }},
		{"exec-ms", func() error { run(b, dir, []string{trueBin}); return nil }},
		{"hostcall-cold-ms", hostCallCold},
	}
	times := make([][]time.Duration, len(steps))
	for i, s := range steps { // warm: the version checks, the connection
		if err := s.run(); err != nil {
			b.Fatal(err)
		}
		times[i] = make([]time.Duration, 0, 64)
	}
	for b.Loop() {
		for i, s := range steps {
			t := time.Now()
			if err := s.run(); err != nil {
				b.Fatal(err)
			}
			times[i] = append(times[i], time.Since(t))
		}
	}
	med := make([]float64, len(steps))
	for i, s := range steps {
		med[i] = quantile(slices.Sorted(slices.Values(times[i])), 0.5).Seconds() * 1000
		b.ReportMetric(med[i], s.metric)
	}
	b.ReportMetric(med[0]/med[3], "daemon/bwrap")
	b.ReportMetric(med[1]/med[3], "hostcall/bwrap")
	b.ReportMetric(med[5]/med[3], "hostcall-cold/bwrap")
	b.ReportMetric(med[0]-med[1], "daemon-extra-ms")
	b.ReportMetric(med[0]-med[2], "daemon-extra-state-ms")
}

// hostCaller returns one in-process host.Call of the `true` fixture's tool in workspace ws, from
// a host with the sandbox options sb.
func hostCaller(b *testing.B, ws string, sb host.SandboxOptions) func() error {
	h := host.New(fixture.Registry(b, fixture.True()), host.Options{Sandbox: sb})
	bd, err := h.Bundle("true")
	if err != nil {
		b.Fatal(err)
	}
	return func() error {
		if env := h.Call(context.Background(), bd, "run", map[string]any{}, host.Caller{Workspace: ws}, host.CallOptions{}); !env.OK {
			return fmt.Errorf("host.Call: %+v", env.Error)
		}
		return nil
	}
}
