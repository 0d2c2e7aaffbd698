package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// daemonFootprint is what a daemon holds: open descriptors, children (the pool's inits among
// them), zombie children, and its cgroup directories.
type daemonFootprint struct{ fds, children, zombies, groups int }

func footprint(t *testing.T, pid int) daemonFootprint {
	t.Helper()
	var f daemonFootprint
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	f.fds = len(ents)
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			f.children++
			if fields[0] == "Z" {
				f.zombies++
			}
		}
	}
	for _, pat := range []string{"/sys/fs/cgroup/*/clihost-*", "/sys/fs/cgroup/*/*/clihost-*", "/sys/fs/cgroup/*/*/*/clihost-*", "/sys/fs/cgroup/*/*/*/*/clihost-*"} {
		m, _ := filepath.Glob(pat)
		for _, g := range m {
			if strings.HasPrefix(filepath.Base(g), fmt.Sprintf("clihost-%d-", pid)) {
				f.groups++
			}
		}
	}
	return f
}

// TestDaemonCallsLeakNothing: a few hundred jq calls over MCP HTTP through clihostd (its pool of
// inits on), some concurrent, some timing out, some killed by the memory limit, and then the
// daemon holds as many descriptors, children, zombies and cgroup directories as before.
func TestDaemonCallsLeakNothing(t *testing.T) {
	needLong(t)
	fixture.NeedRoot(t)
	for _, c := range []struct {
		pool  string
		calls int
	}{{"4", 150}, {"0", 60}, {"8", 60}} {
		t.Run("pool="+c.pool, func(t *testing.T) { testDaemonCallsLeakNothing(t, c.pool, c.calls) })
	}
}

// initsRSS sums the resident memory (KiB) of the daemon's children waiting as pooled inits.
func initsRSS(t *testing.T, pid int) (n, kib int) {
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil || !strings.Contains(string(data), fmt.Sprintf("\nPPid:\t%d\n", pid)) {
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				k, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				n, kib = n+1, kib+k
			}
		}
	}
	return n, kib
}

func testDaemonCallsLeakNothing(t *testing.T, pool string, calls int) {
	d := startDaemon(t, t.TempDir(), "--limit-memory", "128MiB", "--sandbox-pool", pool, "--max-calls-per-caller", "20") // the 20 calls at once below
	var tok struct{ Token string }
	if r := d.ctl(t, "token", "--json"); json.Unmarshal([]byte(r.stdout), &tok) != nil {
		t.Fatal(r.stderr)
	}
	c, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
		&sdk.StreamableClientTransport{Endpoint: d.mcp + "/mcp/jq", HTTPClient: &http.Client{Transport: bearer{tok.Token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	call := func(filter string) (string, bool) {
		res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "eval", Arguments: map[string]any{"json": `{"a":[1,2,3]}`, "filter": filter}})
		if err != nil {
			return err.Error(), true
		}
		var b strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String(), res.IsError
	}
	if out, isErr := call(".a | length"); isErr || !strings.Contains(out, "3") {
		t.Fatalf("first call: %v %s", isErr, out)
	}
	time.Sleep(3 * time.Second)
	ready := func() int {
		resp, err := (&http.Client{Transport: bearer{tok.Token}}).Get(d.mcp + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 1<<16)
		for {
			n, err := resp.Body.Read(buf)
			b.WriteString(string(buf[:n]))
			if err != nil {
				break
			}
		}
		for _, l := range strings.Split(b.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "clihost_sandbox_pool_ready "); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
		return 0 // no pool
	}
	pid := d.cmd.Process.Pid
	rb := ready()
	idle := func() {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		time.Sleep(200 * time.Millisecond)
	}
	idle()
	before := footprint(t, pid)
	filters := []string{".a | length", ".a | length", ".a | length", "[range(1e9)] | length", ".a | add"}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 20)
	for i := range calls {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out, isErr := call(filters[i%len(filters)])
			if i%len(filters) != 3 && (isErr || out == "") {
				t.Errorf("call %d: %v %.300s", i, isErr, out)
			}
		})
	}
	wg.Wait()
	oom, _ := call("[range(1e9)] | length")
	t.Logf("a call over the memory limit: %.300s", oom)
	// Each waiting init holds 7 descriptors in the daemon (plan, report, stdin, stdout, stderr,
	// egress, and os.Process's pidfd), is one child, and has one group per cgroup v1 hierarchy (3 here).
	norm := func(f daemonFootprint, r int) daemonFootprint {
		return daemonFootprint{f.fds - 7*r, f.children - r, f.zombies, f.groups - 3*r}
	}
	var after daemonFootprint
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		ra := ready()
		idle()
		after = footprint(t, pid)

		after = norm(after, ra-rb)
		if after.fds <= before.fds+2 && after.zombies == 0 && after.children <= before.children+1 && after.groups <= before.groups+3 {
			break
		}
	}
	n, kib := initsRSS(t, pid)
	t.Logf("before %+v after %+v; %d children of the daemon, %d KiB resident together", before, after, n, kib)
	if after.fds > before.fds+2 || after.zombies > 0 || after.children > before.children+1 || after.groups > before.groups+3 {
		t.Errorf("the daemon grew: before %+v after %+v", before, after)
	}
}
