package manifest

import (
	"strings"
	"testing"
)

// TestOptionValueRule: a caller's value standing alone after an option is reported unless its
// schema rules out a leading '-' or marks it; a non-boolean mark is an error.
func TestOptionValueRule(t *testing.T) {
	const query = "query: { type: string }"
	const tail = `"--", "${input.query}"]`
	cases := []struct {
		name       string
		schema     string // replaces the query input's schema
		argv       string // replaces the argv's tail
		rule, hint string // the finding wanted, "" for none
	}{
		{"after a literal short option", query, `"-1", "${input.query}"]`, "argv-option-value", `"-1${input.query}"`},
		{"after a literal long option", query, `"--q", "${input.query}"]`, "argv-option-value", `"--q=${input.query}"`},
		{"join after a literal option", "query: { type: array, items: { type: string } }", `"--q", "${input.query | join(',')}"]`, "argv-option-value", `--q=${input.query | join(',')}`},
		{"optional's separate value", query, `"${input.query | optional('--q')}"]`, "argv-option-value", `optional('--q=')`},
		{"optional's short separate value", query, `"${input.query | optional('-q')}"]`, "argv-option-value", `"-q${input.query}"`},
		{"glued optional", query, `"${input.query | optional('--q=')}"]`, "", ""},
		{"glued literal", query, `"--q=${input.query}"]`, "", ""},
		{"after a literal --", query, `"--", "-1", "${input.query}"]`, "", ""},
		{"pattern rules out a dash", `query: { type: string, pattern: "^[a-z][a-z-]*$" }`, `"-1", "${input.query}"]`, "", ""},
		{"pattern allows a dash first", `query: { type: string, pattern: "^[a-z-]+$" }`, `"-1", "${input.query}"]`, "argv-option-value", ""},
		{"unanchored pattern", `query: { type: string, pattern: "[a-z]" }`, `"-1", "${input.query}"]`, "argv-option-value", ""},
		{"pattern with an empty match", `query: { type: string, pattern: "^(x|)" }`, `"-1", "${input.query}"]`, "argv-option-value", ""},
		{"enum without a dash", `query: { type: string, enum: [a, b] }`, `"-1", "${input.query}"]`, "", ""},
		{"enum with a dash", `query: { type: string, enum: [a, -b] }`, `"-1", "${input.query}"]`, "argv-option-value", ""},
		{"non-negative integer", `query: { type: integer, minimum: 0 }`, `"--n", "${input.query}"]`, "", ""},
		{"integer", `query: { type: integer }`, `"--n", "${input.query}"]`, "argv-option-value", ""},
		{"json of a string", query, `"--doc", "${input.query | json()}"]`, "", ""},
		{"marked", `query: { type: string, x-clihost-allow-dash: true }`, `"--arg", "${input.query}"]`, "", ""},
		{"mark not a boolean", `query: { type: string, x-clihost-allow-dash: "yes" }`, tail, "input-allow-dash", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := LoadBundle(buildBundle(t, []edit{{toolFile, query, c.schema}, {toolFile, tail, c.argv}}, nil), cliFile, LoadOptions{})
			var got []Finding
			for _, f := range b.Findings {
				if f.Rule == "argv-option-value" || f.Rule == "input-allow-dash" {
					got = append(got, f)
				}
			}
			switch {
			case c.rule == "" && len(got) > 0:
				t.Fatalf("unwanted: %s", findingsText(got))
			case c.rule != "" && (len(got) != 1 || got[0].Rule != c.rule || !strings.Contains(got[0].Hint, c.hint)):
				t.Fatalf("want one %s with hint %q; all findings:\n%s", c.rule, c.hint, findingsText(b.Findings))
			}
		})
	}
}

func TestPatternExcludesDash(t *testing.T) {
	for p, want := range map[string]bool{
		"^[^-]":                        true,
		"^[A-Za-z0-9_][^:\\n]*$":       true,
		"^https?://[^\\s]+$":           true,
		"^(?i)[a-z]":                   true,
		"^\\bx":                        true,
		"^[a-z0-9+_-]+$":               false,
		"^.":                           false,
		"[a-z]":                        false,
		"(?m)^[a-z]":                   false,
		"^a|b":                         false,
		"^a?":                          false,
		"^\\B-":                        false,
		"^(0|-?[0-9]+)$":               false,
		"^[0-9]{1,2}:[0-9]{2}$|^[0-9]": false, // anchored in each branch, but StartCond stops at the alternation: conservative
		"((":                           false,
	} {
		if got := patternExcludesDash(p); got != want {
			t.Errorf("%q: %v, want %v", p, got, want)
		}
	}
}
