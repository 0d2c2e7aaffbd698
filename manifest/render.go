package manifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	gschema "github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

// RenderFile renders a CLI.md or TOOL.md: front (a *CLI, a *Tool, or any value the YAML encoder
// takes) as YAML front matter indented by 2, between "---" lines, then body. A CLI and a Tool are
// written in the order of their struct's fields; a Tool's JSON Schemas (inputs, outputs) follow its
// version, each schema's keywords in schemaKeyOrder (properties by name).
func RenderFile(front any, body string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("---\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(front); err != nil {
		return nil, fmt.Errorf("render front matter: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render front matter: %w", err)
	}
	buf.WriteString("---\n")
	buf.WriteString(body)
	return buf.Bytes(), nil
}

// SchemaValue returns a JSON Schema as the JSON-compatible value a loaded manifest holds in
// Tool.Inputs and Tool.Outputs (numbers as json.Number). The schema that accepts everything,
// which jsonschema-go writes as true, is written {} as in the manifest it came from, at the top
// (the manifest format asks for an object) and wherever a subschema stands.
func SchemaValue(s *gschema.Schema) (map[string]any, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode JSON Schema: %w", err)
	}
	if string(data) == "true" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("JSON Schema %s is not an object: %w", data, err)
	}
	trueAsEmpty(out)
	return out, nil
}

// The keywords whose value is a subschema, a list of them, or a map of names to them.
var (
	subschemaKeys     = []string{"items", "additionalProperties", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	subschemaListKeys = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	subschemaMapKeys  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)

// schemaKeyOrder is the order a rendered schema's keywords take: what it is, what it says, what
// values it takes, then its parts; keywords not listed follow in name order, x- extensions last.
var schemaKeyOrder = []string{"$schema", "$id", "$ref", "title", "type", "description", "format", "pattern",
	"enum", "const", "default", "examples", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
	"minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "items", "prefixItems", "properties",
	"patternProperties", "additionalProperties", "propertyNames", "required"}

// orderSchema puts the keywords of the schema node n, and of its subschemas, in schemaKeyOrder.
func orderSchema(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	rank := func(k string) int {
		if i := slices.Index(schemaKeyOrder, k); i >= 0 {
			return i
		}
		if strings.HasPrefix(k, "x-") {
			return len(schemaKeyOrder) + 1
		}
		return len(schemaKeyOrder)
	}
	pairs := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		pairs = append(pairs, [2]*yaml.Node{n.Content[i], n.Content[i+1]})
	}
	slices.SortStableFunc(pairs, func(a, b [2]*yaml.Node) int { return cmp.Compare(rank(a[0].Value), rank(b[0].Value)) })
	n.Content = n.Content[:0]
	for _, p := range pairs {
		n.Content = append(n.Content, p[0], p[1])
		k, v := p[0].Value, p[1]
		switch {
		case slices.Contains(subschemaKeys, k):
			orderSchema(v)
		case slices.Contains(subschemaListKeys, k) && v.Kind == yaml.SequenceNode:
			for _, c := range v.Content {
				orderSchema(c)
			}
		case slices.Contains(subschemaMapKeys, k) && v.Kind == yaml.MappingNode:
			for i := 1; i < len(v.Content); i += 2 {
				orderSchema(v.Content[i])
			}
		}
	}
}

// trueAsEmpty writes the subschemas of s that jsonschema-go wrote as true as {}, which the
// readers of a loaded manifest (lint, ACLI, the host) take as a schema.
func trueAsEmpty(s map[string]any) {
	fix := func(v any) any {
		if b, ok := v.(bool); ok && b {
			return map[string]any{}
		}
		if m, ok := v.(map[string]any); ok {
			trueAsEmpty(m)
		}
		return v
	}
	for _, k := range subschemaKeys {
		if v, ok := s[k]; ok {
			s[k] = fix(v)
		}
	}
	for _, k := range subschemaListKeys {
		list, _ := s[k].([]any)
		for i, v := range list {
			list[i] = fix(v)
		}
	}
	for _, k := range subschemaMapKeys {
		m, _ := s[k].(map[string]any)
		for name, v := range m {
			m[name] = fix(v)
		}
	}
}

// MarshalYAML renders a TOOL.md's front matter: the fields the YAML tags name, in the struct's
// order, plus the values the loader reads from the JSON view (inputs and outputs after version,
// each example's input and output).
func (t Tool) MarshalYAML() (any, error) {
	type plain Tool // the struct without this method
	var n yaml.Node
	if err := n.Encode(plain(t)); err != nil {
		return nil, err
	}
	var schemas []*yaml.Node
	for _, s := range []struct {
		key   string
		value map[string]any
	}{{"inputs", t.Inputs}, {"outputs", t.Outputs}} {
		if s.value == nil {
			continue
		}
		v, err := jsonNode(s.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.key, err)
		}
		orderSchema(v)
		schemas = append(schemas, scalarNode(s.key), v)
	}
	at := len(n.Content)
	if i := keyIndex(&n, "version"); i >= 0 {
		at = i + 2
	}
	n.Content = append(n.Content[:at], append(schemas, n.Content[at:]...)...)
	if i := keyIndex(&n, "examples"); i >= 0 {
		ex, err := examplesNode(t.Examples)
		if err != nil {
			return nil, err
		}
		n.Content[i+1] = ex
	}
	return &n, nil
}

// examplesNode renders examples with their input and output, which the struct's tags leave out.
func examplesNode(examples []ToolExample) (*yaml.Node, error) {
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, e := range examples {
		m := &yaml.Node{Kind: yaml.MappingNode}
		m.Content = append(m.Content, scalarNode("name"), scalarNode(e.Name))
		for _, kv := range []struct {
			key   string
			value any
		}{{"input", e.Input}, {"output", e.Output}} {
			if kv.value == nil {
				continue
			}
			v, err := jsonNode(kv.value)
			if err != nil {
				return nil, fmt.Errorf("example %s %s: %w", e.Name, kv.key, err)
			}
			m.Content = append(m.Content, scalarNode(kv.key), v)
		}
		if e.Note != "" {
			m.Content = append(m.Content, scalarNode("note"), scalarNode(e.Note))
		}
		list.Content = append(list.Content, m)
	}
	return list, nil
}

// MarshalYAML renders the commands tree as nested mappings, in the tree's order.
func (t CommandTree) MarshalYAML() (any, error) {
	return commandsNode(t), nil
}

func commandsNode(cs []*Command) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, c := range cs {
		v := scalarNode(c.Ref)
		if c.Children != nil {
			v = commandsNode(c.Children)
		}
		n.Content = append(n.Content, scalarNode(c.Name), v)
	}
	return n
}

// MarshalYAML renders a runner reference as its path, or the inline block.
func (r RunnerRef) MarshalYAML() (any, error) {
	if r.Ref != "" {
		return r.Ref, nil
	}
	if r.Registry != "" {
		return map[string]string{"ref": r.Registry}, nil
	}
	return r.Inline, nil
}

// MarshalYAML renders a select prompt's choices as the list, or as {cmd, timeout_ms}.
func (o PromptOptions) MarshalYAML() (any, error) {
	if o.Static != nil {
		return o.Static, nil
	}
	return struct {
		Cmd       string `yaml:"cmd"`
		TimeoutMS int    `yaml:"timeout_ms,omitempty"`
	}{o.Cmd, o.TimeoutMS}, nil
}

// jsonNode renders a JSON-compatible value (json.Number included) as a block-style YAML node:
// the JSON text is YAML already, so parsing it keeps every number and string exactly.
func jsonNode(v any) (*yaml.Node, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	n := doc.Content[0]
	blockStyle(n)
	return n, nil
}

// blockStyle replaces the flow and quoting styles the JSON text gave n with the ones the encoder
// gives the same Go values (a string such as "yes", a YAML 1.1 boolean, stays quoted).
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		var s yaml.Node
		if s.Encode(n.Value) == nil {
			n.Style = s.Style
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func scalarNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// keyIndex returns the index of key among a mapping node's keys, or -1.
func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// field is one key of a mapping rendered in a given order; set says whether to write it, since in
// a sandbox an undeclared list (inherited in a TOOL.md) and an empty one (nothing) differ.
type field struct {
	key   string
	value any
	set   bool
}

func fieldsNode(fields ...field) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range fields {
		if !f.set {
			continue
		}
		var v yaml.Node
		if err := v.Encode(f.value); err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
		n.Content = append(n.Content, scalarNode(f.key), &v)
	}
	return n, nil
}

// MarshalYAML writes the lists that are declared, empty ones included.
func (n Network) MarshalYAML() (any, error) {
	return fieldsNode(field{"egress", n.Egress, n.Egress != nil}, field{"ingress", n.Ingress, n.Ingress != nil})
}

// MarshalYAML writes the lists that are declared, empty ones included.
func (f FS) MarshalYAML() (any, error) {
	return fieldsNode(field{"read", f.Read, f.Read != nil}, field{"write", f.Write, f.Write != nil}, field{"deny", f.Deny, f.Deny != nil})
}

// MarshalYAML writes allow when it is declared and the spawn list when it is, empty included.
func (e Exec) MarshalYAML() (any, error) {
	return fieldsNode(field{"allow", e.Allow, e.Allow != nil}, field{"spawn", e.Spawn, e.Spawn != nil})
}

// MarshalYAML writes pass and set when they are declared, empty ones included.
func (e Env) MarshalYAML() (any, error) {
	return fieldsNode(field{"pass", e.Pass, e.Pass != nil}, field{"set", e.Set, e.Set != nil})
}
