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
// Safety: an argument that begins with a value the caller supplied (an input, or a step's output,
// which may carry one) is refused when that value starts with '-', since the CLI could read it as an
// option — wherever it stands alone: as a positional, right after a literal option, or as the value
// of optional('--f'). Only a literal "--" earlier in the template (after which the CLI reads
// everything as positional), or the input's schema marked manifest.AllowDashKeyword (the author's
// word that the CLI takes the argument whatever it holds), lets it through. A value glued to a
// literal prefix ("--opt=${input.x}", optional('--opt=')) cannot be read as an option and is never
// refused. NUL bytes are refused; each argument is at most MaxArgLength bytes and all together
// MaxTotalLength.
package argv

import (
	jsonscalar "github.com/clihost/clihost/argv/scalar"
	"github.com/clihost/clihost/errcode"

	"encoding/json"
	"fmt"
	"maps"
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
	Code    errcode.Code
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
	// Schema is the tool's inputs schema, read only for manifest.AllowDashKeyword marks; nil: no
	// input is marked.
	Schema map[string]any
}

// Expand turns the parsed template into arguments using input (already validated, defaults applied),
// with no input marked manifest.AllowDashKeyword (ExpandValues with Values.Schema reads the marks).
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
		text, _, present, err := inputText(e, v.Input)
		if err != nil {
			return "", false, err
		}
		if !present {
			return "", false, nil
		}
		b.WriteString(text)
		if b.Len() > MaxTextLength {
			return "", false, &Error{Code: errcode.InputInvalid, Pointer: pointer(e), Message: fmt.Sprintf("the expanded text is more than %d bytes", MaxTextLength), Hint: "pass less data per call"}
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
	x := expander{input: v.Input, secrets: v.Secrets, steps: v.Steps, schema: v.Schema}
	for _, tok := range tmpl {
		if err := x.token(tok); err != nil {
			return nil, err
		}
	}
	total := 0
	for _, a := range x.out {
		total += len(a) + 1
	}
	if total > MaxTotalLength {
		return nil, &Error{Code: errcode.InputInvalid, Message: fmt.Sprintf("the arguments add up to %d bytes, more than %d", total, MaxTotalLength), Hint: "pass less data per call, or a file in the workspace"}
	}
	return x.out, nil
}

type expander struct {
	input       map[string]any
	secrets     Secrets
	steps       []string
	schema      map[string]any
	out         []string
	afterDashes bool // a literal "--" has been emitted: the CLI reads everything after as positional
}

func (x *expander) token(tok manifest.TemplateToken) error {
	if lit, ok := tok.Literal(); ok {
		if lit == "--" {
			x.afterDashes = true
		}
		return x.emit(lit, "", false)
	}
	if e := tok.Whole(); e != nil {
		return x.whole(e)
	}
	return x.mixed(tok)
}

// guarded reports whether a value of e that begins an argument must not start with '-': always,
// unless a literal "--" came before or e is an input whose schema is marked AllowDashKeyword.
func (x *expander) guarded(e *manifest.TemplateExpr) bool {
	if x.afterDashes {
		return false
	}
	return e.Source != "input" || !manifest.AllowsDash(x.schema, e.Path)
}

// emit appends one argument. checkDash marks an argument that begins with a caller's value that
// must not start with '-' (see guarded).
func (x *expander) emit(a, ptr string, checkDash bool) error {
	if strings.IndexByte(a, 0) >= 0 {
		return &Error{Code: errcode.InputInvalid, Pointer: ptr, Message: fmt.Sprintf("input %s holds a NUL byte", name(ptr)), Hint: "remove the NUL character"}
	}
	if len(a) > MaxArgLength {
		return &Error{Code: errcode.InputInvalid, Pointer: ptr, Message: fmt.Sprintf("input %s is %d bytes, more than the %d an argument may hold", name(ptr), len(a), MaxArgLength), Hint: "pass a file in the workspace instead"}
	}
	if checkDash && strings.HasPrefix(a, "-") {
		return &Error{Code: errcode.InputInvalid, Pointer: ptr,
			Message: fmt.Sprintf("input %s starts with '-' (%q) in an argument of its own, where the CLI could read it as an option", name(ptr), short(a)),
			Hint:    "pass a value that does not start with '-' (a file as ./-name); a bundle that needs such values passes them glued to their option (--opt=${input.x}), after a literal \"--\", or marks the input " + manifest.AllowDashKeyword}
	}
	x.out = append(x.out, a)
	return nil
}

// emitStep appends an argument that begins with a step's output. Like a caller's value, an output
// starting with '-' is refused unless a literal "--" came before: it may carry what the caller sent.
func (x *expander) emitStep(a string, e *manifest.TemplateExpr) error {
	if x.guarded(e) && strings.HasPrefix(a, "-") {
		return &Error{Code: errcode.InputInvalid,
			Message: fmt.Sprintf("the output of step %s starts with '-' (%q) in an argument of its own, where the CLI could read it as an option", e.Path[0], short(a)),
			Hint:    "the bundle can glue it to its option (--opt=${steps.N.output}) or put a literal \"--\" before this argument"}
	}
	return x.emit(a, "", false)
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

func (x *expander) whole(e *manifest.TemplateExpr) error {
	if e.Source == "steps" {
		out, err := stepOutput(e, x.steps)
		if err != nil {
			return err
		}
		return x.emitStep(out, e)
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
	guard := x.guarded(e)
	switch e.Filter {
	case "":
		if !present {
			return nil
		}
		return x.values(v, ptr, guard)
	case manifest.FilterDefault:
		if !present {
			return x.emit(e.Args[0], "", false) // the manifest's own value
		}
		return x.values(v, ptr, guard)
	case manifest.FilterOptional:
		if !present {
			return nil
		}
		return x.optional(e.Args[0], v, ptr, guard)
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
			return &Error{Code: errcode.InputInvalid, Pointer: ptr, Message: fmt.Sprintf("input %s cannot be encoded as JSON: %v", name(ptr), err)}
		}
		return x.emit(string(b), ptr, guard)
	case manifest.FilterJoin:
		if !present {
			return nil
		}
		s, err := joined(v, e.Args[0])
		if err != nil {
			return &Error{Code: errcode.InputInvalid, Pointer: ptr, Message: err.Error()}
		}
		return x.emit(s, ptr, guard)
	}
	return fmt.Errorf("argv: unknown filter %q (lint should have refused it)", e.Filter)
}

// optional emits optional(flag)'s arguments for a present value: "flag VALUE", or "flagVALUE" as
// one argument when flag ends with '=', once per item of an array (or entry of an object). A
// VALUE of its own is checked as emit's checkDash says when guard is set.
func (x *expander) optional(flag string, v any, ptr string, guard bool) error {
	items, isList := entries(v)
	if !isList {
		items = []any{v}
	}
	_, isArray := v.([]any)
	for i, it := range items {
		p := ptr
		if isArray {
			p = ptr + "/" + strconv.Itoa(i)
		}
		s, err := scalar(it)
		if err != nil {
			return &Error{Code: errcode.InputInvalid, Pointer: p, Message: err.Error()}
		}
		if strings.HasSuffix(flag, "=") {
			err = x.emit(flag+s, p, false)
		} else if err = x.emit(flag, "", false); err == nil {
			err = x.emit(s, p, guard) // the value stands alone after the option
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// values emits a value: one argument, or one per item of an array. guard is as emit's checkDash.
func (x *expander) values(v any, ptr string, guard bool) error {
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
			return &Error{Code: errcode.InputInvalid, Pointer: p, Message: err.Error()}
		}
		if err := x.emit(s, p, guard); err != nil {
			return err
		}
	}
	return nil
}

// mixed substitutes each expression of an entry that also holds literal text. The entry is checked
// like a whole-entry value when its first byte comes from a caller's value.
func (x *expander) mixed(tok manifest.TemplateToken) error {
	var b strings.Builder
	var lead, named *manifest.TemplateExpr // the caller's value that begins the argument; the first input
	led := false
	for _, p := range tok.Parts {
		s, fromCaller, present, err := x.part(p)
		if err != nil {
			return err
		}
		if !present {
			return nil // an absent input drops the whole entry
		}
		if p.Expr != nil && p.Expr.Source == "input" && named == nil {
			named = p.Expr
		}
		if !led && s != "" {
			led = true
			if fromCaller {
				lead = p.Expr
			}
		}
		b.WriteString(s)
	}
	switch {
	case lead == nil:
		ptr := ""
		if named != nil {
			ptr = pointer(named)
		}
		return x.emit(b.String(), ptr, false)
	case lead.Source == "steps":
		return x.emitStep(b.String(), lead)
	}
	return x.emit(b.String(), pointer(lead), x.guarded(lead))
}

// part renders one part of a mixed entry: its text, whether the text is a caller's value (an input
// or a step's output, not the manifest's literal, default or a secret), and false when an absent
// input drops the entry.
func (x *expander) part(p manifest.TemplatePart) (text string, fromCaller, present bool, err error) {
	e := p.Expr
	switch {
	case e == nil:
		return p.Literal, false, true, nil
	case e.Source == "steps":
		out, err := stepOutput(e, x.steps)
		return out, true, true, err
	case e.Source == "secrets":
		v, ok := x.lookupSecret(e)
		if !ok {
			return "", false, false, x.secretMissing(e)
		}
		return v, false, true, nil
	}
	return inputText(e, x.input)
}

// inputText renders the input expression e against input: its text; whether that text is the
// caller's (false for a default's literal); whether there is any (false for an absent input
// without a default); or input_invalid when the value cannot be rendered.
func inputText(e *manifest.TemplateExpr, input map[string]any) (text string, fromCaller, present bool, err error) {
	v, ok := lookup(input, e.Path)
	switch {
	case !ok && e.Filter == manifest.FilterDefault:
		return e.Args[0], false, true, nil
	case !ok:
		return "", false, false, nil
	case e.Filter == manifest.FilterJSON:
		var raw []byte
		raw, err = json.Marshal(v)
		text = string(raw)
	case e.Filter == manifest.FilterJoin:
		text, err = joined(v, e.Args[0])
	default:
		text, err = joined(v, ",")
	}
	if err != nil {
		return "", false, false, &Error{Code: errcode.InputInvalid, Pointer: pointer(e), Message: err.Error()}
	}
	return text, true, true, nil
}

func (x *expander) lookupSecret(e *manifest.TemplateExpr) (string, bool) {
	if x.secrets == nil {
		return "", false
	}
	return x.secrets(e.Path[0])
}

func (x *expander) secretMissing(e *manifest.TemplateExpr) error {
	return &Error{Code: errcode.SecretMissing, Message: fmt.Sprintf("secret %s has no value", e.Path[0]),
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

// scalar renders one value as an argument: null as "", objects and arrays as JSON, anything else
// as Scalar does.
func scalar(v any) (string, error) {
	switch v.(type) {
	case nil:
		return "", nil
	case string, bool, json.Number, float64, int, int64:
		return jsonscalar.String(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("value cannot be encoded: %v", err)
	}
	return string(b), nil
}
