package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/schemas"
)

// TestValidationCacheFollowsEdits: a reload after an edit validates the new text, never reuses the
// result for the old one: the finding appears with the edit and goes with its undoing, at the
// edited line, whether the earlier result is cached or not.
func TestValidationCacheFollowsEdits(t *testing.T) {
	bad := []edit{{toolFile, "risk_level: 0\n", "risk_level: 7\n"}}
	for round := range 2 {
		if b := LoadBundle(buildBundle(t, nil, nil), cliFile, LoadOptions{}); len(b.Findings) != 0 {
			t.Fatalf("round %d, base bundle:\n%s", round, findingsText(b.Findings))
		}
		b := LoadBundle(buildBundle(t, bad, nil), cliFile, LoadOptions{})
		if len(b.Findings) != 1 || b.Findings[0].Rule != "schema-maximum" || b.Findings[0].Pos.File != toolFile ||
			b.Findings[0].Pos.Line != lineOf(t, strings.Replace(baseTool, "risk_level: 0", "risk_level: 7", 1), "risk_level: 7") {
			t.Fatalf("round %d, risk_level 7:\n%s", round, findingsText(b.Findings))
		}
	}
}

// TestValidationCacheSameFindingsAsCold: a bundle with schema errors in both files gives the same
// findings, positions included, validated afresh and from the cache; and the same text in another
// file is reported at that file.
func TestValidationCacheSameFindingsAsCold(t *testing.T) {
	edits := []edit{
		{cliFile, "bin: demo\n", "bin: demo\ncolour: blue\nshade: dark\n"},
		{toolFile, "risk_level: 0\n", "risk_level: 7\nextra: 1\n"},
		{toolFile, "version: 1.0.0", "version: one"},
	}
	fsys := buildBundle(t, edits, nil)
	ResetSchemaCache()
	cold := LoadBundle(fsys, cliFile, LoadOptions{})
	if len(cold.Findings) < 4 {
		t.Fatalf("expected schema findings in both files, got:\n%s", findingsText(cold.Findings))
	}
	warm := LoadBundle(fsys, cliFile, LoadOptions{})
	if !reflect.DeepEqual(cold.Findings, warm.Findings) {
		t.Fatalf("cold:\n%s\nwarm:\n%s", findingsText(cold.Findings), findingsText(warm.Findings))
	}
	moved := LoadBundle(fsys, cliFile, LoadOptions{Display: func(p string) string { return "elsewhere/" + p }})
	if len(moved.Findings) != len(cold.Findings) {
		t.Fatalf("moved:\n%s", findingsText(moved.Findings))
	}
	for i, f := range moved.Findings {
		want := cold.Findings[i]
		want.Pos.File = "elsewhere/" + want.Pos.File
		if f != want {
			t.Errorf("finding %d: got %s, want %s", i, f, want)
		}
	}
}

// TestValidationCacheKeyedBySchema: the same text validated against the TOOL schema and then
// the CLI schema gets each schema's own result.
func TestValidationCacheKeyedBySchema(t *testing.T) {
	cli, err := schemas.CLI()
	if err != nil {
		t.Fatal(err)
	}
	tool, err := schemas.Tool()
	if err != nil {
		t.Fatal(err)
	}
	doc, problems := ParseDocument(toolFile, []byte(baseTool))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	asTool := newCollector(doc)
	asTool.schema(tool)
	asCLI := newCollector(doc)
	asCLI.schema(cli)
	if len(asTool.findings()) != 0 || len(asCLI.findings()) == 0 {
		t.Fatalf("as TOOL.md:\n%s\nas CLI.md:\n%s", findingsText(asTool.findings()), findingsText(asCLI.findings()))
	}
}

// TestCompiledSchemaFollowsEdits: after an edit to a tool's inputs schema, the tool validates with
// the new schema (its example is checked against it too), and with the old one again once the edit
// is undone; the inputs and outputs of the same text are different schemas.
func TestCompiledSchemaFollowsEdits(t *testing.T) {
	narrow := []edit{{toolFile, "enum: [open, closed]", "enum: [closed]"}}
	for round := range 2 {
		b := LoadBundle(buildBundle(t, nil, nil), cliFile, LoadOptions{})
		if len(b.Findings) != 0 || b.Tools[0].InputSchema().Validate(map[string]any{"state": "open", "query": "x"}) != nil {
			t.Fatalf("round %d, base bundle:\n%s", round, findingsText(b.Findings))
		}
		if b.Tools[0].OutputSchema().Validate([]any{}) != nil {
			t.Fatalf("round %d: outputs schema is not the array schema", round)
		}
		b = LoadBundle(buildBundle(t, narrow, nil), cliFile, LoadOptions{})
		if len(b.Findings) != 1 || b.Findings[0].Rule != "tool-example-invalid" {
			t.Fatalf("round %d, narrowed enum:\n%s", round, findingsText(b.Findings))
		}
		if b.Tools[0].InputSchema().Validate(map[string]any{"state": "open", "query": "x"}) == nil {
			t.Fatalf("round %d: the narrowed inputs schema accepts state open", round)
		}
	}
}

func TestJoinPointer(t *testing.T) {
	if got := JoinPointer("/a", "x/y~z", 3, int64(4)); got != "/a/x~1y~0z/3/4" {
		t.Fatalf("got %q", got)
	}
}

// TestUnknownFieldsInFileOrder: several unknown fields in one mapping are named, and pointed at,
// in the order they are written, every time (the validator lists them in random map order).
func TestUnknownFieldsInFileOrder(t *testing.T) {
	fsys := buildBundle(t, []edit{{cliFile, "bin: demo\n", "bin: demo\nzeta: 1\nalpha: 2\nmid: 3\nbeta: 4\n"}}, nil)
	want := lineOf(t, strings.Replace(baseCLI, "bin: demo\n", "bin: demo\nzeta: 1\n", 1), "zeta: 1")
	for range 20 {
		ResetSchemaCache()
		b := LoadBundle(fsys, cliFile, LoadOptions{})
		if len(b.Findings) != 1 || b.Findings[0].Pos.Line != want ||
			b.Findings[0].Message != "zeta: unknown fields 'zeta', 'alpha', 'mid' and 1 more" {
			t.Fatalf("findings:\n%s", findingsText(b.Findings))
		}
	}
}

// TestVersionCheckCacheFollowsEdits: each version_check pattern and range is judged by its own
// text, before and after the others were seen.
func TestVersionCheckCacheFollowsEdits(t *testing.T) {
	cases := []struct {
		edit edit
		rule string // "" for none
	}{
		{edit{cliFile, `parse: 'demo (\d+\.\d+\.\d+)'`, `parse: 'demo \d+'`}, "version-regex-group"},
		{edit{cliFile, `parse: 'demo (\d+\.\d+\.\d+)'`, `parse: 'demo ((\d+)'`}, "version-regex"},
		{edit{cliFile, `parse: 'demo (\d+\.\d+\.\d+)'`, `parse: 'demo (\d+)(?=\.)'`}, ""},
		{edit{cliFile, `range: ">=1.0 <2"`, `range: "newest"`}, "version-range"},
		{edit{cliFile, `range: ">=1.0 <2"`, `range: ">=1.1 <2"`}, ""},
	}
	for round := range 2 {
		for _, c := range cases {
			b := LoadBundle(buildBundle(t, []edit{c.edit}, nil), cliFile, LoadOptions{})
			got := ""
			if len(b.Findings) > 0 {
				got = b.Findings[0].Rule
			}
			if len(b.Findings) > 1 || got != c.rule {
				t.Errorf("round %d, %s: want %q, got:\n%s", round, c.edit.new, c.rule, findingsText(b.Findings))
			}
		}
	}
}

// TestExampleCacheFollowsEdits: an example's validation is looked up by its file's text, so an
// edit to the example alone, or to the inputs schema alone, is judged afresh on the next load, and
// its undoing too.
func TestExampleCacheFollowsEdits(t *testing.T) {
	cases := []edit{
		{toolFile, "input: { state: open, query: x }", "input: { state: shut, query: x }"},
		{toolFile, "input: { state: open, query: x }", "input: { state: open }"},
		{toolFile, "required: [query]", "required: [query, limit]"},
	}
	for round := range 2 {
		for _, e := range cases {
			if b := LoadBundle(buildBundle(t, nil, nil), cliFile, LoadOptions{}); len(b.Findings) != 0 {
				t.Fatalf("round %d, base bundle:\n%s", round, findingsText(b.Findings))
			}
			b := LoadBundle(buildBundle(t, []edit{e}, nil), cliFile, LoadOptions{})
			if len(b.Findings) != 1 || b.Findings[0].Rule != "tool-example-invalid" {
				t.Fatalf("round %d, %s:\n%s", round, e.new, findingsText(b.Findings))
			}
		}
	}
}

// TestReloadOnDiskFollowsEdits: a bundle on disk is loaded, one of its files is rewritten in place
// (same size, same modification time) and loaded again: every cache is keyed by the text, so the
// second load reports what the new text holds, in every part a reload caches (the frontmatter's
// validation, a tool's schemas and examples), and the first load's findings come back with the
// old text.
func TestReloadOnDiskFollowsEdits(t *testing.T) {
	cases := []struct {
		edit     edit
		rule, at string // the finding's rule, and a marker of its line in the edited text
	}{
		{edit{toolFile, "risk_level: 0\n", "risk_level: 7\n"}, "schema-maximum", "risk_level: 7"},
		{edit{toolFile, "input: { state: open, query: x }", "input: { state: shut, query: x }"}, "tool-example-invalid", "state: shut"},
		{edit{toolFile, "enum: [open, closed]", "enum: [shut, closed]"}, "tool-example-invalid", "- { name: open items"},
		{edit{cliFile, "default_format: text", "default_format: toml"}, "schema-enum", "default_format: toml"},
	}
	dir := t.TempDir()
	onDisk := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	write := func(name, text string) {
		p := onDisk(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := os.Chtimes(p, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	load := func() *Bundle {
		return LoadBundle(os.DirFS(dir), cliFile, LoadOptions{Display: onDisk, OSPath: onDisk})
	}
	base := map[string]string{cliFile: baseCLI, toolFile: baseTool}
	for name, text := range base {
		write(name, text)
	}
	for round := range 2 {
		for _, c := range cases {
			if b := load(); len(b.Findings) != 0 {
				t.Fatalf("round %d, before %s:\n%s", round, c.edit.new, findingsText(b.Findings))
			}
			edited := strings.Replace(base[c.edit.file], c.edit.old, c.edit.new, 1)
			if len(edited) != len(base[c.edit.file]) {
				t.Fatalf("%s: the edit changes the size", c.edit.new)
			}
			write(c.edit.file, edited)
			b := load()
			if len(b.Findings) != 1 || b.Findings[0].Rule != c.rule || b.Findings[0].Pos.File != onDisk(c.edit.file) ||
				b.Findings[0].Pos.Line != lineOf(t, edited, c.at) {
				t.Fatalf("round %d, %s:\n%s", round, c.edit.new, findingsText(b.Findings))
			}
			write(c.edit.file, base[c.edit.file])
		}
	}
}

// TestExampleCacheHoldsNoProblemText: an example that fails its inputs schema is reported in full
// at every load, but what it found is not cached: its text is as long as the bundle makes it (one
// line per wrong item, about 20 times the example's own text), so every edit of a hostile file
// would otherwise add megabytes to a cache bounded only by its number of entries.
func TestExampleCacheHoldsNoProblemText(t *testing.T) {
	input := "[" + strings.Repeat("1,", 20000) + "1]"
	ResetSchemaCache()
	var first string
	for i := range 4 {
		b := LoadBundle(buildBundle(t, []edit{
			{toolFile, "query: { type: string }", "query: { type: array, items: { type: string } }"},
			{toolFile, "input: { state: open, query: x }", "input: { state: open, query: " + input + " }"},
			{toolFile, "description: List items.", fmt.Sprintf("description: List items, edit %d.", i%2)},
		}, nil), cliFile, LoadOptions{})
		var problem string
		for _, f := range b.Findings {
			if f.Rule == "tool-example-invalid" {
				problem = f.Message
			}
		}
		if len(problem) < 20000 || (first != "" && problem != first) {
			t.Fatalf("load %d: the example's problem is %d bytes, the first load's %d:\n%.300s", i, len(problem), len(first), problem)
		}
		first = problem
	}
	exampleResults.Lock()
	defer exampleResults.Unlock()
	if n := len(exampleResults.m); n != 0 {
		t.Fatalf("the example cache holds %d failing examples", n)
	}
}

// TestValidationCacheHoldsLittlePerFile: what schema validation found is cached only while it is
// small. A hostile frontmatter can make it long (a list of 20,000 wrong items is 40 KB of text and
// 20,000 groups, over 2 MB held), and every edit of it would add that much to a cache bounded only
// by its number of entries; such a result is found again at each load, the same findings.
func TestValidationCacheHoldsLittlePerFile(t *testing.T) {
	ResetSchemaCache()
	var first Findings
	for i := range 4 {
		b := LoadBundle(buildBundle(t, []edit{
			{toolFile, "risk_level: 0\n", "risk_level: 0\nmutates: [" + strings.Repeat("1,", 20000) + "1]\n"},
			{toolFile, "description: List items.", fmt.Sprintf("description: List items, edit %d.", i%2)},
		}, nil), cliFile, LoadOptions{})
		if len(b.Findings) < 20000 || (first != nil && !reflect.DeepEqual(b.Findings, first) && i%2 == 0) {
			t.Fatalf("load %d: %d findings, the first load %d", i, len(b.Findings), len(first))
		}
		if i == 0 {
			first = b.Findings
		}
	}
	validationCache.Lock()
	defer validationCache.Unlock()
	for _, groups := range validationCache.m {
		if held := groupsSize(groups); held > maxCachedGroups {
			t.Fatalf("the validation cache holds %d bytes for one file", held)
		}
	}
}
