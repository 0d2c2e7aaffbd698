// Package argv expands a TOOL.md argv template (parsed by manifest) with a call's validated input into
// the argument list of one process. No shell is ever involved: every entry becomes exactly the
// arguments the template says, whatever characters the values hold.
//
// Expansion rules (DESIGN.md):
//   - a literal entry is itself;
//   - a whole-entry ${input.x} is the value, nothing when absent, one argument per item for an array
//     and one "key=value" argument per entry for an object (sorted by key: map flags, --label k=v);
//   - default('v') gives v when absent; optional('--f') gives --f VALUE (an array repeats the pair),
//     or --f=VALUE as one argument when the flag ends with '='; flag('--f') gives --f when the value
//     is true; json() gives the value encoded as JSON; join(',') joins an array (or an object's
//     key=value entries) into one argument;
//   - ${secrets.NAME} is the secret's value;
//   - ${steps.N.output} (in runner.steps only) is step N's output, always exactly one argument
//     (possibly empty), never split into words;
//   - an entry mixing text and expressions (--since=${input.d}) substitutes each; when one of its
//     inputs is absent (and has no default) the whole entry is dropped.
//
// Safety: a value the caller supplied that starts with '-' in a positional slot (not right after a
// literal option, not after a literal "--") is refused, since the CLI would read it as an option;
// NUL bytes are refused; each argument is at most MaxArgLength bytes and all together MaxTotalLength.
package argv

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/clihost/clihost/manifest"
)

// Limits on expanded argv (Linux allows 128 KiB an argument and about 2 MiB in all, environment
// included).
const (
	MaxArgLength   = 128 << 10
	MaxTotalLength = 1 << 20
)

// Error is an expansion refused because of the input. Code is "input_invalid", or "secret_missing"
// when a ${secrets.NAME} has no value.
type Error struct {
	Code    string
	Message string
	Hint    string
	Pointer string // JSON pointer of the offending input, e.g. /title
}

func (e *Error) Error() string { return e.Message }

// Secrets looks up a secret by name.
type Secrets func(name string) (string, bool)

// Values are what templates are expanded with.
type Values struct {
	Input   map[string]any // the call's input, validated, defaults applied
	Secrets Secrets        // nil: no secrets
	Steps   []string       // the outputs of the steps run so far, by index (runner.steps)
}

// Expand turns the parsed template into arguments using input (already validated, defaults applied).
func Expand(tmpl []manifest.TemplateToken, input map[string]any, secrets Secrets) ([]string, error) {
	return ExpandValues(tmpl, Values{Input: input, Secrets: secrets})
}

// MaxTextLength bounds what ExpandString may produce (a process's stdin).
const MaxTextLength = 16 << 20

// ExpandString expands a template that yields one string rather than argv entries: a stdin, a
// step's dir or an env value. Each expression gives its value as inside an argv entry with text
// around it (strings as they are, arrays joined by ',' unless join() says otherwise, json() as
// JSON). present is false when an input the template uses is absent and has no default, the way
// such an argv entry is dropped.
func ExpandString(tok manifest.TemplateToken, v Values) (s string, present bool, err error) {
	var b strings.Builder
	for _, p := range tok.Parts {
		if p.Expr == nil {
			b.WriteString(p.Literal)
			continue
		}
		e := p.Expr
		switch e.Source {
		case "secrets":
			x := expander{secrets: v.Secrets}
			val, ok := x.lookupSecret(e)
			if !ok {
				return "", false, x.secretMissing(e)
			}
			b.WriteString(val)
			continue
		case "steps":
			out, err := stepOutput(e, v.Steps)
			if err != nil {
				return "", false, err
			}
			b.WriteString(out)
			continue
		}
		val, ok := lookup(v.Input, e.Path)
		var text string
		switch {
		case !ok && e.Filter == manifest.FilterDefault:
			text = e.Args[0]
		case !ok:
			return "", false, nil
		case e.Filter == manifest.FilterJSON:
			var raw []byte
			raw, err = json.Marshal(val)
			text = string(raw)
		case e.Filter == manifest.FilterJoin:
			text, err = joined(val, e.Args[0])
		default:
			text, err = joined(val, ",")
		}
		if err != nil {
			return "", false, &Error{Code: "input_invalid", Pointer: pointer(e), Message: err.Error()}
		}
		b.WriteString(text)
		if b.Len() > MaxTextLength {
			return "", false, &Error{Code: "input_invalid", Pointer: pointer(e), Message: fmt.Sprintf("the expanded text is more than %d bytes", MaxTextLength), Hint: "pass less data per call"}
		}
	}
	return b.String(), true, nil
}

// stepOutput returns the output of the step a ${steps.N.output} names.
func stepOutput(e *manifest.TemplateExpr, steps []string) (string, error) {
	n, err := e.Step()
	if err != nil || n >= len(steps) {
		return "", fmt.Errorf("argv: ${%s.%s} names a step that has not run (lint should have refused it)", e.Source, e.Name())
	}
	return steps[n], nil
}

// ExpandValues is Expand with step outputs: the argv of one step of runner.steps.
func ExpandValues(tmpl []manifest.TemplateToken, v Values) ([]string, error) {
	x := expander{input: v.Input, secrets: v.Secrets, steps: v.Steps}
	for i, tok := range tmpl {
		if err := x.token(tmpl, i, tok); err != nil {
			return nil, err
		}
	}
	total := 0
	for _, a := range x.out {
		total += len(a) + 1
	}
	if total > MaxTotalLength {
		return nil, &Error{Code: "input_invalid", Message: fmt.Sprintf("the arguments add up to %d bytes, more than %d", total, MaxTotalLength), Hint: "pass less data per call, or a file in the workspace"}
	}
	return x.out, nil
}

type expander struct {
	input      map[string]any
	secrets    Secrets
	steps      []string
	out        []string
	afterDashs bool // a literal "--" has been emitted: everything after is positional by the CLI's reading
}

func (x *expander) token(tmpl []manifest.TemplateToken, i int, tok manifest.TemplateToken) error {
	if lit, ok := tok.Literal(); ok {
		if lit == "--" {
			x.afterDashs = true
		}
		return x.emit(lit, "", false)
	}
	if e := tok.Whole(); e != nil {
		return x.whole(e, x.positional(tmpl, i))
	}
	return x.mixed(tok, x.positional(tmpl, i))
}

// positional reports whether a whole-entry value at index i lands where the CLI expects a positional
// argument: not after "--" and not right after a literal option.
func (x *expander) positional(tmpl []manifest.TemplateToken, i int) bool {
	if x.afterDashs {
		return false
	}
	if i > 0 {
		if prev, ok := tmpl[i-1].Literal(); ok && strings.HasPrefix(prev, "-") && prev != "-" {
			return false
		}
	}
	return true
}

// emit appends one argument. checkDash marks a caller-supplied value in a positional slot.
func (x *expander) emit(a, ptr string, checkDash bool) error {
	if strings.IndexByte(a, 0) >= 0 {
		return &Error{Code: "input_invalid", Pointer: ptr, Message: fmt.Sprintf("input %s holds a NUL byte", name(ptr)), Hint: "remove the NUL character"}
	}
	if len(a) > MaxArgLength {
		return &Error{Code: "input_invalid", Pointer: ptr, Message: fmt.Sprintf("input %s is %d bytes, more than the %d an argument may hold", name(ptr), len(a), MaxArgLength), Hint: "pass a file in the workspace instead"}
	}
	if checkDash && strings.HasPrefix(a, "-") {
		return &Error{Code: "input_invalid", Pointer: ptr,
			Message: fmt.Sprintf("input %s starts with '-' (%q) where the CLI expects a positional argument, so it would be read as an option", name(ptr), short(a)),
			Hint:    "pass a value that does not start with '-'; the bundle can put a literal \"--\" before this argument to allow it"}
	}
	x.out = append(x.out, a)
	return nil
}

// emitStep appends a step's output as one argument. Like a caller's value, an output starting
// with '-' is refused in a positional slot: it may carry what the caller sent.
func (x *expander) emitStep(out string, e *manifest.TemplateExpr, positional bool) error {
	if positional && strings.HasPrefix(out, "-") {
		return &Error{Code: "input_invalid",
			Message: fmt.Sprintf("the output of step %s starts with '-' (%q) where the CLI expects a positional argument, so it would be read as an option", e.Path[0], short(out)),
			Hint:    "the bundle can put a literal \"--\" before this argument to allow it"}
	}
	return x.emit(out, "", false)
}

func name(ptr string) string {
	if ptr == "" {
		return "value"
	}
	return strings.ReplaceAll(strings.TrimPrefix(ptr, "/"), "/", ".")
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func (x *expander) whole(e *manifest.TemplateExpr, positional bool) error {
	if e.Source == "steps" {
		out, err := stepOutput(e, x.steps)
		if err != nil {
			return err
		}
		return x.emitStep(out, e, positional)
	}
	if e.Source == "secrets" {
		v, ok := x.lookupSecret(e)
		if !ok {
			return x.secretMissing(e)
		}
		return x.emit(v, "", false)
	}
	ptr := pointer(e)
	v, present := lookup(x.input, e.Path)
	switch e.Filter {
	case "":
		if !present {
			return nil
		}
		return x.values(v, ptr, positional)
	case manifest.FilterDefault:
		if !present {
			return x.emit(e.Args[0], "", false) // the manifest's own value
		}
		return x.values(v, ptr, positional)
	case manifest.FilterOptional:
		if !present {
			return nil
		}
		items, isList := entries(v)
		if !isList {
			items = []any{v}
		}
		for _, it := range items {
			s, err := scalar(it)
			if err != nil {
				return &Error{Code: "input_invalid", Pointer: ptr, Message: err.Error()}
			}
			if flag, ok := strings.CutSuffix(e.Args[0], "="); ok {
				if err := x.emit(flag+"="+s, ptr, false); err != nil {
					return err
				}
				continue
			}
			if err := x.emit(e.Args[0], "", false); err != nil {
				return err
			}
			if err := x.emit(s, ptr, false); err != nil {
				return err
			}
		}
		return nil
	case manifest.FilterFlag:
		if b, ok := v.(bool); present && ok && b {
			return x.emit(e.Args[0], "", false)
		}
		return nil
	case manifest.FilterJSON:
		if !present {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return &Error{Code: "input_invalid", Pointer: ptr, Message: fmt.Sprintf("input %s cannot be encoded as JSON: %v", name(ptr), err)}
		}
		return x.emit(string(b), ptr, positional)
	case manifest.FilterJoin:
		if !present {
			return nil
		}
		s, err := joined(v, e.Args[0])
		if err != nil {
			return &Error{Code: "input_invalid", Pointer: ptr, Message: err.Error()}
		}
		return x.emit(s, ptr, positional)
	}
	return fmt.Errorf("argv: unknown filter %q (lint should have refused it)", e.Filter)
}

// values emits a value: one argument, or one per item of an array.
func (x *expander) values(v any, ptr string, positional bool) error {
	items, isArray := entries(v)
	if !isArray {
		items = []any{v}
	}
	for i, it := range items {
		p := ptr
		if isArray {
			p = ptr + "/" + strconv.Itoa(i)
		}
		s, err := scalar(it)
		if err != nil {
			return &Error{Code: "input_invalid", Pointer: p, Message: err.Error()}
		}
		if err := x.emit(s, p, positional); err != nil {
			return err
		}
	}
	return nil
}

// mixed substitutes each expression of an entry that also holds literal text.
func (x *expander) mixed(tok manifest.TemplateToken, positional bool) error {
	var b strings.Builder
	var firstPtr string
	for i, p := range tok.Parts {
		if p.Expr == nil {
			b.WriteString(p.Literal)
			continue
		}
		e := p.Expr
		if e.Source == "steps" {
			out, err := stepOutput(e, x.steps)
			if err != nil {
				return err
			}
			if i == 0 && positional && strings.HasPrefix(out, "-") {
				return x.emitStep(out, e, positional)
			}
			b.WriteString(out)
			continue
		}
		if e.Source == "secrets" {
			v, ok := x.lookupSecret(e)
			if !ok {
				return x.secretMissing(e)
			}
			b.WriteString(v)
			continue
		}
		ptr := pointer(e)
		if i == 0 {
			firstPtr = ptr
		}
		v, present := lookup(x.input, e.Path)
		var s string
		var err error
		switch {
		case !present && e.Filter == manifest.FilterDefault:
			s = e.Args[0]
		case !present:
			return nil // an absent input drops the whole entry
		case e.Filter == manifest.FilterJSON:
			var raw []byte
			raw, err = json.Marshal(v)
			s = string(raw)
		case e.Filter == manifest.FilterJoin:
			s, err = joined(v, e.Args[0])
		default:
			s, err = joined(v, ",")
		}
		if err != nil {
			return &Error{Code: "input_invalid", Pointer: ptr, Message: err.Error()}
		}
		b.WriteString(s)
	}
	// An entry that starts with a caller's value is checked like a whole-entry value.
	return x.emit(b.String(), firstPtr, firstPtr != "" && positional)
}

func (x *expander) lookupSecret(e *manifest.TemplateExpr) (string, bool) {
	if x.secrets == nil {
		return "", false
	}
	return x.secrets(e.Path[0])
}

func (x *expander) secretMissing(e *manifest.TemplateExpr) error {
	return &Error{Code: "secret_missing", Message: fmt.Sprintf("secret %s has no value", e.Path[0]),
		Hint: "complete the bundle's setup or login so the secret is stored"}
}

func pointer(e *manifest.TemplateExpr) string {
	var b strings.Builder
	for _, p := range e.Path {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(p, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// lookup follows a dotted input path; a null value counts as absent.
func lookup(input map[string]any, path []string) (any, bool) {
	var cur any = input
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil
}

// entries returns the items a list value stands for: an array's items, or an object's entries as
// "key=value" strings sorted by key (the form map flags take: --label k=v); ok is false for a
// scalar. An entry whose value is not a scalar renders it as JSON.
func entries(v any) (items []any, ok bool) {
	switch t := v.(type) {
	case []any:
		return t, true
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			s, err := scalar(t[k])
			if err != nil {
				s = fmt.Sprint(t[k])
			}
			items = append(items, k+"="+s)
		}
		return items, true
	}
	return nil, false
}

// joined renders a value as one argument: array items (or object entries, see entries) joined by
// sep, anything else as a scalar.
func joined(v any, sep string) (string, error) {
	items, ok := entries(v)
	if !ok {
		return scalar(v)
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		s, err := scalar(it)
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, sep), nil
}

// Scalar renders a string, number or boolean as one argument: strings as they are, numbers without
// exponent, booleans as true/false. Anything else (null, arrays, objects) is an error.
func Scalar(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case json.Number:
		return t.String(), nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return "", fmt.Errorf("number %v cannot be an argument", t)
		}
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	}
	return "", fmt.Errorf("want a string, number or boolean, got %T", v)
}

// scalar renders one value as an argument: null as "", objects and arrays as JSON, anything else
// as Scalar does.
func scalar(v any) (string, error) {
	switch v.(type) {
	case nil:
		return "", nil
	case string, bool, json.Number, float64, int, int64:
		return Scalar(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("value cannot be encoded: %v", err)
	}
	return string(b), nil
}
