package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clihost/clihost/schemas"
)

// IntentRef points at an INTENT.md (AIP-28) the bundle ships.
type IntentRef struct {
	Ref string `yaml:"ref" json:"ref"`
}

// IntentRefs returns the bundle's intent refs and the key they are declared under: intents
// (AIP-29's prose), or actions (its CLI.schema.json) when only that is declared.
func (c *CLI) IntentRefs() ([]IntentRef, string) {
	if len(c.Intents) == 0 && len(c.Actions) > 0 {
		return c.Actions, "/actions"
	}
	return c.Intents, "/intents"
}

// I18n is an AIP-28 i18n string: a plain string (English) or a map keyed by BCP-47 locale.
type I18n map[string]string

// UnmarshalJSON reads a plain string as the "en" text.
func (t *I18n) UnmarshalJSON(data []byte) error {
	var str string
	if json.Unmarshal(data, &str) == nil {
		*t = I18n{"en": str}
		return nil
	}
	m := map[string]string{}
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	*t = m
	return nil
}

// String is the English text, else that of the first locale in order ("" for none).
func (t I18n) String() string {
	if s, ok := t["en"]; ok {
		return s
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		return t[k]
	}
	return ""
}

// Intent is a loaded INTENT.md: the frontmatter fields clihost uses.
type Intent struct {
	File        string         `json:"file"` // as displayed
	ID          string         `json:"id"`
	Version     string         `json:"version"`
	Name        I18n           `json:"name"`
	Label       I18n           `json:"label"`
	Description I18n           `json:"description"`
	Surfaces    []string       `json:"surfaces"`
	Inputs      []IntentInput  `json:"inputs,omitempty"`
	Implements  []IntentRoute  `json:"implements"`
	Examples    []IntentSample `json:"examples,omitempty"`
	Body        string         `json:"-"`
	// Tools are the bundle's tools the routes name, by route index (nil for a route clihost does
	// not run: a workflow or an entry).
	Tools []*ToolEntry `json:"-"`
}

// IntentInput is one UX input of an intent.
type IntentInput struct {
	Name        string         `json:"name"`
	Label       I18n           `json:"label"`
	Type        string         `json:"type"`
	Hint        I18n           `json:"hint,omitempty"`
	Placeholder I18n           `json:"placeholder,omitempty"`
	Required    bool           `json:"required,omitempty"`
	Default     any            `json:"default,omitempty"`
	Values      []IntentValue  `json:"values,omitempty"`
	DependsOn   map[string]any `json:"depends_on,omitempty"`
	// Min and Max bound a number; MinLength, MaxLength (characters) and Pattern (RE2, unanchored
	// unless it anchors itself) bound text-like inputs (AIP-28's field options).
	Min       *float64 `json:"min,omitempty"`
	Max       *float64 `json:"max,omitempty"`
	MinLength *int     `json:"min_length,omitempty"`
	MaxLength *int     `json:"max_length,omitempty"`
	Pattern   string   `json:"pattern,omitempty"`
}

// IntentValue is one value of a choice input: a string, or {value, label}.
type IntentValue struct {
	Value any  `json:"value"`
	Label I18n `json:"label,omitempty"`
}

// UnmarshalJSON reads the short form (a plain string) too.
func (v *IntentValue) UnmarshalJSON(data []byte) error {
	var str string
	if json.Unmarshal(data, &str) == nil {
		v.Value = str
		return nil
	}
	type plain IntentValue
	return decodeJSON(data, (*plain)(v))
}

// IntentRoute is one entry of implements.
type IntentRoute struct {
	Tool     string         `json:"tool,omitempty"`
	Workflow string         `json:"workflow,omitempty"`
	Entry    string         `json:"entry,omitempty"`
	Default  bool           `json:"default,omitempty"`
	When     map[string]any `json:"when,omitempty"`
	Mapping  map[string]any `json:"mapping,omitempty"`
}

// IntentSample is one example of an intent.
type IntentSample struct {
	User I18n `json:"user"`
	Note I18n `json:"note,omitempty"`
}

// loadIntents loads and lints the INTENT.md of every intents (or actions) ref. A ref that leaves
// the bundle, or whose file is missing or not a regular file, is an error at the ref; findings
// inside an INTENT.md point into it (file:line:col). Intents without errors go to Bundle.Intents.
func (l *linter) loadIntents() {
	refs, key := l.cli.IntentRefs()
	bundleDir := path.Dir(l.b.fsPath)
	ids := map[string]string{}
	for i, r := range refs {
		ptr := JoinPointer(key, i, "ref")
		full := path.Join(bundleDir, r.Ref)
		switch {
		case r.Ref == "":
			continue // the schema reports it
		case strings.Contains(r.Ref, "://"):
			l.refs.at(ptr, SeverityWarning, "intents-ref-remote", fmt.Sprintf("intent %q is not a file of the bundle; clihost does not fetch intents", r.Ref), "ship the INTENT.md in the bundle, e.g. ./intents/open-pr/INTENT.md")
			continue
		case path.IsAbs(r.Ref) || !within(bundleDir, full):
			l.refs.at(ptr, SeverityError, "intents-ref-escapes", fmt.Sprintf("intent ref %q is outside the bundle folder", r.Ref), "INTENT.md files live inside the bundle, e.g. ./intents/open-pr/INTENT.md")
			continue
		}
		if !l.outside(l.refs, ptr, "INTENT.md", r.Ref) {
			continue // never read: its text would end up in findings and logs
		}
		data, err := readManifest(l.b.fsys, full)
		if err != nil {
			l.refs.at(ptr, SeverityError, "intents-ref-missing", fmt.Sprintf("intent ref %q cannot be read: %v", r.Ref, unwrapPathError(err)), "create the INTENT.md or fix the path (relative to the bundle folder)")
			continue
		}
		it, c := l.loadIntent(l.opts.display(full), data)
		if it != nil && it.ID != "" {
			if other, dup := ids[it.ID]; dup {
				c.at("/id", SeverityError, "intent-id-duplicate", fmt.Sprintf("intent id %q is also used by %s", it.ID, other), "give every intent of a bundle its own id")
			} else {
				ids[it.ID] = it.File
			}
		}
		fs := c.findings()
		l.b.Findings = append(l.b.Findings, fs...)
		if it != nil && !fs.HasErrors() {
			l.b.Intents = append(l.b.Intents, it)
		}
	}
}

// loadIntent parses, validates and lints one INTENT.md.
func (l *linter) loadIntent(file string, data []byte) (*Intent, *collector) {
	doc, problems := loadDocument(file, data)
	c := newCollector(doc)
	c.semantic = problems
	if doc.Root == nil {
		return nil, c
	}
	schema, err := schemas.Intent()
	if err != nil {
		panic(err) // the embedded schema is part of the binary; tests guarantee it compiles
	}
	c.schema(schema)
	// Decoded from the frontmatter's JSON-compatible values (numbers as json.Number), never from
	// YAML's own types (timestamps, maps with other keys), so that every value an intent hands on
	// is one JSON Schema validation takes.
	it := &Intent{}
	if raw, err := json.Marshal(doc.Values()); err == nil {
		_ = decodeJSON(raw, it) // type mismatches are the schema's findings
	}
	it.File, it.Body = file, doc.Body
	l.intentRules(c, it)
	return it, c
}

// intentRules: inputs named once; when and depends_on name declared inputs; one default route
// among several; every tool route names a tool of this bundle; workflow and entry routes and
// mapping transforms, which clihost does not run, are warned about.
func (l *linter) intentRules(c *collector, it *Intent) {
	inputs := map[string]bool{}
	for i, in := range it.Inputs {
		if inputs[in.Name] {
			c.at(JoinPointer("/inputs", i, "name"), SeverityError, "intent-input-duplicate", fmt.Sprintf("input %q is declared twice", in.Name), "give every input its own name")
		}
		inputs[in.Name] = true
		if in.Pattern != "" {
			if _, err := regexp.Compile(in.Pattern); err != nil {
				c.at(JoinPointer("/inputs", i, "pattern"), SeverityError, "intent-input-pattern", fmt.Sprintf("input %q: pattern %q does not compile: %v", in.Name, in.Pattern, err),
					"write an RE2 regular expression (no lookaround or backreferences), e.g. ^[a-z0-9-]+$")
			}
		}
	}
	names := func(ptr string, m map[string]any) {
		for k := range m {
			if !inputs[k] {
				c.at(JoinPointer(ptr, k), SeverityWarning, "intent-predicate-input", fmt.Sprintf("%q is not an input of the intent", k), "name one of the intent's inputs")
			}
		}
	}
	for i, in := range it.Inputs {
		names(JoinPointer("/inputs", i, "depends_on"), in.DependsOn)
	}
	defaults := 0
	it.Tools = make([]*ToolEntry, len(it.Implements))
	for i, r := range it.Implements {
		ptr := JoinPointer("/implements", i)
		if r.Default {
			defaults++
		}
		names(JoinPointer(ptr, "when"), r.When)
		for k, v := range r.Mapping {
			if m, ok := v.(map[string]any); ok && m["transform"] != nil {
				c.at(JoinPointer(ptr, "mapping", k), SeverityWarning, "intent-transform", "mapping transforms are functions of an entry file, which clihost does not run; the value is passed unchanged", "map the input by name only")
			}
		}
		switch {
		case r.Tool != "":
			if it.Tools[i] = l.intentTool(r.Tool); it.Tools[i] == nil {
				c.at(JoinPointer(ptr, "tool"), SeverityError, "intent-tool-unknown", fmt.Sprintf("tool %q is not a tool of this bundle", r.Tool), "name a TOOL.md of the bundle's commands (./tools/pr-create/TOOL.md), a tool id or a command path")
			} else {
				mappingTargets(c, ptr, r.Mapping, it.Tools[i])
			}
		case r.Workflow != "" || r.Entry != "":
			c.at(ptr, SeverityWarning, "intent-route-unsupported", "clihost runs tools only: this route (a workflow or an entry) is never chosen", "route to a tool of the bundle")
		}
	}
	if len(it.Implements) > 1 && defaults != 1 {
		c.atKey("/implements", SeverityError, "intent-default", fmt.Sprintf("%d of the %d implements entries are marked default; AIP-28 asks for exactly one", defaults, len(it.Implements)), "mark the fallback route default: true")
	}
}

// mappingTargets reports a mapping onto an input the routed tool's closed inputs do not declare:
// every prompts/get taking the route with that input set would build an input the tool refuses.
func mappingTargets(c *collector, ptr string, mapping map[string]any, t *ToolEntry) {
	for k, spec := range mapping {
		target := k
		if s, ok := spec.(string); ok {
			target = s
		}
		if !t.acceptsInput(target) {
			c.at(JoinPointer(ptr, "mapping", k), SeverityError, "intent-mapping-unknown", fmt.Sprintf("the mapping hands the tool an input %q its inputs do not declare (additionalProperties: false): the route would always be refused", target),
				"map onto one of the tool's inputs: clihostctl inspect BUNDLE lists them")
		}
	}
}

// intentTool finds the tool a route names: a TOOL.md path relative to the bundle folder, a tool
// id, or a command path ("pr create", "pr.create", "pr_create").
func (l *linter) intentTool(ref string) *ToolEntry {
	clean := path.Clean(ref)
	for _, t := range l.b.Tools {
		if t.Tool != nil && path.Clean(t.Ref) == clean {
			return t
		}
	}
	if t := l.b.Tool(ref); t != nil && t.Tool != nil {
		return t
	}
	return nil
}

// Resolve turns prompt arguments (strings, by input name) into the input of the tool the intent
// routes to: each value converted to its input type (number, toggle, multi-choice as a comma list,
// choice checked against values), defaults applied, inputs hidden by depends_on dropped; then the
// first route whose when matches (else the default) is chosen and its mapping renames the
// inputs. It returns the tool and its input, or why the arguments do not fit.
func (it *Intent) Resolve(args map[string]string) (*ToolEntry, map[string]any, error) {
	in := map[string]any{}
	for _, f := range it.Inputs {
		raw, ok := args[f.Name]
		if !ok || raw == "" {
			if f.Default != nil {
				in[f.Name] = f.Default
			}
			continue
		}
		v, err := f.convert(raw)
		if err == nil {
			err = f.bounds(v)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("argument %s: %w", f.Name, err)
		}
		in[f.Name] = v
	}
	for k := range args {
		if !slices.ContainsFunc(it.Inputs, func(f IntentInput) bool { return f.Name == k }) {
			return nil, nil, fmt.Errorf("argument %s: the intent has no such input", k)
		}
	}
	for _, f := range it.Inputs {
		if len(f.DependsOn) > 0 && !matches(f.DependsOn, in) {
			delete(in, f.Name) // hidden fields are not submitted (AIP-28)
		} else if _, set := in[f.Name]; f.Required && !set {
			return nil, nil, fmt.Errorf("argument %s is required", f.Name)
		}
	}
	i := it.route(in)
	if i < 0 {
		return nil, nil, fmt.Errorf("no route of intent %s matches these arguments", it.ID)
	}
	t := it.Tools[i]
	return t, mapInputs(it.Implements[i].Mapping, in, t.acceptsInput), nil
}

// acceptsInput reports whether the tool's inputs take a property of this name: any name, unless
// they are closed (additionalProperties: false, no patternProperties) and do not declare it.
func (t *ToolEntry) acceptsInput(name string) bool {
	if t.Tool == nil {
		return true
	}
	in := t.Tool.Inputs
	if in["additionalProperties"] != false || in["patternProperties"] != nil {
		return true
	}
	props, _ := in["properties"].(map[string]any)
	_, ok := props[name]
	return ok
}

// route is the index of the first tool route whose when matches, else of the default (or only)
// tool route, or -1.
func (it *Intent) route(in map[string]any) int {
	fallback := -1
	for i, r := range it.Implements {
		if it.Tools[i] == nil {
			continue
		}
		if len(r.When) > 0 && matches(r.When, in) {
			return i
		}
		if r.Default || len(it.Implements) == 1 {
			fallback = i
		}
	}
	return fallback
}

// convert reads a prompt argument as the input's type.
func (f IntentInput) convert(raw string) (any, error) {
	switch f.Type {
	case "number":
		n, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", raw)
		}
		return n, nil
	case "toggle":
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", raw)
		}
		return b, nil
	case "choice":
		return f.choose(raw)
	case "multi-choice":
		var out []any
		for _, p := range strings.Split(raw, ",") {
			v, err := f.choose(strings.TrimSpace(p))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return raw, nil
}

// bounds checks a converted argument against the input's min/max (numbers) and min_length,
// max_length and pattern (strings).
func (f IntentInput) bounds(v any) error {
	switch x := v.(type) {
	case float64:
		if f.Min != nil && x < *f.Min {
			return fmt.Errorf("%v is less than its min %v", x, *f.Min)
		}
		if f.Max != nil && x > *f.Max {
			return fmt.Errorf("%v is more than its max %v", x, *f.Max)
		}
	case string:
		n := utf8.RuneCountInString(x)
		if f.MinLength != nil && n < *f.MinLength {
			return fmt.Errorf("%d characters, fewer than its min_length %d", n, *f.MinLength)
		}
		if f.MaxLength != nil && n > *f.MaxLength {
			return fmt.Errorf("%d characters, more than its max_length %d", n, *f.MaxLength)
		}
		if f.Pattern != "" {
			if re, err := regexp.Compile(f.Pattern); err != nil || !re.MatchString(x) {
				return fmt.Errorf("%q does not match its pattern %s", x, f.Pattern)
			}
		}
	}
	return nil
}

// choose finds raw among the input's values (any value when it lists none).
func (f IntentInput) choose(raw string) (any, error) {
	if len(f.Values) == 0 {
		return raw, nil
	}
	var names []string
	for _, v := range f.Values {
		if s := fmt.Sprint(v.Value); s == raw {
			return v.Value, nil
		}
		names = append(names, fmt.Sprint(v.Value))
	}
	return nil, fmt.Errorf("%q is not one of %s", raw, strings.Join(names, ", "))
}

// matches evaluates an AIP-28 predicate (when, depends_on): every key's shape holds (AND).
func matches(pred map[string]any, in map[string]any) bool {
	for k, want := range pred {
		v, set := in[k]
		m, isOp := want.(map[string]any)
		if !isOp {
			if !set || fmt.Sprint(v) != fmt.Sprint(want) {
				return false
			}
			continue
		}
		for op, arg := range m {
			if !holds(op, arg, v, set) {
				return false
			}
		}
	}
	return true
}

// holds evaluates one comparison of a predicate on the value v (set: present).
func holds(op string, arg, v any, set bool) bool {
	in := func() bool {
		list, _ := arg.([]any)
		return set && slices.ContainsFunc(list, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) })
	}
	switch op {
	case "not":
		return !set || fmt.Sprint(v) != fmt.Sprint(arg)
	case "in":
		return in()
	case "not_in":
		return !in()
	case "not_empty":
		empty := !set || fmt.Sprint(v) == ""
		return empty != (arg == true)
	}
	a, aok := numeric(arg)
	n, nok := numeric(v)
	if !aok || !nok || !set {
		return false
	}
	switch op {
	case "gt":
		return n > a
	case "lt":
		return n < a
	case "gte":
		return n >= a
	case "lte":
		return n <= a
	}
	return false
}

// numeric reads a number (json.Number from the manifest, float64 from an argument).
func numeric(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// decodeJSON decodes data into out keeping numbers as json.Number.
func decodeJSON(data []byte, out any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(out)
}

// mapInputs applies a route's mapping: an input named in it goes to the tool input it names
// (`input: tool_key`, or `tool_key: {from: input}`); the others keep their names.
func mapInputs(mapping map[string]any, in map[string]any, accepts func(string) bool) map[string]any {
	out := map[string]any{}
	mapped := map[string]bool{}
	for toolKey, spec := range mapping {
		from := ""
		switch s := spec.(type) {
		case string:
			from, toolKey = toolKey, s // intent input → tool input key
		case map[string]any:
			from, _ = s["from"].(string)
		}
		if v, ok := in[from]; ok {
			out[toolKey] = v
			mapped[from] = true
		}
	}
	for k, v := range in {
		// A mapping's target wins over a same-named input; an input the tool does not take (one
		// only when reads, say) is not handed on by name.
		if _, taken := out[k]; !mapped[k] && !taken && accepts(k) {
			out[k] = v
		}
	}
	return out
}
