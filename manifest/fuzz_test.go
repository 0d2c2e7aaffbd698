package manifest

import (
	"testing"
	"testing/fstest"
)

// The fuzz targets check that no input makes the parsers panic and that every finding has a
// position inside the file. CI runs each for a short budget (.ci/run).

func FuzzParseCLI(f *testing.F) {
	f.Add([]byte(baseCLI))
	f.Add([]byte("---\nid: [\n---\n"))
	f.Add([]byte("---\na: &x [*x]\n---\n"))
	f.Add([]byte("---\ncommands: {a: {b: {c: ./x}}}\noutput: {exit_codes: {0: ok}}\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := fstest.MapFS{cliFile: {Data: data}, toolFile: {Data: []byte(baseTool)}}
		b := LoadBundle(fsys, cliFile, LoadOptions{})
		checkPositions(t, b.Findings)
	})
}

func FuzzParseTool(f *testing.F) {
	f.Add([]byte(baseTool))
	f.Add([]byte("---\ninputs: {type: object, properties: {a: {$ref: 'http://x'}}}\n---\n"))
	f.Add([]byte("---\nrunner: {cli: ../../CLI.md, argv: ['${input.a | optional(\"--a\")}']}\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := fstest.MapFS{cliFile: {Data: []byte(baseCLI)}, toolFile: {Data: data}}
		b := LoadBundle(fsys, cliFile, LoadOptions{})
		checkPositions(t, b.Findings)
	})
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"${input.a}", "--x=${input.b | default('v')}", "${input.c | optional('--c', input.c)}", "$${x}", "${secrets.T}", "${input.d | join(',')}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tok, err := ParseTemplateToken(raw)
		if err != nil {
			return
		}
		for _, e := range tok.Exprs() {
			if e.Source != "input" && e.Source != "secrets" || len(e.Path) == 0 {
				t.Fatalf("%q parsed to a bad expression %+v", raw, e)
			}
			if _, ok := filterArity[e.Filter]; e.Filter != "" && !ok {
				t.Fatalf("%q: unknown filter %q accepted", raw, e.Filter)
			}
		}
	})
}

func checkPositions(t *testing.T, fs Findings) {
	t.Helper()
	for _, f := range fs {
		if f.Pos.File == "" || f.Pos.Line < 0 || f.Rule == "" || f.Message == "" {
			t.Fatalf("malformed finding %+v", f)
		}
	}
}
