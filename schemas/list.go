package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Published is one of the embedded schemas as clihost publishes it: the short name
// `clihostctl schema NAME` takes, the document it describes, its stable $id and its text.
type Published struct {
	Name     string // cli, tool, runner, intent, secrets
	Document string // CLI.md, TOOL.md, RUNNER.md, INTENT.md, SECRETS.md
	URL      string // the schema's $id
	JSON     []byte
}

// All returns every embedded schema, in the order `clihostctl schema` lists them.
func All() []Published {
	return []Published{
		{"cli", "CLI.md", CLISchemaURL, CLISchemaJSON},
		{"tool", "TOOL.md", ToolSchemaURL, ToolSchemaJSON},
		{"runner", "RUNNER.md", RunnerSchemaURL, RunnerSchemaJSON},
		{"intent", "INTENT.md", IntentSchemaURL, IntentSchemaJSON},
		{"secrets", "SECRETS.md", SecretsSchemaURL, SecretsSchemaJSON},
	}
}

// Lookup returns the schema named name (case-insensitive; "CLI.md" works too).
func Lookup(name string) (Published, error) {
	n := strings.TrimSuffix(strings.ToLower(name), ".md")
	for _, p := range All() {
		if p.Name == n {
			return p, nil
		}
	}
	return Published{}, fmt.Errorf("no schema %q: use one of cli, tool, runner, intent, secrets", name)
}

var (
	decodedOnce sync.Once
	decoded     map[string]any
)

// PropertiesAt returns, sorted, the property names the schema object at the absolute keyword
// location loc ("URL#/json/pointer") declares, or nil when loc is not in an embedded schema.
// Lint uses it to suggest the field an unknown key was probably meant to be.
func PropertiesAt(loc string) []string {
	decodedOnce.Do(func() {
		decoded = map[string]any{}
		for _, p := range All() {
			var v any
			if json.Unmarshal(p.JSON, &v) == nil {
				decoded[p.URL] = v
			}
		}
	})
	url, ptr, _ := strings.Cut(loc, "#")
	v := decoded[url]
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			var i int
			if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	m, _ := v.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Standalone returns the schema as one self-contained document: an editor reading it from a file
// or a URL finds every $ref inside it. CLI.schema.json refers to RUNNER.schema.json by its $id;
// here that schema is copied into $defs (as clihostRunner) and the references point there.
func (p Published) Standalone() ([]byte, error) {
	if !bytes.Contains(p.JSON, []byte(`"$ref": "`+RunnerSchemaURL+`"`)) {
		return p.JSON, nil
	}
	var doc, runner map[string]any
	if err := json.Unmarshal(p.JSON, &doc); err != nil {
		return nil, fmt.Errorf("decode %s schema: %w", p.Name, err)
	}
	if err := json.Unmarshal(RunnerSchemaJSON, &runner); err != nil {
		return nil, fmt.Errorf("decode runner schema: %w", err)
	}
	delete(runner, "$schema")
	delete(runner, "$id")
	const local = "#/$defs/clihostRunner"
	var rewrite func(v any)
	rewrite = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if x["$ref"] == RunnerSchemaURL {
				x["$ref"] = local
			}
			for _, c := range x {
				rewrite(c)
			}
		case []any:
			for _, c := range x {
				rewrite(c)
			}
		}
	}
	rewrite(doc)
	defs, _ := doc["$defs"].(map[string]any)
	if defs == nil {
		defs = map[string]any{}
		doc["$defs"] = defs
	}
	defs["clihostRunner"] = runner
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s schema: %w", p.Name, err)
	}
	return append(out, '\n'), nil
}
