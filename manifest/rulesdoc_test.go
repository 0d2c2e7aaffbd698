package manifest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryRuleDocumented: each lint rule this package (and the registry) reports has a row in
// docs/authoring.md's lint table, so a bundle author can look up what a finding means.
func TestEveryRuleDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/authoring.md")
	if err != nil {
		t.Fatal(err)
	}
	ruleRe := regexp.MustCompile(`Severity(?:Error|Warning|Info), "([a-z0-9-]+)"|Rule: +"([a-z0-9-]+)"`)
	seen := map[string]bool{}
	for _, dir := range []string{".", "../registry"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ruleRe.FindAllStringSubmatch(string(src), -1) {
				seen[m[1]+m[2]] = true
			}
		}
	}
	if len(seen) < 40 {
		t.Fatalf("found only %d rules in the sources: the pattern no longer matches how rules are reported", len(seen))
	}
	delete(seen, "schema-") // schema-<keyword>, documented as schema-*
	for rule := range seen {
		if !strings.Contains(string(doc), "`"+rule+"`") {
			t.Errorf("lint rule %s has no row in docs/authoring.md", rule)
		}
	}
}
