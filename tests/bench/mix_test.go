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
)

// BenchmarkDaemonVsPeers runs, in each iteration of one loop, one after the other: a warm MCP
// tools/call through the built clihostd (helper beside it; as BenchmarkPeerDaemonMCPTrue), the
// same call in process (host.Call, as BenchmarkPeerClihostTrue), /bin/true under bwrap with srt's
// namespace and mount set (as BenchmarkPeerBwrapTrue) and plain os/exec of /bin/true. On a
// machine shared with other work, load that comes and goes hits all four alike, so their ratios
// hold where separate benchmarks' do not. It reports each one's median (daemon-ms, hostcall-ms,
// bwrap-ms, exec-ms) and daemon/bwrap, hostcall/bwrap and the daemon path's extra time over
// host.Call (daemon-extra-ms, the difference of the medians).
func BenchmarkDaemonVsPeers(b *testing.B) {
	bwrap := lookPath(b, "bwrap", "apt-get install bubblewrap")
	dir := b.TempDir()
	bwrapArgv := append([]string{bwrap}, bwrapArgs(b, dir)...)
	probe(b, exec.Command(bwrapArgv[0], bwrapArgv[1:]...))
	d := startDaemon(b, must(b, daemonBin))
	c := d.newClient(b)
	h := host.New(fixture.Registry(b, fixture.True()), host.Options{})
	bd, err := h.Bundle("true")
	if err != nil {
		b.Fatal(err)
	}
	ws := fixture.Workspace(b)
	steps := []struct {
		metric string
		run    func() error
	}{
		{"daemon-ms", c.call},
		{"hostcall-ms", func() error {
			if env := h.Call(context.Background(), bd, "run", map[string]any{}, host.Caller{Workspace: ws}, host.CallOptions{}); !env.OK {
				return fmt.Errorf("host.Call: %+v", env.Error)
			}
			return nil
		}},
		{"bwrap-ms", func() error { run(b, dir, bwrapArgv); return nil }},
		{"exec-ms", func() error { run(b, dir, []string{trueBin}); return nil }},
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
	b.ReportMetric(med[0]/med[2], "daemon/bwrap")
	b.ReportMetric(med[1]/med[2], "hostcall/bwrap")
	b.ReportMetric(med[0]-med[1], "daemon-extra-ms")
}
