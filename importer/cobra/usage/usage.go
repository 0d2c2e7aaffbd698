// Package usage reads Cobra usage lines ("<name> <url> [flags]") and holds the schema patterns
// Cobra flag types need. It is a leaf (only the standard library), so that cobramcp, which is
// linked into other Cobra programs, stays light (issue 13): the Cobra importer and cobramcp both
// use it.
package usage

import (
	"regexp"
	"strings"
)

// DurationPattern is the JSON Schema pattern of a Go duration ("30s", "1h30m", "-5m", "0").
const DurationPattern = `^(0|-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

// Arg is a positional argument read from a usage line.
type Arg struct {
	Name      string // the property name: the placeholder's text (all-capitals names lower-cased)
	Required  bool   // written <name>, NAME or (A | B)
	Variadic  bool   // written name..., [name...]
	AfterDash bool   // written after a literal "--" (kubectl exec POD -- COMMAND)
}

// placeholderWords are usage tokens that stand for subcommands or flags, not positionals.
var placeholderWords = map[string]bool{"flags": true, "options": true, "global flags": true}

// commandWords stand for a subcommand when written [command] or <command> before any "--".
var commandWords = map[string]bool{"command": true, "subcommand": true}

// ParseArgs reads the positionals of a usage line after the command path: <required>,
// [optional], name... (variadic), alternatives (A | B) and {A | B} as one argument, and skips
// [flags], [options], [command] and option groups such as [-c CONTAINER] or [(-o|--output=)json].
func ParseArgs(rest string) []Arg {
	var out []Arg
	seen := map[string]int{}
	afterDash := false
	for _, g := range groups(rest) {
		if g == "--" {
			afterDash = true
			continue
		}
		inner := g
		optional := false
		for len(inner) > 1 && (inner[0] == '[' || inner[0] == '(' || inner[0] == '{' || inner[0] == '<') {
			close := closer(inner[0])
			end := strings.LastIndexByte(inner, close)
			if end < 0 {
				break
			}
			if inner[0] == '[' {
				optional = true
			}
			suffix := inner[end+1:]
			inner = strings.TrimSpace(inner[1:end]) + suffix
		}
		if rest, ok := strings.CutPrefix(inner, "-- "); ok { // [-- path...]
			afterDash, inner = true, strings.TrimSpace(rest)
		}
		if inner == "" || strings.HasPrefix(inner, "-") || strings.HasPrefix(strings.TrimLeft(inner, "[({<"), "-") || placeholderWords[strings.ToLower(inner)] ||
			(inner != g && !afterDash && commandWords[strings.ToLower(inner)]) {
			continue
		}
		variadic := strings.Contains(inner, "...")
		first := inner
		if i := strings.IndexAny(first, "|"); i >= 0 {
			first = first[:i]
		}
		if f := strings.Fields(first); len(f) > 0 {
			first = f[0]
		}
		name := argName(first)
		if name == "" || placeholderWords[name] {
			continue
		}
		if n := seen[name]; n > 0 {
			seen[name] = n + 1
			name = name + "_" + string(rune('1'+n))
		} else {
			seen[name] = 1
		}
		out = append(out, Arg{Name: name, Required: !optional, Variadic: variadic, AfterDash: afterDash})
	}
	return out
}

var (
	bracketed = regexp.MustCompile(`\[[^\]]*\]|\([^)]*\)|\{[^}]*\}`)
	nonName   = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
)

// argName turns a placeholder's text into a property name: "<name>" → name, "TYPE[.VERSION]" →
// type, "TYPE/NAME" → type_name, "file..." → file.
func argName(s string) string {
	s = bracketed.ReplaceAllString(s, "")
	s = strings.Trim(s, "<>[](){}.")
	s = strings.Trim(nonName.ReplaceAllString(s, "_"), "_-")
	if s != "" && strings.ToUpper(s) == s {
		s = strings.ToLower(s)
	}
	return s
}

func closer(open byte) byte {
	switch open {
	case '[':
		return ']'
	case '(':
		return ')'
	case '{':
		return '}'
	}
	return '>'
}

// groups splits a usage line into words, keeping bracketed groups ([a b], (a | b), {a|b}, <a b>)
// whole, with any suffix such as "..." attached.
func groups(s string) []string {
	var out []string
	depth := 0
	start := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '[' || c == '(' || c == '{' || c == '<':
			if start < 0 {
				start = i
			}
			depth++
		case c == ']' || c == ')' || c == '}' || c == '>':
			if depth > 0 {
				depth--
			}
		case c == ' ' || c == '\t':
			if depth == 0 && start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}
