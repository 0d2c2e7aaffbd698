package daemon

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/inflight"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// metrics are the daemon's Prometheus metrics, written in the text exposition format.
type metrics struct {
	mu       sync.Mutex
	bundles  int
	refused  int
	probeOK  int // 1 when the last sandbox probe ran its process, else 0
	probed   bool
	calls    map[[2]string]int64 // {bundle, ok} → count
	duration map[string]float64  // bundle → seconds
}

func newMetrics() *metrics {
	return &metrics{calls: map[[2]string]int64{}, duration: map[string]float64{}}
}

func (m *metrics) setBundles(loaded, refused int) {
	m.mu.Lock()
	m.bundles, m.refused = loaded, refused
	m.mu.Unlock()
}

// setProbe records the last sandbox probe.
func (m *metrics) setProbe(p host.ProbeResult) {
	m.mu.Lock()
	m.probed, m.probeOK = true, 0
	if p.Works() {
		m.probeOK = 1
	}
	m.mu.Unlock()
}

// observe counts a finished call (host.Options.OnCall).
func (m *metrics) observe(rec host.Invoked) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok := "false"
	if rec.OK {
		ok = "true"
	}
	m.calls[[2]string{rec.CLIID, ok}]++
	m.duration[rec.CLIID] += float64(rec.DurationMS) / 1000
}

func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(w, "# HELP clihost_bundles Bundles loaded and served.\n# TYPE clihost_bundles gauge\nclihost_bundles %d\n", m.bundles)
	fmt.Fprintf(w, "# HELP clihost_bundles_refused Bundles refused for lint errors or duplicate ids.\n# TYPE clihost_bundles_refused gauge\nclihost_bundles_refused %d\n", m.refused)
	if m.probed {
		fmt.Fprintf(w, "# HELP clihost_sandbox_works Whether the last sandbox probe ran a sandboxed process (1) or not (0: calls fail, or the sandbox is off).\n# TYPE clihost_sandbox_works gauge\nclihost_sandbox_works %d\n", m.probeOK)
	}
	fmt.Fprintf(w, "# HELP clihost_calls_total Tool calls by bundle and outcome.\n# TYPE clihost_calls_total counter\n")
	keys := make([][2]string, 0, len(m.calls))
	for k := range m.calls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "clihost_calls_total{bundle=%q,ok=%q} %d\n", k[0], k[1], m.calls[k])
	}
	fmt.Fprintf(w, "# HELP clihost_call_seconds_total Time spent in tool calls by bundle.\n# TYPE clihost_call_seconds_total counter\n")
	for _, n := range slices.Sorted(maps.Keys(m.duration)) {
		fmt.Fprintf(w, "clihost_call_seconds_total{bundle=%q} %g\n", n, m.duration[n])
	}
}

// writePolicyMetrics writes how often a call used a kept sandbox policy.
func writePolicyMetrics(w io.Writer, policies *sandbox.Cache) {
	fmt.Fprintf(w, "# HELP clihost_sandbox_policies_reused_total Calls that used the sandbox policy of an earlier call with the same inputs, every path and variable it read answering the same, instead of compiling one.\n# TYPE clihost_sandbox_policies_reused_total counter\nclihost_sandbox_policies_reused_total %d\n", policies.Reused())
	fmt.Fprintf(w, "# HELP clihost_sandbox_policies_watched_total Of those, the calls whose policy's path questions were not asked again, inotify having seen nothing they depend on change.\n# TYPE clihost_sandbox_policies_watched_total counter\nclihost_sandbox_policies_watched_total %d\n", policies.Watched())
}

// writePoolMetrics writes what the pool of sandbox inits did (nothing without a pool).
func writePoolMetrics(w io.Writer, pool *nsinit.Pool) {
	if pool == nil {
		return
	}
	s := pool.Stats()
	fmt.Fprintf(w, "# HELP clihost_sandbox_pool_takes_total Sandboxed calls by what built their sandbox: the zygote (zygote), an init ready in the pool (hit), or an init the call started (miss).\n# TYPE clihost_sandbox_pool_takes_total counter\n")
	fmt.Fprintf(w, "clihost_sandbox_pool_takes_total{result=\"zygote\"} %d\nclihost_sandbox_pool_takes_total{result=\"hit\"} %d\nclihost_sandbox_pool_takes_total{result=\"miss\"} %d\n", s.Zygote, s.Hits, s.Misses)
	fmt.Fprintf(w, "# HELP clihost_sandbox_pool_discarded_total Inits killed unused: stale (a mount table or init executable change), dead while waiting, or at shutdown.\n# TYPE clihost_sandbox_pool_discarded_total counter\nclihost_sandbox_pool_discarded_total %d\n", s.Discarded)
	fmt.Fprintf(w, "# HELP clihost_sandbox_pool_ready Inits ready in the pool, and how many it keeps ready.\n# TYPE clihost_sandbox_pool_ready gauge\nclihost_sandbox_pool_ready %d\nclihost_sandbox_pool_target %d\n", s.Ready, s.Target)
	up := 0
	if s.ZygoteUp {
		up = 1
	}
	fmt.Fprintf(w, "# HELP clihost_sandbox_zygote_up 1 while the sandbox zygote runs and builds the calls' sandboxes (no Go program started per call), else 0 (calls take inits; the daemon's log says why).\n# TYPE clihost_sandbox_zygote_up gauge\nclihost_sandbox_zygote_up %d\n", up)
	fmt.Fprintf(w, "# HELP clihost_sandbox_zygote_ahead_total Calls the zygote ran in a sandbox it had built ahead of them (their plan repeated a recent call's, after a pause).\n# TYPE clihost_sandbox_zygote_ahead_total counter\nclihost_sandbox_zygote_ahead_total %d\n", s.ZygoteAhead)
	fmt.Fprintf(w, "# HELP clihost_sandbox_cgroups_reused_total Calls given the control group an earlier call of the same caller, uid and limits left, instead of a new one.\n# TYPE clihost_sandbox_cgroups_reused_total counter\nclihost_sandbox_cgroups_reused_total %d\n", s.GroupsReused)
}

// writeInFlightMetrics writes the calls running at once and those the bounds refused (inflight).
func writeInFlightMetrics(w io.Writer, l *inflight.Limiter) {
	s := l.Stats()
	fmt.Fprintf(w, "# HELP clihost_calls_in_flight Calls running now, a call whose sandbox did not end when it was killed included, and the callers they are of.\n# TYPE clihost_calls_in_flight gauge\nclihost_calls_in_flight %d\nclihost_calls_in_flight_callers %d\n", s.InFlight, s.Callers)
	fmt.Fprintf(w, "# HELP clihost_calls_abandoned Calls in flight their callers went away from (a request or a sandbox hanging in the kernel): they count against their caller's bound, not --max-calls.\n# TYPE clihost_calls_abandoned gauge\nclihost_calls_abandoned %d\n", s.Abandoned)
	fmt.Fprintf(w, "# HELP clihost_calls_refused_total Calls refused with rate_limited: at the bound of one caller (--max-calls-per-caller), of the host (--max-calls), or of abandoned calls (16 times the larger of the two).\n# TYPE clihost_calls_refused_total counter\nclihost_calls_refused_total{bound=\"caller\"} %d\nclihost_calls_refused_total{bound=\"total\"} %d\nclihost_calls_refused_total{bound=\"abandoned\"} %d\n",
		s.Refused[inflight.PerCaller], s.Refused[inflight.Total], s.Refused[inflight.Abandoned])
}
