package manifest

import (
	"fmt"
	"strconv"
	"strings"
)

// The argv template language (DESIGN.md):
//
//	token  = { literal | "$${" | expr }            "$${" is a literal "${"
//	expr   = "${" source [ "|" filter "(" [ arg { "," arg } ] ")" ] "}"
//	source = "input." name { "." name } | "secrets." name | "steps." N ".output"
//	filter = "default" | "optional" | "flag" | "json" | "join"
//	arg    = quoted string ('…' or "…") | "input." name     (the latter only as optional's 2nd arg)
//
// optional and flag produce whole tokens, so they must be the whole token. ${steps.N.output} (N a
// 0-based step index, no filter) exists only in the entries of runner.steps: the output of an
// earlier step.

// Template filters.
const (
	FilterDefault  = "default"
	FilterOptional = "optional"
	FilterFlag     = "flag"
	FilterJSON     = "json"
	FilterJoin     = "join"
)

// Limits on argv templates.
const (
	MaxArgvTokens   = 256
	MaxTemplateSize = 4096
)

var filterArity = map[string][2]int{ // min, max args
	FilterDefault:  {1, 1},
	FilterOptional: {1, 2},
	FilterFlag:     {1, 1},
	FilterJSON:     {0, 0},
	FilterJoin:     {1, 1},
}

// TemplateExpr is one ${…} expression.
type TemplateExpr struct {
	Source string   `json:"source"` // "input", "secrets" or "steps"
	Path   []string `json:"path"`   // input.a.b → [a b]; steps.2.output → [2 output]
	Filter string   `json:"filter,omitempty"`
	Args   []string `json:"args,omitempty"`
	Col    int      `json:"-"` // 0-based offset of "${" in the token
}

// Name returns the dotted path after the source, e.g. "title" for ${input.title}.
func (e *TemplateExpr) Name() string { return strings.Join(e.Path, ".") }

// MaxSteps is the most steps a runner.steps list may have.
const MaxSteps = 64

// Step returns the step index of a ${steps.N.output} expression, or an error when the path is not
// N.output with N a decimal index below MaxSteps.
func (e *TemplateExpr) Step() (int, error) {
	if len(e.Path) != 2 || e.Path[1] != "output" {
		return 0, fmt.Errorf("a step reference is steps.N.output")
	}
	n, err := strconv.Atoi(e.Path[0])
	if err != nil || n < 0 || n >= MaxSteps || strconv.Itoa(n) != e.Path[0] {
		return 0, fmt.Errorf("%q is not a step index (0 to %d)", e.Path[0], MaxSteps-1)
	}
	return n, nil
}

// TemplatePart is a literal run or an expression.
type TemplatePart struct {
	Literal string        `json:"literal,omitempty"`
	Expr    *TemplateExpr `json:"expr,omitempty"`
}

// TemplateToken is one parsed argv entry.
type TemplateToken struct {
	Raw   string         `json:"raw"`
	Parts []TemplatePart `json:"parts"`
}

// Whole returns the expression when the token is exactly one expression, else nil.
func (t TemplateToken) Whole() *TemplateExpr {
	if len(t.Parts) == 1 {
		return t.Parts[0].Expr
	}
	return nil
}

// Literal returns the token's text and true when it holds no expression.
func (t TemplateToken) Literal() (string, bool) {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Expr != nil {
			return "", false
		}
		b.WriteString(p.Literal)
	}
	return b.String(), true
}

// Exprs returns the token's expressions.
func (t TemplateToken) Exprs() []*TemplateExpr {
	var out []*TemplateExpr
	for _, p := range t.Parts {
		if p.Expr != nil {
			out = append(out, p.Expr)
		}
	}
	return out
}

// TemplateError is a template that does not parse.
type TemplateError struct {
	Col  int // 0-based offset in the token
	Msg  string
	Hint string
}

func (e *TemplateError) Error() string { return fmt.Sprintf("column %d: %s", e.Col+1, e.Msg) }

// ParseTemplateToken parses one argv template entry.
func ParseTemplateToken(raw string) (TemplateToken, error) {
	tok := TemplateToken{Raw: raw}
	if len(raw) > MaxTemplateSize {
		return tok, &TemplateError{Msg: fmt.Sprintf("token is %d bytes, more than %d", len(raw), MaxTemplateSize)}
	}
	if strings.IndexByte(raw, 0) >= 0 {
		return tok, &TemplateError{Col: strings.IndexByte(raw, 0), Msg: "token holds a NUL byte"}
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			tok.Parts = append(tok.Parts, TemplatePart{Literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(raw); {
		switch {
		case strings.HasPrefix(raw[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(raw[i:], "${"):
			end := strings.IndexByte(raw[i:], '}')
			if end < 0 {
				return tok, &TemplateError{Col: i, Msg: "unterminated ${", Hint: "close the expression with }"}
			}
			e, err := parseExpr(raw[i+2:i+end], i)
			if err != nil {
				return tok, err
			}
			flush()
			tok.Parts = append(tok.Parts, TemplatePart{Expr: e})
			i += end + 1
		default:
			lit.WriteByte(raw[i])
			i++
		}
	}
	flush()
	if len(tok.Parts) > 1 {
		for _, e := range tok.Exprs() {
			if e.Filter == FilterOptional || e.Filter == FilterFlag {
				return tok, &TemplateError{Col: e.Col, Msg: fmt.Sprintf("%s() yields whole argv tokens and must be the whole token", e.Filter),
					Hint: fmt.Sprintf("put ${… | %s(…)} in an argv entry of its own", e.Filter)}
			}
		}
	}
	return tok, nil
}

// ParseArgv parses every entry of an argv template; the error names the failing index.
func ParseArgv(argv []string) ([]TemplateToken, int, error) {
	if len(argv) > MaxArgvTokens {
		return nil, MaxArgvTokens, &TemplateError{Msg: fmt.Sprintf("argv has %d entries, more than %d", len(argv), MaxArgvTokens)}
	}
	out := make([]TemplateToken, 0, len(argv))
	for i, a := range argv {
		t, err := ParseTemplateToken(a)
		if err != nil {
			return nil, i, err
		}
		out = append(out, t)
	}
	return out, -1, nil
}

func parseExpr(body string, col int) (*TemplateExpr, error) {
	errAt := func(msg, hint string) error { return &TemplateError{Col: col, Msg: msg, Hint: hint} }
	src, filter, hasFilter := strings.Cut(body, "|")
	src = strings.TrimSpace(src)
	e := &TemplateExpr{Col: col}
	head, rest, ok := strings.Cut(src, ".")
	if !ok || (head != "input" && head != "secrets" && head != "steps") {
		return nil, errAt(fmt.Sprintf("unknown reference %q%s", src, didYouMean(nearest(head, []string{"input", "secrets", "steps"}))), "write ${input.NAME} for a tool input or ${secrets.NAME} for a secret")
	}
	e.Source = head
	e.Path = strings.Split(rest, ".")
	if head == "steps" {
		if _, err := e.Step(); err != nil {
			return nil, errAt(fmt.Sprintf("%q: %v", src, err), "write ${steps.N.output}, N the 0-based index of an earlier step")
		}
		if hasFilter {
			return nil, errAt(fmt.Sprintf("%q: a step's output takes no filter", src), "write ${steps.N.output}")
		}
		return e, nil
	}
	for _, p := range e.Path {
		if !IsName(p) {
			return nil, errAt(fmt.Sprintf("%q is not a valid name in %q", p, src), "names are letters, digits, _ and -, starting with a letter or _")
		}
	}
	if head == "secrets" && len(e.Path) != 1 {
		return nil, errAt(fmt.Sprintf("%q: a secret is one name", src), "write ${secrets.NAME}")
	}
	if !hasFilter {
		return e, nil
	}
	filter = strings.TrimSpace(filter)
	open := strings.IndexByte(filter, '(')
	if open < 0 || !strings.HasSuffix(filter, ")") {
		return nil, errAt(fmt.Sprintf("filter %q needs parentheses", filter), "write e.g. ${input.x | default('v')} or ${input.x | json()}")
	}
	e.Filter = strings.TrimSpace(filter[:open])
	arity, known := filterArity[e.Filter]
	if !known {
		return nil, errAt(fmt.Sprintf("unknown filter %q%s", e.Filter, didYouMean(nearest(e.Filter, []string{FilterDefault, FilterOptional, FilterFlag, "json", FilterJoin}))), "filters are default, optional, flag, json and join")
	}
	args, err := parseArgs(filter[open+1 : len(filter)-1])
	if err != nil {
		return nil, errAt(err.Error(), "quote each argument, e.g. optional('--title')")
	}
	if len(args) < arity[0] || len(args) > arity[1] {
		return nil, errAt(fmt.Sprintf("%s() takes %s, got %d", e.Filter, arityText(arity), len(args)), "")
	}
	for i, a := range args {
		if a.ref != "" {
			if e.Filter != FilterOptional || i != 1 {
				return nil, errAt(fmt.Sprintf("%s() argument %d must be a quoted string", e.Filter, i+1), "quote it")
			}
			if a.ref != "input."+e.Name() {
				return nil, errAt(fmt.Sprintf("optional()'s second argument %q must name the same input", a.ref), "drop it: ${input.x | optional('--x')}")
			}
			continue
		}
		e.Args = append(e.Args, a.text)
	}
	if e.Filter == FilterOptional && (e.Args[0] == "" || !strings.HasPrefix(e.Args[0], "-")) {
		return nil, errAt(fmt.Sprintf("optional(%q): the argument must be an option starting with -", e.Args[0]), "write optional('--name')")
	}
	if e.Filter == FilterFlag && e.Args[0] == "" {
		return nil, errAt("flag(''): the flag is empty", "write flag('--name')")
	}
	return e, nil
}

func arityText(a [2]int) string {
	switch {
	case a[0] == a[1] && a[0] == 0:
		return "no arguments"
	case a[0] == a[1] && a[0] == 1:
		return "one argument"
	}
	return fmt.Sprintf("%d to %d arguments", a[0], a[1])
}

type filterArg struct{ text, ref string }

func parseArgs(s string) ([]filterArg, error) {
	var out []filterArg
	s = strings.TrimSpace(s)
	for s != "" {
		var a filterArg
		switch q := s[0]; q {
		case '\'', '"':
			end := strings.IndexByte(s[1:], q)
			if end < 0 {
				return nil, fmt.Errorf("unterminated string %s", s)
			}
			a.text = s[1 : end+1]
			s = strings.TrimSpace(s[end+2:])
		default:
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			a.ref = strings.TrimSpace(s[:end])
			if !strings.HasPrefix(a.ref, "input.") {
				return nil, fmt.Errorf("argument %q is not a quoted string", a.ref)
			}
			s = s[end:]
		}
		out = append(out, a)
		if s == "" {
			break
		}
		if s[0] != ',' {
			return nil, fmt.Errorf("expected , between arguments, found %q", s)
		}
		s = strings.TrimSpace(s[1:])
		if s == "" {
			return nil, fmt.Errorf("trailing comma")
		}
	}
	return out, nil
}

// IsName reports whether s can name an input in a template (${input.NAME}): a letter or
// underscore, then letters, digits, underscores and hyphens.
func IsName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && (r == '-' || (r >= '0' && r <= '9')):
		default:
			return false
		}
	}
	return true
}
