package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/dnsquery"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox"
	"github.com/clihost/clihost/sandbox/egress"
)

// dnsFloodName is the name under which this test binary acts as a DNS flooder (see floodMain).
const dnsFloodName = "dnsflood"

// floodMain makes this test binary, run under the name dnsflood (a hard link, see
// floodBundle), a program that floods the sandbox's DNS stub: `dnsflood REPEATS DISTINCT` sends
// REPEATS A queries for flood.invalid and one for each of DISTINCT other names, one at a time,
// waits for each answer and prints the number of answers. `dnsflood --version` prints its version.
// It returns when the binary runs under another name.
func floodMain() {
	if filepath.Base(os.Args[0]) != dnsFloodName {
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println("dnsflood 1.0.0")
		os.Exit(0)
	}
	n, err := flood(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dnsflood:", err)
		os.Exit(1)
	}
	fmt.Print(n)
	os.Exit(0)
}

// flood runs floodMain's queries and returns how many were answered.
func flood(args []string) (int, error) {
	if len(args) != 2 {
		return 0, fmt.Errorf("usage: dnsflood REPEATS DISTINCT")
	}
	repeats, err1 := strconv.Atoi(args[0])
	distinct, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("usage: dnsflood REPEATS DISTINCT")
	}
	c, err := net.Dial("udp", net.JoinHostPort(egress.ProxyHost, strconv.Itoa(egress.DNSPort)))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n, _, err := dnsquery.Flood(c, repeats, distinct)
	return n, err
}

// floodBundle returns a bundle whose tool run is this test binary as dnsflood (a hard link, or
// a copy, in a directory the agent can read), and the PATH that finds it.
func floodBundle(t *testing.T) (map[string]string, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "clihost-dnsflood-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, dnsFloodName)
	if err := os.Link(self, bin); err != nil {
		copyFile(t, self, bin)
	}
	return map[string]string{
		"dnsflood/CLI.md": `---
name: DNS flood
id: dnsflood
description: Floods the sandbox's DNS stub with names it refuses.
version: 1.0.0
bin: dnsflood
install: [{ method: go, package: "example.com/dnsflood@latest" }]
version_check: { cmd: "dnsflood --version", parse: 'dnsflood (\d+\.\d+\.\d+)', range: ">=1" }
sandbox:
  network: { egress: [allowed.test] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  run: ./tools/run/TOOL.md
---
`,
		"dnsflood/tools/run/TOOL.md": `---
name: Run
id: dnsflood.run
description: Sends the queries.
version: 1.0.0
inputs: { type: object, required: [repeats, distinct], properties: { repeats: { type: string }, distinct: { type: string } } }
outputs: { type: string }
timeout_ms: 120000
runner: { cli: ../../CLI.md, argv: ["${input.repeats}", "${input.distinct}"] }
---
`,
	}, dir + ":/usr/bin:/bin"
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// auditRecords parses the audit lines, grouped by type.
func auditRecords(t *testing.T, audit []byte) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for line := range strings.Lines(string(audit)) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		typ, _ := rec["type"].(string)
		out[typ] = append(out[typ], rec)
	}
	return out
}

// TestEgressAuditFloodIsBounded runs a real sandboxed program that sends thousands of DNS
// queries the stub refuses (issue 10 §6: 20,000 audit lines from one call): the call writes a
// bounded number of audit lines and bytes, and its summary counts every query, the repeated
// name with its exact count.
func TestEgressAuditFloodIsBounded(t *testing.T) {
	needSandbox(t)
	const repeats, distinct = 10000, 2000
	files, path := floodBundle(t)
	var audit bytes.Buffer
	h, _ := writeBundle(t, files, Options{Audit: &audit, LookupEnv: func(k string) (string, bool) {
		if k == "PATH" {
			return path, true
		}
		return "", false
	}})
	b := bundle(t, h, "dnsflood")
	env := h.Call(context.Background(), b, "run", js(t, fmt.Sprintf(`{"repeats": "%d", "distinct": "%d"}`, repeats, distinct)),
		Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if !env.OK || env.Value != strconv.Itoa(repeats+distinct) {
		t.Fatalf("the flood did not run to the end: %+v %+v", env, env.Error)
	}

	const bound = EgressAuditBytes + 32<<10 // the decision lines, the summary and cli.invoked
	if audit.Len() > bound {
		t.Errorf("the call wrote %d audit bytes, over %d", audit.Len(), bound)
	}
	recs := auditRecords(t, audit.Bytes())
	if n := len(recs["cli.egress"]); n != EgressRefusedSamples {
		t.Errorf("%d cli.egress lines, want the %d refused samples", n, EgressRefusedSamples)
	}
	if n := len(recs["cli.audit_truncated"]); n != 0 {
		t.Errorf("%d cli.audit_truncated lines: the samples fit the byte cap", n)
	}
	sums := recs["cli.egress_summary"]
	if len(sums) != 1 || len(recs["cli.invoked"]) != 1 {
		t.Fatalf("%d summaries and %d cli.invoked lines, want one each (%d cli.egress lines)", len(sums), len(recs["cli.invoked"]), len(recs["cli.egress"]))
	}
	sum := sums[0]
	if sum["call_id"] != recs["cli.invoked"][0]["call_id"] {
		t.Errorf("summary call_id %v, call %v", sum["call_id"], recs["cli.invoked"][0]["call_id"])
	}
	for k, want := range map[string]float64{
		"decisions": repeats + distinct, "refused_count": repeats + distinct, "allowed_count": 0,
		"logged": EgressRefusedSamples, "distinct": 1 + distinct, "unsampled": distinct + 1 - EgressRefusedSamples,
	} {
		if got, _ := sum[k].(float64); got != want {
			t.Errorf("summary %s = %v, want %v", k, sum[k], want)
		}
	}
	rep, _ := sum["repeated"].([]any)
	if len(rep) != 1 {
		t.Fatalf("summary repeated %v, want flood.invalid only", sum["repeated"])
	}
	first, _ := rep[0].(map[string]any)
	if first["host"] != "flood.invalid" || first["count"] != float64(repeats) || first["via"] != "dns" || first["allowed"] != false {
		t.Errorf("repeated decision %v, want flood.invalid refused %d times by dns", first, repeats)
	}
}

// TestEgressAuditByteCap fills one call's byte cap with long distinct decisions: the lines past
// it are dropped, counted in a cli.audit_truncated line and in the summary, which the call's end
// writes.
func TestEgressAuditByteCap(t *testing.T) {
	var out bytes.Buffer
	a := &auditLog{w: &out}
	release := a.holdCall("c_cap", "cap")
	long := strings.Repeat("r", 2*egressReasonMax) // cut to egressReasonMax
	n := EgressRefusedSamples + EgressAllowedSamples + 10
	for i := range n {
		a.egress("c_cap", EgressDecision{Type: "cli.egress", CallID: "c_cap", CLIID: "cap", Host: fmt.Sprintf("%s%03d.test", strings.Repeat("h", 200), i),
			Allowed: i%2 == 0, Reason: long, Via: "connect", TS: "t"})
	}
	before := out.Len()
	if before > EgressAuditBytes {
		t.Errorf("%d bytes of decision lines, over the cap %d", before, EgressAuditBytes)
	}
	release()
	recs := auditRecords(t, out.Bytes())
	logged := len(recs["cli.egress"])
	for _, r := range recs["cli.egress"] {
		if reason, _ := r["reason"].(string); len(reason) > egressReasonMax+len("…") {
			t.Fatalf("reason of %d bytes not cut", len(reason))
		}
	}
	tr, sums := recs["cli.audit_truncated"], recs["cli.egress_summary"]
	if len(tr) != 1 || len(sums) != 1 {
		t.Fatalf("%d truncation and %d summary lines, want one each", len(tr), len(sums))
	}
	dropped, _ := tr[0]["dropped"].(float64)
	unsampled, _ := sums[0]["unsampled"].(float64)
	if dropped == 0 || sums[0]["dropped"] != dropped || int(dropped+unsampled)+logged != n || sums[0]["decisions"] != float64(n) {
		t.Errorf("logged %d, dropped %v, unsampled %v, summary %v: want them to add up to %d", logged, dropped, unsampled, sums[0], n)
	}
	if tr[0]["limit_bytes"] != float64(EgressAuditBytes) || tr[0]["call_id"] != "c_cap" {
		t.Errorf("truncation line %v", tr[0])
	}
}

// sandboxPolicyWithEgress is a compiled policy that declares egress.
var sandboxPolicyWithEgress = sandbox.Policy{Egress: []string{"x.test"}}

// TestEgressAuditSessionEnd: a lifecycle command's egress (no Host.Call holds its call id) is
// summarised when its session ends, and a decision seen twice is written once.
func TestEgressAuditSessionEnd(t *testing.T) {
	var out bytes.Buffer
	h := &Host{audit: &auditLog{w: &out}}
	pol := h.egressPolicy(&sandboxPolicyWithEgress, "life", "c_life")
	for range 2 {
		pol.Log(egress.Decision{Host: "x.test", Via: "dns", Reason: "host x.test is not in the egress allowlist"})
	}
	if recs := auditRecords(t, out.Bytes()); len(recs["cli.egress"]) != 1 || len(recs["cli.egress_summary"]) != 0 {
		t.Fatalf("before the session ends: %s", out.String())
	}
	pol.End()
	recs := auditRecords(t, out.Bytes())
	if s := recs["cli.egress_summary"]; len(s) != 1 || s[0]["decisions"] != float64(2) || s[0]["call_id"] != "c_life" {
		t.Fatalf("after the session: %s", out.String())
	}
	if h.audit.calls["c_life"] != nil {
		t.Error("the call's aggregate is kept after its session ended")
	}
}
