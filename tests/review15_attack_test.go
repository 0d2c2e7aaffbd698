package tests

// Outside review (review15) of abandoned calls in clihostd's bound on calls in flight
// (cac69c3, 6ee83f4): a call whose caller went away leaves --max-calls for a bound of its own
// (16 × --max-calls) and keeps its place in its caller's bound. Attacks by a member of a root
// daemon's socket group and by an MCP agent, against the built binaries.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
)

// TestReview15DisconnectChurnStaysInCallersBound (held). With --max-calls 2
// --max-calls-per-caller 2 the member fires calls of `sleep 30` and lets each client go after
// 0.3 s, six at once, five rounds: every call it cancels is abandoned while it tears down, and no
// longer counts toward the total. The peak of the member's live sleeps (sampled every 20 ms) never
// passes its own bound of 2, and every count comes back to 0 (no slot leaks).
func TestReview15DisconnectChurnStaysInCallersBound(t *testing.T) {
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(60_000))
	d := rootDaemon(t, "--bundles", bundles, "--max-calls", "2", "--max-calls-per-caller", "2")
	member, own := memberProject(t)
	stop := make(chan struct{})
	// A distinctive length: other tests running on the host (the member user is shared) nap too.
	const arg = "29.7315"
	live := func() int { return sleepersOfArg(arg) }
	best := peak(live, stop)
	body := `{"bundle": "sleep", "tool": "nap", "input": {"s": "` + arg + `"}, "workspace": "` + own + `"}`
	for range 5 {
		_, _ = d.curlAs(member, "/v1/call?n=[1-6]", body, "-Z", "--parallel-immediate", "--max-time", "0.3")
	}
	var wg sync.WaitGroup
	for range 4 { // and clients killed mid-call, concurrently with new calls
		wg.Go(func() {
			_, _ = d.curlAs(member, "/v1/call?n=[1-4]", body, "-Z", "--parallel-immediate", "--max-time", "0.7")
		})
	}
	wg.Wait()
	waitUntil(t, 20*time.Second, "every place is back after the churn", func() bool {
		return inFlightMetric(t, d) == 0 && metricValue(t, d, "clihost_calls_abandoned") == 0
	})
	close(stop)
	if p := <-best; p > 2 {
		t.Errorf("the member had %d sleeps alive at once, past its --max-calls-per-caller 2", p)
	} else {
		t.Logf("peak of the member's live sleeps: %d", p)
	}
	if n := live(); n != 0 {
		t.Errorf("%d of the member's sleeps outlived the churn, its places all back", n)
	}
	if env := parseEnvelope(t, d.ctlAs(t, member, "call", "sleep", "nap", "--workspace", own, "--input", `{"s": "0"}`)); !env.OK {
		t.Errorf("the member's call after the churn: %+v (a slot leaked?)", env.Error)
	}
}

// TestReview15OneMemberFillsTheAbandonedBoundAtMaxCallsOne (DEFECT on 6ee83f4, fixed: the abandoned
// bound is 16 times the larger of the two bounds). A small host's operator
// lowers --max-calls to 1 and leaves --max-calls-per-caller at its default, 16: the bound on
// abandoned calls is then 16 × 1 = 16, as much as one member's own bound. The member's 16 requests
// hang in the kernel (its workspace on its own FUSE mount that never answers) and its clients go:
// all 16 are abandoned, the abandoned bound is full, and root's call is refused — the member locks
// out every user, which abandoned calls were to prevent ("locks out only themself"). The limiter
// also outlives a reload (SIGHUP) meanwhile: the counts still come back to 0 with the file system.
func TestReview15OneMemberFillsTheAbandonedBoundAtMaxCallsOne(t *testing.T) {
	fixture.Slow(t)
	t.Setenv("TMPDIR", "/var/tmp") // not under /tmp, which a sandbox replaces
	d := rootDaemon(t, "--max-calls", "1")
	member, _ := memberProject(t)
	srv, mnt := fixture.HostileFUSEServer(t, func(_, pid uint32) bool { return commOf(pid) == "clihostd" })
	body := `{"bundle": "id", "tool": "who", "input": {}, "workspace": "` + filepath.Join(mnt, "d") + `"}`
	// --max-calls 1 admits one waited-for request at a time: the member sends one, lets its client
	// go after 0.5 s (the request is abandoned, the total free again), and sends the next.
	for i := range 20 {
		out, _ := d.curlAs(member, "/v1/call", body, "--max-time", "0.5")
		if i == 0 && len(srv.Held()) == 0 {
			t.Fatalf("the daemon never asked the stalled file system: the attack did not happen\n%s", out)
		}
		if metricValue(t, d, "clihost_calls_abandoned") >= 16 {
			break
		}
	}
	waitUntil(t, 10*time.Second, "the member's 16 stuck requests are abandoned", func() bool {
		return metricValue(t, d, "clihost_calls_abandoned") == 16
	})
	env := parseEnvelope(t, d.ctl(t, "call", "id", "who", "--workspace", d.ws))
	if !env.OK {
		t.Errorf("root's call while one member's 16 requests hang (--max-calls 1, per caller 16): %+v; one member locks out every user", env.Error)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "reloading bundles")
	srv.Release()
	waitUntil(t, 20*time.Second, "the stuck requests to give their places back after a reload", func() bool {
		return metricValue(t, d, "clihost_calls_abandoned") == 0 && inFlightMetric(t, d) == 0
	})
	if env := parseEnvelope(t, d.ctl(t, "call", "id", "who", "--workspace", d.ws)); !env.OK {
		t.Errorf("root's call once the file system answers: %+v", env.Error)
	}
}

// mcpPost posts one JSON-RPC message to the daemon's MCP endpoint of bundle with the bearer
// token, as protocol version proto (from 2026 on, with the headers naming a tools/call of nap). It
// returns the status and the body.
func mcpPost(t *testing.T, d *daemonProc, token, bundle, proto string, msg map[string]any) (int, string, error) {
	t.Helper()
	raw, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, d.mcp+"/mcp/"+bundle, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if proto != "" {
		req.Header.Set("Mcp-Protocol-Version", proto)
	}
	if proto >= "2026" {
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "nap")
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestReview15MCPHTTPLiveCallIsNotAbandoned (held). An MCP agent's tools/call over HTTP (the
// official SDK's stateless handler, JSON and SSE responses, old and new protocol versions) keeps
// its context while the agent waits: during a 3 s nap clihost_calls_abandoned stays 0 and
// clihost_calls_in_flight is 1; the call answers with its value.
func TestReview15MCPHTTPLiveCallIsNotAbandoned(t *testing.T) {
	needLong(t)
	bundles := t.TempDir()
	fixture.WriteIn(t, bundles, fixture.Sleep(30_000))
	d := startDaemon(t, t.TempDir(), "--bundles", bundles)
	var tok struct {
		Token string `json:"token"`
	}
	if r := d.ctl(t, "token", "--json"); json.Unmarshal([]byte(r.stdout), &tok) != nil || tok.Token == "" {
		t.Fatalf("token: %s %s", r.stdout, r.stderr)
	}
	for _, c := range []struct {
		proto    string
		progress bool
	}{{"2025-06-18", false}, {"2025-06-18", true}, {"2025-03-26", false}, {"2026-07-28", false}, {"2026-07-28", true}} {
		t.Run(fmt.Sprintf("%s-progress=%v", c.proto, c.progress), func(t *testing.T) {
			params := map[string]any{"name": "nap", "arguments": map[string]any{"s": "3"}}
			meta := map[string]any{}
			if c.progress {
				meta["progressToken"] = "p1"
			}
			if c.proto >= "2026" {
				meta["io.modelcontextprotocol/protocolVersion"] = c.proto
				meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
				meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "review15", "version": "1.0.0"}
			}
			params["_meta"] = meta
			msg := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
			type res struct {
				code int
				body string
				err  error
			}
			got := make(chan res, 1)
			go func() {
				code, body, err := mcpPost(t, d, tok.Token, "sleep", c.proto, msg)
				got <- res{code, body, err}
			}()
			sawLive, sawAbandoned := false, false
			deadline := time.After(20 * time.Second)
			for {
				select {
				case r := <-got:
					if r.err != nil || r.code != 200 || !strings.Contains(r.body, `"result"`) || strings.Contains(r.body, `"isError":true`) {
						t.Errorf("protocol %s: the call's answer: %d %v %s", c.proto, r.code, r.err, r.body)
					}
					if sawAbandoned {
						t.Errorf("protocol %s progress %v: the call was counted abandoned while its agent waited", c.proto, c.progress)
					}
					if !sawLive {
						t.Errorf("never saw the call in flight")
					}
					return
				case <-deadline:
					t.Fatal("no answer within 20 s")
				case <-time.After(100 * time.Millisecond):
				}
				if inFlightMetric(t, d) == 1 {
					sawLive = true
				}
				if metricValue(t, d, "clihost_calls_abandoned") != 0 {
					sawAbandoned = true
				}
			}
		})
	}
}
