package manifest

import (
	"encoding/json"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"testing"

	gschema "github.com/google/jsonschema-go/jsonschema"

	"github.com/clihost/clihost/bundles"
)

// TestRenderRoundTripsCatalog: every CLI.md and TOOL.md of the catalog, loaded into CLI and Tool
// values and rendered with RenderFile, parses back to the same front matter and body.
func TestRenderRoundTripsCatalog(t *testing.T) {
	fsys := bundles.FS()
	clis, err := fs.Glob(fsys, "*/CLI.md")
	if err != nil || len(clis) == 0 {
		t.Fatalf("catalog: %v, %d bundles", err, len(clis))
	}
	for _, cliPath := range clis {
		b := LoadBundle(fsys, cliPath, LoadOptions{})
		if b.CLI == nil {
			t.Fatalf("%s did not load: %v", cliPath, b.Findings)
		}
		sameAfterRender(t, fsys, cliPath, b.CLI, b.Body)
		for _, e := range b.Tools {
			p := path.Join(path.Dir(cliPath), e.Ref)
			doc := parseFile(t, fsys, p)
			sameAfterRender(t, fsys, p, e.Tool, doc.Body)
		}
	}
}

func parseFile(t *testing.T, fsys fs.FS, p string) *Document {
	t.Helper()
	data, err := fs.ReadFile(fsys, p)
	if err != nil {
		t.Fatal(err)
	}
	doc, findings := ParseDocument(p, data)
	if doc.Root == nil {
		t.Fatalf("%s: %v", p, findings)
	}
	return doc
}

func sameAfterRender(t *testing.T, fsys fs.FS, p string, front any, body string) {
	t.Helper()
	want := parseFile(t, fsys, p)
	data, err := RenderFile(front, body)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	got, findings := ParseDocument(p, data)
	if got.Root == nil || len(findings) > 0 {
		t.Fatalf("%s: rendered file does not parse: %v\n%s", p, findings, data)
	}
	if g, w := dropZero(got.Values()), dropZero(want.Values()); !reflect.DeepEqual(g, w) || got.Body != want.Body {
		g, _ := json.Marshal(got.Values())
		w, _ := json.Marshal(want.Values())
		t.Errorf("%s: rendered front matter differs:\n got %s\nwant %s", p, g, w)
	}
}

// TestSchemaValueKeywords: the JSON Schema keywords clihost reads, the x- extensions included,
// survive jsonschema-go's Schema and SchemaValue unchanged (an empty required list, which means
// nothing, is dropped; the schema {}, which jsonschema-go writes as true, is {} again).
func TestSchemaValueKeywords(t *testing.T) {
	in := `{"type":"object","additionalProperties":false,"required":["a"],"description":"d",
		"properties":{
			"a":{"type":"string","pattern":"^x","format":"path","default":"x y","enum":["x y","z"],"x-clihost-allow-dash":true,"minLength":1},
			"n":{"type":"integer","minimum":0,"maximum":65535,"default":3,"description":"count"},
			"l":{"type":"array","items":{"type":"string","format":"path"},"minItems":1,"examples":[["a"]]},
			"m":{"type":"object","additionalProperties":{"type":"integer"},"propertyNames":{"pattern":"^[^=]+$"}},
			"u":{"type":["string","null"],"anyOf":[{"format":"ipv4"},{"format":"ipv6"}],"const":"c","x-other":{"k":[1,2]}},
			"r":{"$ref":"#/$defs/r"},
			"any":{},"anyItems":{"type":"array","items":{}},"anyOf":{"anyOf":[{},{"type":"string"}]}},
		"$defs":{"r":{"type":"boolean"}}}`
	var s gschema.Schema
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	got, err := SchemaValue(&s)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(in))
	dec.UseNumber()
	var want map[string]any
	if err := dec.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Errorf("round trip changed the schema:\n got %s\nwant %s", g, in)
	}
	empty, err := SchemaValue(&gschema.Schema{})
	if err != nil || len(empty) != 0 || empty == nil {
		t.Errorf("the empty schema: %v %v, want {}", empty, err)
	}
}

// dropZero removes the values that say what leaving them out says (false, 0, [], {}), which the
// typed values cannot tell from absent, except in a sandbox, where an empty list is "nothing"
// and an absent one "inherited".
func dropZero(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			if k != "sandbox" {
				x = dropZero(x)
			}
			if len(x) > 0 || k == "sandbox" {
				out[k] = x
			}
		case []any:
			if len(x) > 0 {
				for i, e := range x {
					if em, ok := e.(map[string]any); ok {
						x[i] = dropZero(em)
					}
				}
				out[k] = x
			}
		case bool:
			if x {
				out[k] = x
			}
		case json.Number:
			if x != "0" {
				out[k] = x
			}
		default:
			out[k] = v
		}
	}
	return out
}
