package acli

import (
	"strings"
	"testing"
)

// TestCommandExampleIsTheBundlesOwn: the "cli" tool's command description gives an example of
// each bundle's own, which ACLI parses into a call of one of its tools (it was gh's
// 'pr list --state open' for every bundle).
func TestCommandExampleIsTheBundlesOwn(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"gh", "git", "jq", "kubectl", "rg", "curl"} {
		b := shipped(t, name)
		ex := CommandExample(b)
		desc := InputSchema(b)["properties"].(map[string]any)["command"].(map[string]any)["description"].(string)
		if !strings.Contains(desc, "'"+ex+"'") {
			t.Errorf("%s: description %q does not show %q", name, desc, ex)
		}
		req, err := Parse(b, ex, Options{})
		if err != nil || req.Kind != KindCall {
			t.Errorf("%s: example %q does not parse into a call: %v", name, ex, err)
		}
		if other, dup := seen[ex]; dup {
			t.Errorf("%s and %s show the same example %q", name, other, ex)
		}
		seen[ex] = name
	}
	if got := CommandExample(nil); got != "help" {
		t.Errorf("no bundle: %q", got)
	}
}
