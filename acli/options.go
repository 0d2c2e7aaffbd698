package acli

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/internal/editdist"
	"github.com/clihost/clihost/manifest"
)

// parseInputs turns the arguments after the command path into a tool input, guided by the tool's
// input schema (Inputs["properties"] and Inputs["required"]):
//
//   - --name VALUE and --name=VALUE, where name is a property name or the same with _ written as -
//     (--dry-run for dry_run). A separate VALUE may not start with "--" (use --name=--x).
//   - Booleans: --name is true, --name=true/false, --name true/false (only these exact words are
//     taken from the next argument), --no-name is false (unless a property no_name exists).
//   - Arrays: repeated (--k a --k b) and comma-separated (--k a,b), items trimmed and coerced by
//     the items' type; an empty value (--k=) is an empty array. Items of type object or array are one JSON value
//     per occurrence and are not split.
//   - Integers (base 10, any size) and numbers (decimal, finite) become json.Number with every digit
//     kept (never through a float64); objects and arrays are one JSON value (argv.DecodeValue); strings are taken as given, checked for format date-time (RFC 3339), date
//     (YYYY-MM-DD) and path (see checkPath). Every value is checked against enum.
//   - -x works only when a property declares "x-short": "x"; -xVALUE, -x=VALUE and clusters of
//     boolean shorts (-abc) are accepted. An argument that is a number (-5) is never an option.
//   - "--" ends the options. Positionals fill the required inputs not set by options, in order; a
//     required array that is the last of them takes every remaining positional (not comma-split).
//     Any positionals left over go to the only non-required array property, if there is exactly
//     one; otherwise they are a VALIDATION_ERROR.
//   - A repeated non-array option keeps its last value.
//
// Missing required inputs and the other schema rules (pattern, minimum, …) are left to the host's
// schema validation; nothing is filled in that the command did not say.
func parseInputs(e *manifest.ToolEntry, args []string, opts Options) (map[string]any, *Error) {
	p := &inputParser{e: e, props: properties(e), input: make(map[string]any, 4), ws: opts.Workspace}
	var positionals []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		var n int
		var err *Error
		switch {
		case a == "--":
			positionals = append(positionals, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			n, err = p.long(a[2:], args[i+1:])
		case len(a) > 1 && a[0] == '-' && !isNumber(a):
			n, err = p.short(a, a[1:], args[i+1:])
		default:
			positionals = append(positionals, a)
		}
		if err != nil {
			return nil, err
		}
		i += n
	}
	if err := p.positionals(positionals); err != nil {
		return nil, err
	}
	return p.input, nil
}

type inputParser struct {
	e     *manifest.ToolEntry
	props map[string]any
	input map[string]any
	ws    string
}

// long handles --spec; next are the arguments after it. It returns how many of them it used.
func (p *inputParser) long(spec string, next []string) (int, *Error) {
	name, val, hasVal := strings.Cut(spec, "=")
	prop, schema, ok := lookupLong(p.props, name)
	if !ok {
		if base, neg := strings.CutPrefix(name, "no-"); neg {
			if prop, schema, ok := lookupLong(p.props, base); ok && typeOf(schema) == "boolean" {
				if hasVal {
					return 0, p.invalid(fmt.Sprintf("--%s takes no value", name), fmt.Sprintf("Write --%s, or --%s=%s", name, base, val))
				}
				p.input[prop] = false
				return 0, nil
			}
		}
		return 0, p.unknown("--" + name)
	}
	return p.option("--"+name, prop, schema, val, hasVal, next)
}

// short handles a short option argument tok; spec is what follows its "-" (for clusters, what
// follows the previous short).
func (p *inputParser) short(tok, spec string, next []string) (int, *Error) {
	r, size := utf8.DecodeRuneInString(spec)
	prop := shortOption(p.e, r)
	if prop == "" {
		return 0, p.unknown(tok)
	}
	schema := schemaOf(p.props[prop])
	display := "-" + string(r)
	rest := spec[size:]
	val, hasVal := strings.CutPrefix(rest, "=")
	if typeOf(schema) == "boolean" && !hasVal && rest != "" {
		p.input[prop] = true
		return p.short(tok, rest, next)
	}
	if rest != "" && !hasVal {
		val, hasVal = rest, true
	}
	return p.option(display, prop, schema, val, hasVal, next)
}

// option sets property prop from an option named display, with an attached value (hasVal) or one
// taken from next.
func (p *inputParser) option(display, prop string, schema map[string]any, val string, hasVal bool, next []string) (int, *Error) {
	used := 0
	if typeOf(schema) == "boolean" && !hasVal {
		if len(next) == 0 || (next[0] != "true" && next[0] != "false") {
			p.input[prop] = true
			return 0, nil
		}
		val, used = next[0], 1
	} else if !hasVal {
		if len(next) == 0 || strings.HasPrefix(next[0], "--") {
			return 0, p.invalid(display+" needs a value",
				fmt.Sprintf("Write %s VALUE or %s=VALUE (use = for a value that starts with --). %s", display, display, valueHint(schema)))
		}
		val, used = next[0], 1
	}
	if typeOf(schema) == "array" {
		return used, p.appendItems(display, prop, schema, val, true)
	}
	v, err := p.coerce(display, schema, val)
	if err != nil {
		return 0, err
	}
	p.input[prop] = v
	return used, nil
}

// appendItems adds the items in raw to the array property prop; split says whether raw is a
// comma-separated list.
func (p *inputParser) appendItems(display, prop string, schema map[string]any, raw string, split bool) *Error {
	items := schemaOf(schema["items"])
	cur, _ := p.input[prop].([]any)
	if cur == nil {
		cur = []any{}
	}
	if it := typeOf(items); !split || it == "object" || it == "array" {
		v, err := p.coerce(display, items, raw)
		if err != nil {
			return err
		}
		p.input[prop] = append(cur, v)
		return nil
	}
	if raw != "" {
		for part := range strings.SplitSeq(raw, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				return p.invalid(fmt.Sprintf("%s has an empty item in %s", display, quoteClip(raw)), "Separate items with single commas, e.g. "+display+" a,b")
			}
			v, err := p.coerce(display, items, part)
			if err != nil {
				return err
			}
			cur = append(cur, v)
		}
	}
	p.input[prop] = cur
	return nil
}

// positionals assigns the positional arguments (see parseInputs).
func (p *inputParser) positionals(args []string) *Error {
	if len(args) == 0 {
		return nil
	}
	var slots []string
	for _, name := range requiredNames(p.e) {
		if _, set := p.input[name]; !set {
			slots = append(slots, name)
		}
	}
	i := 0
	for k, name := range slots {
		if i == len(args) {
			return nil
		}
		schema := schemaOf(p.props[name])
		display := "<" + name + ">"
		if typeOf(schema) != "array" {
			v, err := p.coerce(display, schema, args[i])
			if err != nil {
				return err
			}
			p.input[name] = v
			i++
			continue
		}
		end := i + 1
		if k == len(slots)-1 {
			end = len(args)
		}
		for ; i < end; i++ {
			if err := p.appendItems(display, name, schema, args[i], false); err != nil {
				return err
			}
		}
	}
	if i == len(args) {
		return nil
	}
	if name := extraArray(p.e); name != "" {
		for _, a := range args[i:] {
			if err := p.appendItems("<"+name+">", name, schemaOf(p.props[name]), a, false); err != nil {
				return err
			}
		}
		return nil
	}
	var pos []string
	for _, name := range requiredNames(p.e) {
		pos = append(pos, "<"+name+">")
	}
	hint := fmt.Sprintf("'%s' takes no positional arguments", p.e.CommandPath())
	if len(pos) > 0 {
		hint = fmt.Sprintf("'%s' takes %d positional argument(s): %s", p.e.CommandPath(), len(pos), strings.Join(pos, " "))
	}
	if opts := optionNames(p.e); len(opts) > 0 {
		hint += "; pass other inputs as options: " + strings.Join(opts, ", ")
	}
	return p.invalid("unexpected argument "+quoteClip(args[i]), hint)
}

// coerce converts raw to the type of schema and checks its enum, format and (for format path)
// that it stays inside the workspace.
func (p *inputParser) coerce(display string, schema map[string]any, raw string) (any, *Error) {
	var v any = raw
	switch typeOf(schema) {
	case "boolean":
		switch raw {
		case "true":
			v = true
		case "false":
			v = false
		default:
			return nil, p.invalid(fmt.Sprintf("%s must be true or false, not %s", display, quoteClip(raw)), "Write "+display+" alone for true, or "+display+"=false")
		}
	case "integer":
		n, ok := new(big.Int).SetString(raw, 10)
		if !ok || len(raw) > argv.MaxNumberLength {
			return nil, p.invalid(fmt.Sprintf("%s must be an integer, not %s", display, quoteClip(raw)), "Use a whole number such as 10 or -5")
		}
		v = json.Number(n.String()) // every digit, however many
	case "number":
		f, err := strconv.ParseFloat(raw, 64)
		text, exact := exactNumber(raw)
		if !isNumber(raw) || err != nil || math.IsInf(f, 0) || math.IsNaN(f) || !exact {
			return nil, p.invalid(fmt.Sprintf("%s must be a number, not %s", display, quoteClip(raw)), "Use a decimal number such as 3.14, -0.5 or 1e3")
		}
		v = json.Number(text)
	case "object", "array":
		want := typeOf(schema)
		x, err := argv.DecodeValue([]byte(raw))
		ok := err == nil
		if _, isObj := x.(map[string]any); ok && want == "object" && !isObj {
			ok = false
		} else if _, isArr := x.([]any); ok && want == "array" && !isArr {
			ok = false
		}
		if !ok {
			return nil, p.invalid(fmt.Sprintf("%s must be a JSON %s", display, want), fmt.Sprintf(`Quote the JSON, e.g. %s '%s'`, display, map[string]string{"object": `{"key":"value"}`, "array": `["a","b"]`}[want]))
		}
		v = x
	}
	if s, ok := v.(string); ok {
		switch schema["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				return nil, p.invalid(fmt.Sprintf("%s must be an RFC 3339 date-time, not %s", display, quoteClip(s)), "Use a form such as 2026-02-02T10:00:00Z or 2026-02-02T10:00:00+09:00")
			}
		case "date":
			if _, err := time.Parse(time.DateOnly, s); err != nil {
				return nil, p.invalid(fmt.Sprintf("%s must be a date (YYYY-MM-DD), not %s", display, quoteClip(s)), "Use a form such as 2026-02-02")
			}
		case "path":
			if err := checkPath(p.ws, display, s); err != nil {
				return nil, err
			}
		}
	}
	if enum, ok := schema["enum"].([]any); ok && !inEnum(enum, v) {
		vals := make([]string, len(enum))
		for i, x := range enum {
			vals[i] = fmt.Sprint(x)
		}
		err := p.invalid(fmt.Sprintf("%s must be one of %s, not %s", display, strings.Join(vals, ", "), quoteClip(raw)), "Use one of: "+strings.Join(vals, ", "))
		if len(vals) > 0 && strings.HasPrefix(display, "-") {
			err.Examples = []string{p.e.CommandPath() + " " + display + " " + quoteArg(vals[0])}
		}
		return nil, err
	}
	return v, nil
}

// invalid is a VALIDATION_ERROR about this command, with its examples.
func (p *inputParser) invalid(detail, hint string) *Error {
	return &Error{Code: ValidationError, Message: "Invalid argument: " + detail, Hint: hint, Examples: toolExamples(p.e, 2)}
}

// unknown is the VALIDATION_ERROR for an option the tool does not have.
func (p *inputParser) unknown(opt string) *Error {
	opts := optionNames(p.e)
	hint := fmt.Sprintf("'%s' has no options", p.e.CommandPath())
	if len(opts) > 0 {
		hint = "Valid options: " + strings.Join(opts, ", ")
		best, bestD := "", 3
		for _, o := range opts {
			if d := editdist.Distance(clipForDistance(opt), o); d < bestD {
				best, bestD = o, d
			}
		}
		if best != "" {
			hint = "Did you mean " + best + "? " + hint
		}
	}
	if !strings.HasPrefix(opt, "--") {
		hint += ". Short options work only where declared; use the long form"
	}
	hint += ". Run 'help " + p.e.CommandPath() + "' for details"
	return p.invalid("unknown option "+quoteClip(opt), hint)
}

// valueHint describes what a value of schema looks like.
func valueHint(schema map[string]any) string {
	if enum, ok := schema["enum"].([]any); ok {
		vals := make([]string, len(enum))
		for i, x := range enum {
			vals[i] = fmt.Sprint(x)
		}
		return "Use one of: " + strings.Join(vals, ", ")
	}
	return "The value is of type " + argType(schema)
}

// properties returns the tool's input properties (nil when it declares none).
func properties(e *manifest.ToolEntry) map[string]any {
	p, _ := e.Tool.Inputs["properties"].(map[string]any)
	return p
}

// schemaOf returns a property's schema as a map; a boolean schema (true) is an empty map.
func schemaOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// lookupLong finds the property for --name: an exact match, then name with - read as _, then any
// property whose name with _ written as - is name (the first in sorted order).
func lookupLong(props map[string]any, name string) (string, map[string]any, bool) {
	if s, ok := props[name]; ok {
		return name, schemaOf(s), true
	}
	if strings.IndexByte(name, '-') < 0 {
		return "", nil, false
	}
	if alt := strings.ReplaceAll(name, "-", "_"); alt != name {
		if s, ok := props[alt]; ok {
			return alt, schemaOf(s), true
		}
	}
	for _, k := range sortedKeys(props) {
		if kebab(k) == name {
			return k, schemaOf(props[k]), true
		}
	}
	return "", nil, false
}

// shortOption returns the property that declares "x-short": r (first in sorted order), or "".
// The declaration is one character, optionally written with its dash ("n" or "-n").
func shortOption(e *manifest.ToolEntry, r rune) string {
	props := properties(e)
	for _, k := range sortedKeys(props) {
		s, _ := schemaOf(props[k])["x-short"].(string)
		s = strings.TrimPrefix(s, "-")
		if c, size := utf8.DecodeRuneInString(s); size > 0 && size == len(s) && c == r {
			return k
		}
	}
	return ""
}

// typeOf is a schema's type: its "type" (the first non-null one of a list), else inferred from
// enum, items or properties; "" when none says.
func typeOf(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		switch enum[0].(type) {
		case bool:
			return "boolean"
		case json.Number:
			return "number"
		}
	}
	if _, ok := schema["items"]; ok {
		return "array"
	}
	if _, ok := schema["properties"]; ok {
		return "object"
	}
	return ""
}

// requiredNames lists Inputs["required"] in order.
func requiredNames(e *manifest.ToolEntry) []string {
	req, _ := e.Tool.Inputs["required"].([]any)
	out := make([]string, 0, len(req))
	for _, r := range req {
		if s, ok := r.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// extraArray is the tool's only non-required array property, or "" when there is not exactly one.
func extraArray(e *manifest.ToolEntry) string {
	req := map[string]bool{}
	for _, r := range requiredNames(e) {
		req[r] = true
	}
	found := ""
	for k, s := range properties(e) {
		if !req[k] && typeOf(schemaOf(s)) == "array" {
			if found != "" {
				return ""
			}
			found = k
		}
	}
	return found
}

// propertyOrder lists the properties: required ones in required order, then the others sorted.
func propertyOrder(e *manifest.ToolEntry) []string {
	props := properties(e)
	seen := map[string]bool{}
	var out []string
	for _, r := range requiredNames(e) {
		if _, ok := props[r]; ok && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, k := range sortedKeys(props) {
		if !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// optionNames lists the long options, in propertyOrder.
func optionNames(e *manifest.ToolEntry) []string {
	order := propertyOrder(e)
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = "--" + kebab(k)
	}
	return out
}

func kebab(name string) string { return strings.ReplaceAll(name, "_", "-") }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// isNumber reports whether s is a decimal number: [+-] digits [. digits] [e [+-] digits], where
// either side of the point may be empty but not both.
func isNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// exactNumber writes the decimal number s (isNumber's syntax) as JSON in JavaScript's form (plain
// decimals from 1e-6 up to 1e21, else with an exponent: 1e-7, 1e+21; 5. is 5, .5 is 0.5) from its
// digits, never through a float64, so that every digit is kept. ok is false when s is not a
// number within argv's bounds.
func exactNumber(s string) (text string, ok bool) {
	if !isNumber(s) || len(s) > argv.MaxNumberLength {
		return "", false
	}
	neg := s[0] == '-'
	s = strings.TrimLeft(s, "+-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > argv.MaxNumberExponent || e < -argv.MaxNumberExponent {
			return "", false
		}
		mant, exp = s[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	all := strings.TrimLeft(intPart+frac, "0")
	digits := strings.TrimRight(all, "0")
	if digits == "" {
		return "0", true
	}
	k := len(digits)
	n := k + exp - len(frac) + (len(all) - k) // the value is 0.digits × 10^n
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		out = digits[:1]
		if k > 1 {
			out += "." + digits[1:]
		}
		if n-1 >= 0 {
			out += "e+" + strconv.Itoa(n-1)
		} else {
			out += "e" + strconv.Itoa(n-1)
		}
	}
	if neg {
		out = "-" + out
	}
	return out, true
}

// inEnum reports whether v is one of enum; numbers compare by their exact value (2 is 2.0, and
// 12345678901234567 is not 12345678901234568).
func inEnum(enum []any, v any) bool {
	vr, vNum := number(v)
	for _, x := range enum {
		if xr, ok := number(x); ok && vNum {
			if xr.Cmp(vr) == 0 {
				return true
			}
		} else if reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}

// number is v's exact value when v is a number within argv's bounds (math/big does not take
// unbounded exponents).
func number(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	if _, err := argv.DecodeValue([]byte(n)); err != nil {
		return nil, false
	}
	return new(big.Rat).SetString(string(n))
}
