package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// TestOneTypoOneFinding: each typo, in a tool's inputs/outputs schema or in a frontmatter's own
// fields, is reported exactly once, as an error at the misspelt key, with the field it was
// probably meant to be. Before, `requird:` linted clean (even with --strict) and the tool failed
// at call time; `propertes:` gave one finding per argv reference and example; `input:` and
// `runer:` gave the unknown field and the missing one.
func TestOneTypoOneFinding(t *testing.T) {
	cases := []struct {
		name       string
		edit       edit
		rule       string
		marker     string // text on the line the finding must point at
		suggestion string
	}{
		{"required in inputs", edit{toolFile, "  required: [query]", "  requird: [query]"}, "schema-unknown-keyword", "requird:", "required"},
		{"properties in inputs", edit{toolFile, "  properties:\n    state", "  propertes:\n    state"}, "schema-unknown-keyword", "propertes:", "properties"},
		{"type in a property", edit{toolFile, "limit: { type: integer", "limit: { tpye: integer"}, "schema-unknown-keyword", "limit: { tpye", "type"},
		{"minLength lower-case", edit{toolFile, "query: { type: string }", "query: { type: string, minlength: 1 }"}, "schema-unknown-keyword", "query: {", "minLength"},
		{"items in outputs", edit{toolFile, "outputs: { type: array }", "outputs: { type: array, itmes: { type: string } }"}, "schema-unknown-keyword", "outputs:", "items"},
		{"nested under items", edit{toolFile, "outputs: { type: array }", "outputs:\n  type: array\n  items:\n    type: object\n    requried: [id]"}, "schema-unknown-keyword", "    requried:", "required"},
		{"inputs field", edit{toolFile, "inputs:\n", "input:\n"}, "schema-additional-properties", "input:", "inputs"},
		{"runner field", edit{toolFile, "runner:\n", "runer:\n"}, "schema-additional-properties", "runer:", "runner"},
		{"runner.cli", edit{toolFile, "  cli: ../../CLI.md", "  cl: ../../CLI.md"}, "schema-additional-properties", "  cl: ", "cli"},
		{"idempotent", edit{toolFile, "risk_level: 0\n", "risk_level: 0\nidempotnt: true\n"}, "schema-additional-properties", "idempotnt:", "idempotent"},
		{"CLI.md commands", edit{cliFile, "commands:\n", "comands:\n"}, "schema-additional-properties", "comands:", "commands"},
		{"CLI.md sandbox.fs.write", edit{cliFile, `    write: ["~/.config/demo/**", "./out/**"]`, `    wirte: ["~/.config/demo/**", "./out/**"]`}, "schema-additional-properties", "wirte:", "write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := buildBundle(t, []edit{tc.edit}, nil)
			b := LoadBundle(fsys, cliFile, LoadOptions{})
			if len(b.Findings) != 1 {
				t.Fatalf("want exactly one finding, got %d:\n%s", len(b.Findings), findingsText(b.Findings))
			}
			f := b.Findings[0]
			text := string(fsys[tc.edit.file].Data)
			if f.Rule != tc.rule || f.Severity != SeverityError || f.Pos.File != tc.edit.file || f.Pos.Line != lineOf(t, text, tc.marker) {
				t.Errorf("got %s, want an error %s at %s:%d", f, tc.rule, tc.edit.file, lineOf(t, text, tc.marker))
			}
			if !strings.Contains(f.Message, "did you mean '"+tc.suggestion+"'") {
				t.Errorf("message %q does not suggest %q", f.Message, tc.suggestion)
			}
		})
	}
}

// TestUnknownKeywordWithoutNearMatch: an unknown key that is no near miss of a keyword, or a near
// miss of an annotation, is a warning (JSON Schema ignores it; --strict fails on it); x- extensions and keys inside enum,
// const, default and examples values are not keywords and not reported.
func TestUnknownKeywordWithoutNearMatch(t *testing.T) {
	b := LoadBundle(buildBundle(t, []edit{
		{toolFile, "    query: { type: string }", "    query: { type: string, nullable: true, x-ui: wide, default: { colour: x }, examples: [{ requird: 1 }] }\n    mode: { enum: [{ tpye: 1 }], const: { tpye: 1 }, example: x }"},
	}, nil), cliFile, LoadOptions{})
	if len(b.Findings) != 2 {
		t.Fatalf("want two findings, got:\n%s", findingsText(b.Findings))
	}
	if f := b.Findings[0]; f.Rule != "schema-unknown-keyword" || f.Severity != SeverityWarning || !strings.Contains(f.Message, "'nullable'") {
		t.Fatalf("got %s", f)
	}
	// OpenAPI's example: a near miss of an annotation, which checks nothing
	if f := b.Findings[1]; f.Rule != "schema-unknown-keyword" || f.Severity != SeverityWarning || !strings.Contains(f.Message, "did you mean 'examples'") {
		t.Fatalf("got %s", f)
	}
	if b.Tools[0].InputSchema() == nil {
		t.Fatal("a warning must not disable the tool's inputs schema")
	}
}

// TestTypoDisablesTool: a tool whose inputs schema has a misspelt keyword has no compiled inputs
// schema, so the host refuses to call it instead of calling it without the constraint.
func TestTypoDisablesTool(t *testing.T) {
	b := LoadBundle(buildBundle(t, []edit{{toolFile, "  required: [query]", "  requird: [query]"}}, nil), cliFile, LoadOptions{})
	if !b.Findings.HasErrors() || b.Tools[0].InputSchema() != nil {
		t.Fatalf("findings %v, schema %v", b.Findings, b.Tools[0].InputSchema())
	}
}

func TestNearest(t *testing.T) {
	kw := []string{"type", "required", "properties", "items", "minLength"}
	for in, want := range map[string]string{"requird": "required", "tpye": "type", "itmes": "items", "minlength": "minLength",
		"nullable": "", "x": "", "typ": "type", "type": "", "propertiesxyz": ""} {
		if got := nearest(in, kw); got != want {
			t.Errorf("nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOutputFileRule: runner.output.file must name a declared string input with format: path, in
// an argv tool without stdin whose output is not parsed.
func TestOutputFileRule(t *testing.T) {
	ok := edit{toolFile, "    query: { type: string }", "    query: { type: string }\n    dest: { type: string, format: path }"}
	cases := []struct {
		name  string
		edits []edit
		bad   bool
	}{
		{"fine", []edit{ok, {toolFile, "  output: { format: json }", "  output: { format: binary, file: dest }"}}, false},
		{"undeclared", []edit{{toolFile, "  output: { format: json }", "  output: { format: text, file: dest }"}}, true},
		{"not a path", []edit{{toolFile, "  output: { format: json }", "  output: { format: text, file: query }"}}, true},
		{"parsed", []edit{ok, {toolFile, "  output: { format: json }", "  output: { format: json, file: dest }"}}, true},
		{"stdin", []edit{ok, {toolFile, "  output: { format: json }", "  output: { format: text, file: dest }\n  stdin: x"}}, true},
	}
	for _, tc := range cases {
		b := LoadBundle(buildBundle(t, tc.edits, nil), cliFile, LoadOptions{})
		var rules []string
		for _, f := range b.Findings {
			rules = append(rules, f.Rule)
		}
		if got := strings.Join(rules, " "); (tc.bad && got != "tool-output-file") || (!tc.bad && got != "") {
			t.Errorf("%s: findings %q", tc.name, findingsText(b.Findings))
		}
	}
}

// manyUnknownKeywords is a tool inputs schema's typo (requird) among 20 000 unknown keys.
func manyUnknownKeywords() []edit {
	var sb strings.Builder
	sb.WriteString("  requird: [query]\n")
	for i := range 20000 {
		fmt.Fprintf(&sb, "  k%06d_abcdefghijklmnopqrstu: 1\n", i)
	}
	return []edit{{toolFile, "  required: [query]\n", sb.String()}}
}

// manyUnknownFields is 20 000 unknown TOOL.md frontmatter fields.
func manyUnknownFields() []edit {
	var sb strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&sb, "k%06d_abc: 1\n", i)
	}
	return []edit{{toolFile, "risk_level: 0\n", "risk_level: 0\n" + sb.String()}}
}

// TestManyUnknownKeywords: a hostile schema of many thousands of unknown keys is linted with a
// bounded number of findings, and still disables the tool when one of them is a typo (how long it
// takes is BenchmarkManyUnknownKeywords's).
func TestManyUnknownKeywords(t *testing.T) {
	b := LoadBundle(buildBundle(t, manyUnknownKeywords(), nil), cliFile, LoadOptions{})
	if n := len(b.Findings); n != maxKeywordFindings+1 || !b.Findings.HasErrors() || b.Tools[0].InputSchema() != nil {
		t.Fatalf("%d findings, errors %v", n, b.Findings.HasErrors())
	}
}

// TestManyUnknownFields: 20 000 unknown frontmatter fields are one finding (the fields were put in
// document order by looking each one's position up: minutes; BenchmarkManyUnknownFields).
func TestManyUnknownFields(t *testing.T) {
	b := LoadBundle(buildBundle(t, manyUnknownFields(), nil), cliFile, LoadOptions{})
	if len(b.Findings) != 1 || !strings.Contains(b.Findings[0].Message, "'k000000_abc', 'k000001_abc', 'k000002_abc' and 19997 more") {
		t.Fatalf("findings:\n%s", findingsText(b.Findings[:min(len(b.Findings), 3)]))
	}
}

// TestSuggestionsBeyondSchemas: a misspelt input reference, template filter or install method
// names what it was probably meant to be.
func TestSuggestionsBeyondSchemas(t *testing.T) {
	cases := []struct {
		edit             edit
		rule, suggestion string
	}{
		{edit{toolFile, "${input.state | optional('--state')}", "${input.stat | optional('--state')}"}, "argv-undeclared-input", "${input.state}"},
		{edit{toolFile, "${input.state | optional('--state')}", "${input.state | optinal('--state')}"}, "argv-unknown-filter", "optional"},
		{edit{toolFile, "${input.state | optional('--state')}", "${imput.state | optional('--state')}"}, "argv-syntax", "input"},
		{edit{cliFile, "  - { method: apt, package: demo }", "  - { method: atp, package: demo }"}, "install-unknown-method", "apt"},
	}
	for _, tc := range cases {
		b := LoadBundle(buildBundle(t, []edit{tc.edit}, nil), cliFile, LoadOptions{})
		found := false
		for _, f := range b.Findings {
			found = found || f.Rule == tc.rule && strings.Contains(f.Message, "did you mean '"+tc.suggestion+"'")
		}
		if !found {
			t.Errorf("%s: no %s suggesting %q in\n%s", tc.edit.new, tc.rule, tc.suggestion, findingsText(b.Findings))
		}
	}
}

// BenchmarkManyUnknownKeywords: linting a schema of 20 000 unknown keys.
func BenchmarkManyUnknownKeywords(b *testing.B) {
	dir := buildBundle(b, manyUnknownKeywords(), nil)
	for b.Loop() {
		ResetSchemaCache()
		LoadBundle(dir, cliFile, LoadOptions{})
	}
}

// BenchmarkManyUnknownFields: linting a frontmatter of 20 000 unknown fields.
func BenchmarkManyUnknownFields(b *testing.B) {
	dir := buildBundle(b, manyUnknownFields(), nil)
	for b.Loop() {
		ResetSchemaCache()
		LoadBundle(dir, cliFile, LoadOptions{})
	}
}
