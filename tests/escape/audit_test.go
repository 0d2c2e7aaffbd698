package escape

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// TestAuditFlood is issue 10 §6: a CLI with egress floods the sandbox's DNS stub with names the
// bundle does not declare (one audit line each on the old code: 12,000 lines, ~3 MB from this
// call). The call's audit must stay bounded — at most the refused samples as cli.egress lines,
// within the per-call byte cap — while its cli.egress_summary counts every query, the repeated
// name with its exact count. Positive control: the probe reports that every query was answered,
// so the flood did reach the stub.
func TestAuditFlood(t *testing.T) {
	requireCorpus(t)
	const repeats, distinct = 10000, 2000
	reg := fixture.Registry(t, probeFiles("net", sandboxes["net"]))
	var audit fixture.Buffer
	h := host.New(reg, host.Options{Audit: &audit, LookupEnv: func(k string) (string, bool) {
		if k == "PATH" {
			return probeDir + ":/usr/bin:/bin", true
		}
		return "", false
	}})
	r := callOn(t, h, "net", fixture.Workspace(t), "dns-flood", strconv.Itoa(repeats), strconv.Itoa(distinct))
	if r.Result != "allowed" || r.Detail != strconv.Itoa(repeats+distinct) {
		t.Fatalf("the flood did not reach the stub: %+v", r)
	}

	out := audit.Bytes()
	if limit := host.EgressAuditBytes + 32<<10; len(out) > limit {
		t.Errorf("one call wrote %d audit bytes, over %d", len(out), limit)
	}
	counts := map[string]int{}
	var sum struct {
		Decisions int `json:"decisions"`
		Refused   int `json:"refused_count"`
		Logged    int `json:"logged"`
		Unsampled int `json:"unsampled"`
		Repeated  []struct {
			Host  string `json:"host"`
			Via   string `json:"via"`
			Count int    `json:"count"`
		} `json:"repeated"`
	}
	for line := range strings.Lines(string(out)) {
		var rec struct{ Type string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		counts[rec.Type]++
		if rec.Type == "cli.egress_summary" {
			if err := json.Unmarshal([]byte(line), &sum); err != nil {
				t.Fatal(err)
			}
		}
	}
	if counts["cli.egress"] != host.EgressRefusedSamples || counts["cli.egress_summary"] != 1 || counts["cli.invoked"] != 1 {
		t.Fatalf("audit lines by type %v, want %d cli.egress, one summary, one cli.invoked", counts, host.EgressRefusedSamples)
	}
	if sum.Decisions != repeats+distinct || sum.Refused != repeats+distinct || sum.Logged != host.EgressRefusedSamples ||
		sum.Unsampled != distinct+1-host.EgressRefusedSamples {
		t.Errorf("summary %+v does not count the %d queries", sum, repeats+distinct)
	}
	if len(sum.Repeated) != 1 || sum.Repeated[0].Host != "flood.invalid" || sum.Repeated[0].Count != repeats || sum.Repeated[0].Via != "dns" {
		t.Errorf("summary repeated %+v, want flood.invalid %d times", sum.Repeated, repeats)
	}
}
