package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// sarifSchema is the OASIS SARIF 2.1.0 (rtm.5) JSON Schema, as npm's @microsoft/jest-sarif
// 1.0.0-beta.0 (MIT) ships it in lib/schemas.
const sarifSchema = "testdata/sarif-2.1.0-rtm.5.json"

// sarifOut is what the tests read back from a SARIF log.
type sarifOut struct {
	Runs []struct {
		Tool struct {
			Driver struct{ Rules []struct{ ID string } }
		}
		Results []struct {
			RuleID    string
			RuleIndex int
			Level     string
			Locations []struct {
				PhysicalLocation struct {
					ArtifactLocation struct{ URI string }
					Region           struct{ StartLine, StartColumn int }
				}
			}
		}
	}
}

// lintSARIF runs lint --format sarif on dir, validates the log against the SARIF schema and
// checks what GitHub code scanning relies on: each result's rule is in the driver's rules at its
// ruleIndex, a level, a line and a column. It returns the results' artifact URIs.
func lintSARIF(t *testing.T, dir string) []string {
	t.Helper()
	schema, err := jsonschema.Compile(sarifSchema)
	if err != nil {
		t.Fatalf("compiling %s: %v", sarifSchema, err)
	}
	code, out, _ := runCtl(t, "lint", "--format", "sarif", dir)
	if code != 1 {
		t.Fatalf("lint --format sarif %s: exit %d, want 1 (the tree has an error)", dir, code)
	}
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("the SARIF log does not validate against SARIF 2.1.0: %#v\n%s", err, out)
	}
	var log sarifOut
	if err := json.Unmarshal([]byte(out), &log); err != nil || len(log.Runs) != 1 || len(log.Runs[0].Results) < 2 {
		t.Fatalf("want one run with the tree's findings: %v\n%s", err, out)
	}
	var uris []string
	run := log.Runs[0]
	for _, r := range run.Results {
		if r.RuleIndex >= len(run.Tool.Driver.Rules) || run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID || r.RuleID == "" {
			t.Errorf("result of rule %q has ruleIndex %d, which is not that rule in %v", r.RuleID, r.RuleIndex, run.Tool.Driver.Rules)
		}
		if r.Level != "error" && r.Level != "warning" {
			t.Errorf("result of rule %s has level %q", r.RuleID, r.Level)
		}
		loc := r.Locations[0].PhysicalLocation
		if loc.Region.StartLine < 1 || loc.Region.StartColumn < 1 {
			t.Errorf("result of rule %s at line %d column %d", r.RuleID, loc.Region.StartLine, loc.Region.StartColumn)
		}
		uris = append(uris, loc.ArtifactLocation.URI)
	}
	return uris
}

// TestLintSARIFSchema: the SARIF log validates against the SARIF 2.1.0 schema; a relative path
// stays relative (code scanning resolves it in the repository), an absolute one is a file:// URI,
// and a folder named with a space, '#' and '%' is percent-encoded into a URI that names it.
func TestLintSARIFSchema(t *testing.T) {
	for _, u := range lintSARIF(t, "testdata/tree") {
		if u != "testdata/tree/.cli/mini/CLI.md" {
			t.Errorf("artifact URI %q, want the relative testdata/tree/.cli/mini/CLI.md", u)
		}
	}
	odd := filepath.Join(copyTree(t), "my bundles #1 100%")
	if err := os.MkdirAll(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(filepath.Dir(odd), ".cli"), filepath.Join(odd, ".cli")); err != nil {
		t.Fatal(err)
	}
	for _, u := range lintSARIF(t, odd) {
		p, err := url.Parse(u)
		if err != nil || p.Scheme != "file" || p.Path != filepath.Join(odd, ".cli/mini/CLI.md") {
			t.Errorf("artifact URI %q (%v) does not name %s as a file:// URI", u, err, filepath.Join(odd, ".cli/mini/CLI.md"))
		}
	}
}

// TestLintGitLab: --format gitlab is a GitLab Code Quality report: a JSON array of issues with a
// description, check name, severity GitLab knows, a location and a fingerprint unique to each.
func TestLintGitLab(t *testing.T) {
	code, out, _ := runCtl(t, "lint", "--format", "gitlab", "testdata/tree")
	if code != 1 {
		t.Fatalf("lint --format gitlab: exit %d, want 1", code)
	}
	var issues []map[string]any
	if err := json.Unmarshal([]byte(out), &issues); err != nil || len(issues) < 2 {
		t.Fatalf("want a JSON array of the tree's findings: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	severities := map[string]bool{}
	for _, is := range issues {
		fp, _ := is["fingerprint"].(string)
		desc, _ := is["description"].(string)
		check, _ := is["check_name"].(string)
		sev, _ := is["severity"].(string)
		loc, _ := is["location"].(map[string]any)
		lines, _ := loc["lines"].(map[string]any)
		begin, _ := lines["begin"].(float64)
		if len(fp) != 32 || seen[fp] || desc == "" || check == "" || loc["path"] != "testdata/tree/.cli/mini/CLI.md" || begin < 1 {
			t.Errorf("issue %v: want a new 32-hex fingerprint, a description, a check name, the relative path and a line", is)
		}
		if !strings.Contains("info minor major critical blocker", sev) || sev == "" {
			t.Errorf("issue %v: severity %q is not one of GitLab's", is, sev)
		}
		seen[fp], severities[sev] = true, true
	}
	if !severities["major"] || !severities["minor"] {
		t.Errorf("want the error as major and the warning as minor, got %v", severities)
	}
}
