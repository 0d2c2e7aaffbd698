package cobramcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// Command annotation keys the bridge reads (cmd.Annotations). Set them directly (values "true" or
// "false"; a value strconv.ParseBool refuses counts as absent, so the client's safe default
// applies) or through SetAnnotations, SetOutputFormat and SetOutputSchema.
const (
	AnnotationTitle        = "cobramcp.title"        // the tool's title
	AnnotationReadOnly     = "cobramcp.readOnly"     // readOnlyHint: the command changes nothing
	AnnotationDestructive  = "cobramcp.destructive"  // destructiveHint (MCP's default: true)
	AnnotationIdempotent   = "cobramcp.idempotent"   // idempotentHint: repeating a call changes nothing more
	AnnotationOpenWorld    = "cobramcp.openWorld"    // openWorldHint: reaches outside entities (default: true)
	AnnotationOutputFormat = "cobramcp.outputFormat" // json, yaml, table or text: how stdout is structured
	AnnotationOutputSchema = "cobramcp.outputSchema" // the JSON of a JSONSchema of the structured output
)

// ToolAnnotations are a tool's MCP hints; a nil hint is left out (the client assumes MCP's
// default).
type ToolAnnotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    *bool  `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool  `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
}

// OutputFormat says how a command's stdout becomes structured content.
type OutputFormat string

// The output formats.
const (
	FormatText  OutputFormat = "text"  // no structured content
	FormatJSON  OutputFormat = "json"  // one JSON value
	FormatYAML  OutputFormat = "yaml"  // YAML; several documents become an array
	FormatTable OutputFormat = "table" // a header line and rows aligned on whitespace: an array of objects
)

// resultKey holds a structured value that is not an object: MCP's structuredContent and
// outputSchema are objects, so an array (a table, a list) is {"result": [...]}.
const resultKey = "result"

// Bool is a pointer to b, for ToolAnnotations.
func Bool(b bool) *bool { return &b }

// SetAnnotations records a's hints in cmd's annotations (a nil hint removes the key).
func SetAnnotations(cmd *cobra.Command, a ToolAnnotations) {
	setAnnotation(cmd, AnnotationTitle, a.Title)
	for key, v := range map[string]*bool{AnnotationReadOnly: a.ReadOnlyHint, AnnotationDestructive: a.DestructiveHint,
		AnnotationIdempotent: a.IdempotentHint, AnnotationOpenWorld: a.OpenWorldHint} {
		s := ""
		if v != nil {
			s = strconv.FormatBool(*v)
		}
		setAnnotation(cmd, key, s)
	}
}

// Annotations are cmd's hints, or nil when it has none.
func Annotations(cmd *cobra.Command) *ToolAnnotations {
	hint := func(key string) *bool {
		b, err := strconv.ParseBool(cmd.Annotations[key])
		if err != nil {
			return nil
		}
		return &b
	}
	a := ToolAnnotations{Title: cmd.Annotations[AnnotationTitle], ReadOnlyHint: hint(AnnotationReadOnly),
		DestructiveHint: hint(AnnotationDestructive), IdempotentHint: hint(AnnotationIdempotent), OpenWorldHint: hint(AnnotationOpenWorld)}
	if a == (ToolAnnotations{}) {
		return nil
	}
	return &a
}

// SetOutputFormat says how cmd's stdout is structured.
func SetOutputFormat(cmd *cobra.Command, f OutputFormat) {
	setAnnotation(cmd, AnnotationOutputFormat, string(f))
}

// SetOutputSchema declares the schema of cmd's structured output (nil removes it). A command with
// an output schema must produce structured content (JSON unless SetOutputFormat, the output flag
// or Options.OutputParser says otherwise) that the schema accepts, or its call is an error. A
// schema whose type is not "object" is served wrapped: {"result": <schema>}.
func SetOutputSchema(cmd *cobra.Command, s *JSONSchema) {
	if s == nil {
		setAnnotation(cmd, AnnotationOutputSchema, "")
		return
	}
	b, _ := json.Marshal(s)
	setAnnotation(cmd, AnnotationOutputSchema, string(b))
}

func setAnnotation(cmd *cobra.Command, key, value string) {
	if value == "" {
		delete(cmd.Annotations, key)
		return
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[key] = value
}

// outputSchema is cmd's declared output schema as served (an object), or nil.
func outputSchema(cmd *cobra.Command) (*JSONSchema, error) {
	raw := cmd.Annotations[AnnotationOutputSchema]
	if raw == "" {
		return nil, nil
	}
	var s JSONSchema
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("%s: annotation %s: %w", cmd.CommandPath(), AnnotationOutputSchema, err)
	}
	if s.Type == "object" {
		return &s, nil
	}
	inner := Property{Type: s.Type, Properties: s.Properties, Required: s.Required, Items: s.Items, AdditionalProperties: s.AdditionalProperties}
	return &JSONSchema{Type: "object", Properties: map[string]Property{resultKey: inner}, Required: []string{resultKey}}, nil
}

// resolvedOutputSchema is cmd's output schema ready to validate with, or nil.
func resolvedOutputSchema(cmd *cobra.Command) (*jsonschema.Resolved, error) {
	s, err := outputSchema(cmd)
	if s == nil || err != nil {
		return nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("%s: output schema: %w", cmd.CommandPath(), err)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("%s: output schema: %w", cmd.CommandPath(), err)
	}
	r, err := js.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: output schema: %w", cmd.CommandPath(), err)
	}
	return r, nil
}

// outputFormat is how cmd's stdout is structured, and whether the command declared it (its
// annotation or an output schema: then output that does not parse is an error): the annotation,
// else the value of its output flag (--output/-o or --format: json, yaml, yml, table, wide; a
// boolean --json), else JSON with an output schema, else "" (a JSON object or array is detected).
func outputFormat(cmd *cobra.Command) (f OutputFormat, declared bool) {
	if a := cmd.Annotations[AnnotationOutputFormat]; a != "" {
		return OutputFormat(strings.ToLower(a)), true
	}
	_, hasSchema := cmd.Annotations[AnnotationOutputSchema]
	for _, name := range []string{"output", "format"} {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || fl.Value.Type() != "string" {
			continue
		}
		switch strings.ToLower(fl.Value.String()) {
		case "json":
			return FormatJSON, hasSchema
		case "yaml", "yml":
			return FormatYAML, hasSchema
		case "table", "wide":
			return FormatTable, hasSchema
		}
	}
	if fl := cmd.Flags().Lookup("json"); fl != nil && fl.Value.Type() == "bool" && fl.Value.String() == "true" {
		return FormatJSON, hasSchema
	}
	if hasSchema {
		return FormatJSON, true
	}
	return "", false
}

// structure is the structured content of a command's stdout (nil for none), as an object.
func (b *bridge) structure(cmd *cobra.Command, out string) (any, error) {
	var v any
	if b.opts.OutputParser != nil {
		p, err := b.opts.OutputParser(out, cmd)
		if err != nil {
			return nil, fmt.Errorf("parse output: %w", err)
		}
		v = p
	} else {
		format, declared := outputFormat(cmd)
		p, err := parseOutput(out, format)
		if err != nil && declared {
			return nil, fmt.Errorf("output is not valid %s: %w", format, err)
		}
		v = p
	}
	if v == nil {
		if _, hasSchema := cmd.Annotations[AnnotationOutputSchema]; hasSchema {
			return nil, errors.New("the command declares an output schema but printed no structured output")
		}
		return nil, nil
	}
	v, err := normalise(v)
	if err != nil {
		return nil, err
	}
	if _, isObject := v.(map[string]any); !isObject {
		v = map[string]any{resultKey: v}
	}
	r, err := resolvedOutputSchema(cmd)
	if err != nil {
		return nil, err
	}
	if r != nil {
		if err := r.Validate(v); err != nil {
			return nil, fmt.Errorf("output does not match the command's output schema: %w", err)
		}
	}
	return v, nil
}

// parseOutput parses out in format; "" detects a JSON object or array and is nil otherwise.
func parseOutput(out string, format OutputFormat) (any, error) {
	switch format {
	case FormatJSON:
		return parseJSON(out)
	case FormatYAML:
		return parseYAML(out)
	case FormatTable:
		return ParseTable(out), nil
	case "":
		if t := strings.TrimSpace(out); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			if v, err := parseJSON(t); err == nil {
				return v, nil
			}
		}
		return nil, nil
	case FormatText:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown output format %q (json, yaml, table or text)", format)
}

// parseJSON is the one JSON value out holds.
func parseJSON(out string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// parseYAML is out's YAML document, or the array of its documents when it has several. The
// decoder refuses documents that expand aliases excessively (billion laughs).
func parseYAML(out string) (any, error) {
	dec := yaml.NewDecoder(strings.NewReader(out))
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, v)
	}
	switch len(docs) {
	case 0:
		return nil, errors.New("no YAML document")
	case 1:
		return docs[0], nil
	}
	return docs, nil
}

// normalise turns v into plain JSON values (maps with string keys, []any, float64, string, bool,
// nil), which is what the schema validator takes: YAML maps may have other keys, and parsers may
// return Go structs.
func normalise(v any) (any, error) {
	v = stringKeys(v)
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("structured output: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("structured output: %w", err)
	}
	return out, nil
}

// stringKeys converts YAML's map[any]any (keys that are not all strings) to map[string]any.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case map[string]any:
		for k, e := range t {
			t[k] = stringKeys(e)
		}
	case []any:
		for i, e := range t {
			t[i] = stringKeys(e)
		}
	}
	return v
}

// result is a successful call's result: stdout as text, and structured content when the output
// has a structure; output that breaks a declared format or schema makes it an error.
func (b *bridge) result(cmd *cobra.Command, stdout, stderr string) *MCPResult {
	res := &MCPResult{Content: []Content{{Type: "text", Text: stdout}}}
	v, err := b.structure(cmd, stdout)
	if err != nil {
		return b.failure(err, stdout, stderr)
	}
	res.StructuredContent = v
	if wrapped, _ := v.(map[string]any); v != nil && b.opts.OutputParser != nil && !isString(wrapped[resultKey]) {
		if js, err := json.Marshal(v); err == nil {
			res.Content = []Content{{Type: "text", Text: string(js)}}
		}
	}
	return res
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}
