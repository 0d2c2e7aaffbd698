package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/clihost/clihost/bundles"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/schemas"
)

// frontmatters returns the frontmatter values of the catalog's files and of the repository's
// example bundle that are named file (CLI.md, TOOL.md, …), by their path.
func frontmatters(t *testing.T, file string) map[string]any {
	t.Helper()
	out := map[string]any{}
	add := func(fsys fs.FS, prefix string) {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path.Base(p) != file {
				return err
			}
			data, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			doc, problems := manifest.ParseDocument(p, data)
			if doc.Values() == nil || problems.HasErrors() {
				return fmt.Errorf("%s: %v", p, problems)
			}
			out[prefix+p] = doc.Values()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(bundles.FS(), "bundles/")
	add(os.DirFS("../../tests/testdata/unseen/.cli"), "tests/testdata/unseen/.cli/")
	return out
}

// TestSchemaCommandPrintsStandaloneSchemas: each schema `clihostctl schema NAME` prints compiles on
// its own (no $ref leaves the document: an editor has nothing to fetch), keeps its stable $id, and
// accepts every frontmatter of that kind in the catalog and the example bundle.
func TestSchemaCommandPrintsStandaloneSchemas(t *testing.T) {
	for _, p := range schemas.All() {
		t.Run(p.Name, func(t *testing.T) {
			ios, stdout, stderr := testStreams("")
			if code := ctl(ios, nil, "schema", p.Name); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s := compileAlone(t, p.URL, stdout.Bytes())
			docs := frontmatters(t, p.Document)
			if len(docs) == 0 {
				t.Fatalf("no %s to validate", p.Document)
			}
			for name, v := range docs {
				if err := s.Validate(v); err != nil {
					t.Errorf("%s does not validate against the printed %s schema: %v", name, p.Name, err)
				}
			}
		})
	}
}

// compileAlone compiles a schema with every remote load refused.
func compileAlone(t *testing.T, url string, text []byte) *jsonschema.Schema {
	t.Helper()
	if !bytes.Contains(text, []byte(`"$id": "`+url+`"`)) {
		t.Fatalf("the printed schema does not carry its $id %s", url)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("the schema refers outside itself: %s", u)
	}
	if err := c.AddResource(url, bytes.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("the printed schema does not compile on its own: %v", err)
	}
	return s
}

// TestSchemaCommandOutAndList: --out writes every schema under its file name; without a name the
// command lists the names and $ids; an unknown name is a usage error naming the known ones.
func TestSchemaCommandOutAndList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "schemas")
	ios, stdout, stderr := testStreams("")
	if code := ctl(ios, nil, "schema", "--out", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, f := range []string{"CLI", "TOOL", "RUNNER", "INTENT", "SECRETS"} {
		text, err := os.ReadFile(filepath.Join(dir, f+".schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := schemas.Lookup(f)
		compileAlone(t, p.URL, text)
	}
	ios, stdout, _ = testStreams("")
	if code := ctl(ios, nil, "schema"); code != 0 || !strings.Contains(stdout.String(), schemas.ToolSchemaURL) {
		t.Fatalf("exit %d, list %q", code, stdout)
	}
	ios, _, stderr = testStreams("")
	if code := ctl(ios, nil, "schema", "toll"); code != 2 || !strings.Contains(stderr.String(), "cli, tool, runner") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
