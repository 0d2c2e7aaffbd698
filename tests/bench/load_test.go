package bench

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadClients is how many clients the load benchmarks run at once (issue 14: 8 on 2 cores).
const loadClients = 8

// BenchmarkPeerLoad8Daemon is the daemon under load: 8 MCP clients, each with its own connection
// and initialize, make warm tools/call requests of the tool that runs /usr/bin/true in the sandbox
// (as BenchmarkPeerDaemonMCPTrue does, clihost-sandbox helper beside clihostd) as fast as the
// daemon answers, b.N calls in all. It reports calls per second and the p50 and p99 latency of one
// call under that load; ns/op is the wall time divided by the calls (the inverse of the rate).
func BenchmarkPeerLoad8Daemon(b *testing.B) {
	d := startDaemon(b, must(b, daemonBin))
	clients := make([]*mcpClient, loadClients)
	for i := range clients {
		clients[i] = d.newClient(b)
		if err := clients[i].call(); err != nil { // warm: the version check, the connection
			b.Fatal(err)
		}
	}
	load(b, func(worker int) error { return clients[worker].call() })
}

// BenchmarkPeerLoad8Bwrap is the same load on bubblewrap: 8 workers each running /bin/true under
// bwrap with srt's namespace and mount set (bwrapArgs), one after another, b.N runs in all.
func BenchmarkPeerLoad8Bwrap(b *testing.B) {
	bwrap := lookPath(b, "bwrap", "apt-get install bubblewrap")
	dir := b.TempDir()
	argv := append([]string{bwrap}, bwrapArgs(b, dir)...)
	probe(b, exec.Command(argv[0], argv[1:]...))
	load(b, func(int) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		return nil
	})
}

// load runs call b.N times in all from loadClients goroutines at once (worker is the goroutine's
// number) and reports calls/s, p50-ms and p99-ms. The first error stops every worker and fails b.
func load(b *testing.B, call func(worker int) error) {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	lat := make([][]time.Duration, loadClients)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range loadClients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				t := time.Now()
				if err := call(w); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := slices.Sorted(slices.Values(slices.Concat(lat...)))
	b.ReportMetric(float64(len(all))/wall.Seconds(), "calls/s")
	b.ReportMetric(quantile(all, 0.50).Seconds()*1000, "p50-ms")
	b.ReportMetric(quantile(all, 0.99).Seconds()*1000, "p99-ms")
}

// quantile is the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
