package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// poolTakes reads the daemon's count of calls whose sandbox came from its pool as result says
// ("hit": a pooled init, "zygote": its zygote) from its metrics.
func poolTakes(t *testing.T, d *daemonProc, result string) int {
	t.Helper()
	body := d.metrics(t)
	n, ok := fixture.MetricValue(body, `clihost_sandbox_pool_takes_total{result="`+result+`"}`)
	if !ok {
		t.Fatalf("no pool takes %q in the metrics:\n%s", result, body)
	}
	return int(n)
}

// TestDaemonEgressThroughTheZygote: a root clihostd sends its calls with egress (curl with a
// network grant) to its zygote: each call's curl reaches the daemon's egress proxy in its sandbox,
// which refuses the host outside the grant (403), every call counts as a zygote take in /metrics,
// and afterwards the daemon holds no more descriptors, children or zombies than before (no egress
// socket pair's end, no listener of a finished call).
func TestDaemonEgressThroughTheZygote(t *testing.T) {
	fixture.NeedRoot(t)
	fixture.Need(t, "curl")
	d := startDaemon(t, t.TempDir(), "--bundles", egressBundle(t), "--no-catalog")
	call := func() {
		t.Helper()
		if r := d.ctl(t, "call", "net", "get", "--workspace", d.ws, "--input", `{}`); r.code == 0 || !strings.Contains(r.stdout, "403") {
			t.Fatalf("call get (egress refused by the proxy): exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	// The zygote starts with the daemon's first calls.
	for deadline := time.Now().Add(20 * time.Second); poolTakes(t, d, "zygote") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the daemon's zygote built no egress call's sandbox within 20s")
		}
		call()
	}
	pid := d.cmd.Process.Pid
	before := footprint(t, pid)
	zygote, hits := poolTakes(t, d, "zygote"), poolTakes(t, d, "hit")
	const calls = 8
	for range calls {
		call()
	}
	if got, inits := poolTakes(t, d, "zygote")-zygote, poolTakes(t, d, "hit")-hits; got != calls || inits != 0 {
		t.Errorf("of %d egress calls the zygote built %d sandboxes and pooled inits %d", calls, got, inits)
	}
	var after daemonFootprint
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if after = footprint(t, pid); after.fds <= before.fds && after.children <= before.children && after.zombies == 0 {
			break
		}
	}
	t.Logf("before %+v after %+v", before, after)
	if after.fds > before.fds || after.children > before.children || after.zombies > 0 {
		t.Errorf("the daemon grew over %d egress calls: before %+v after %+v", calls, before, after)
	}
}
