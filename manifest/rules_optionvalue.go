package manifest

import (
	"encoding/json"
	"fmt"
	"regexp/syntax"
	"strings"
)

// AllowDashKeyword is the clihost annotation on an input's schema (inputs.properties.NAME) that lets
// a value of that input start with '-' where it stands alone as an argument. Without it such a value
// is refused there (package argv), since the CLI could read it as an option: a template passes a
// caller's value to an option glued to it ("--opt=${input.x}"), and only an author who knows the
// option takes the next argument whatever it holds (jq --arg NAME VALUE) marks the input; keeping its
// values safe is then the schema's job.
const AllowDashKeyword = "x-clihost-allow-dash"

// InputProperty returns the schema of the input a dotted path names, following properties from the
// tool's inputs schema; nil when it is not declared there.
func InputProperty(inputs map[string]any, path []string) map[string]any {
	cur := inputs
	for _, name := range path {
		props, _ := cur["properties"].(map[string]any)
		next, ok := props[name].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// AllowsDash reports whether the input a dotted path names is marked with AllowDashKeyword: true
// on its own schema (a mark on an enclosing object does not reach its properties).
func AllowsDash(inputs map[string]any, path []string) bool {
	b, _ := InputProperty(inputs, path)[AllowDashKeyword].(bool)
	return b
}

// optionValueRules warns where a caller's value stands alone as the argument after an option: after
// a literal option ("--title", "${input.t}") or as the value of optional('--title'). A value starting
// with '-' is refused there, so the template works only for values that do not; and when the
// option takes no value (ls -1 PATH) the entry is a positional that wants a "--" before it. Inputs
// whose schema rules out a leading '-' (booleans, non-negative numbers, enums, anchored patterns)
// or that carry AllowDashKeyword are not reported. Nothing after a literal "--" is.
func (t *toolLinter) optionValueRules(ptr string, tokens []TemplateToken, tool *Tool) {
	if t.entry.inputSchema == nil {
		return // the inputs schema is missing or broken: that has its own finding
	}
	for i, tok := range tokens {
		if lit, ok := tok.Literal(); ok && lit == "--" {
			return
		}
		e := tok.Whole()
		if e == nil || e.Source != "input" {
			continue
		}
		// the texts are written only for an entry that is reported
		var texts func() (msg, hint string)
		switch e.Filter {
		case FilterOptional:
			opt := e.Args[0]
			if strings.HasSuffix(opt, "=") {
				continue
			}
			texts = func() (string, string) {
				return fmt.Sprintf("optional('%s') passes ${input.%s} as an argument of its own", opt, e.Name()),
					fmt.Sprintf("glue the value to the option: %s", gluedOptional(opt, e))
			}
		case "", FilterDefault, FilterJSON, FilterJoin:
			if i == 0 {
				continue
			}
			prev, ok := tokens[i-1].Literal()
			if !ok || !optionToken.MatchString(prev) {
				continue
			}
			texts = func() (string, string) {
				return fmt.Sprintf("${input.%s} stands alone right after the option %q", e.Name(), prev),
					fmt.Sprintf("if %s takes this value, write both as one entry, %q; if the value is a positional argument, put a literal \"--\" before it", prev, glued(prev, tok.Raw))
			}
		default:
			continue
		}
		if !mayStartWithDash(InputProperty(tool.Inputs, e.Path), e.Filter) {
			continue
		}
		msg, hint := texts()
		t.c.at(JoinPointer(ptr, i), SeverityWarning, "argv-option-value",
			msg+": a value starting with '-' is refused there, since the CLI could read it as an option",
			hint+fmt.Sprintf("; when the CLI only takes a separate value (jq --arg NAME VALUE), mark the input %s: true and keep its values safe in its schema", AllowDashKeyword))
	}
}

// glued is the one-entry form of an option and its value: --opt=VALUE for a long option, -oVALUE
// for a short one.
func glued(opt, value string) string {
	if strings.HasPrefix(opt, "--") {
		return opt + "=" + value
	}
	return opt + value
}

// gluedOptional is the glued form of ${input.x | optional('opt')}.
func gluedOptional(opt string, e *TemplateExpr) string {
	if strings.HasPrefix(opt, "--") {
		return fmt.Sprintf("\"${input.%s | optional('%s=')}\"", e.Name(), opt)
	}
	return fmt.Sprintf("%q (an absent input drops it)", glued(opt, "${input."+e.Name()+"}"))
}

// allowDashRules checks that every AllowDashKeyword in the inputs' properties is a boolean.
func (t *toolLinter) allowDashRules(tool *Tool) {
	var walk func(ptr string, s map[string]any)
	walk = func(ptr string, s map[string]any) {
		if v, ok := s[AllowDashKeyword]; ok {
			if _, isBool := v.(bool); !isBool {
				t.c.at(JoinPointer(ptr, AllowDashKeyword), SeverityError, "input-allow-dash", fmt.Sprintf("%s must be true or false", AllowDashKeyword), "write "+AllowDashKeyword+": true")
			}
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			if ps, ok := p.(map[string]any); ok {
				walk(JoinPointer(ptr, "properties", name), ps)
			}
		}
	}
	walk("/inputs", tool.Inputs)
}

// mayStartWithDash reports whether a value the schema s accepts can give an argument starting with
// '-' when expanded with filter: false only when the schema proves it cannot (or carries
// AllowDashKeyword). An unknown or missing schema may.
func mayStartWithDash(s map[string]any, filter string) bool {
	if s == nil {
		return true
	}
	if marked, _ := s[AllowDashKeyword].(bool); marked {
		return false
	}
	if c, ok := s["const"]; ok {
		return constMayDash(c, filter)
	}
	if enum, ok := s["enum"].([]any); ok {
		for _, v := range enum {
			if constMayDash(v, filter) {
				return true
			}
		}
		return false
	}
	types, ok := schemaTypes(s)
	if !ok {
		return true
	}
	for _, typ := range types {
		if typeMayDash(s, typ, filter) {
			return true
		}
	}
	return false
}

// constMayDash reports whether one allowed value renders with a leading '-'.
func constMayDash(v any, filter string) bool {
	switch t := v.(type) {
	case string:
		return filter != FilterJSON && strings.HasPrefix(t, "-")
	case bool, nil:
		return false
	}
	if _, ok := number(v); ok {
		return strings.HasPrefix(fmt.Sprint(v), "-")
	}
	return filter != FilterJSON // an array or object: items and entries are not looked into
}

// typeMayDash reports whether a value of JSON type typ, under schema s, may render with a leading '-'.
func typeMayDash(s map[string]any, typ, filter string) bool {
	switch typ {
	case "boolean", "null":
		return false
	case "integer", "number":
		return !nonNegative(s)
	case "string":
		if filter == FilterJSON {
			return false // "…"
		}
		p, ok := s["pattern"].(string)
		return !ok || !patternExcludesDash(p)
	case "array":
		if filter == FilterJSON {
			return false // [
		}
		items, ok := s["items"].(map[string]any)
		if _, tuple := s["prefixItems"]; !ok || tuple {
			return true
		}
		return mayStartWithDash(items, "")
	case "object":
		return filter != FilterJSON // key=value entries; keys are not looked into
	}
	return true
}

// schemaTypes returns the JSON types a schema's type keyword allows; false without one.
func schemaTypes(s map[string]any) ([]string, bool) {
	switch t := s["type"].(type) {
	case string:
		return []string{t}, true
	case []any:
		var out []string
		for _, v := range t {
			name, ok := v.(string)
			if !ok {
				return nil, false
			}
			out = append(out, name)
		}
		return out, len(out) > 0
	}
	return nil, false
}

// nonNegative reports whether the schema's minimum or exclusiveMinimum is at least 0. (A caller
// may still send -0, which the schema accepts and argv refuses where it stands alone.)
func nonNegative(s map[string]any) bool {
	for _, k := range []string{"minimum", "exclusiveMinimum"} {
		if n, ok := number(s[k]); ok && n >= 0 {
			return true
		}
	}
	return false
}

// number reads a schema's number (json.Number as the manifest decodes them, or a Go number).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// patternExcludesDash reports whether no string starting with '-' matches the JSON Schema pattern
// p (a search, compiled with Go's regexp as the input validator does): every match must begin at
// the start of the text, and there neither an empty match nor a '-' is possible.
func patternExcludesDash(p string) bool {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return false
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil || prog.StartCond()&syntax.EmptyBeginText == 0 {
		return false
	}
	at := syntax.EmptyOpContext(-1, '-') // the empty-width conditions true before a leading '-'
	seen := make([]bool, len(prog.Inst))
	var reaches func(pc uint32) bool // a match or a '-' is reachable from pc without consuming
	reaches = func(pc uint32) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		in := &prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstFail:
			return false
		case syntax.InstAlt, syntax.InstAltMatch:
			return reaches(in.Out) || reaches(in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			return reaches(in.Out)
		case syntax.InstEmptyWidth:
			return syntax.EmptyOp(in.Arg)&^at == 0 && reaches(in.Out)
		}
		return in.MatchRune('-')
	}
	return !reaches(uint32(prog.Start))
}
