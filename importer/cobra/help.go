package cobra

import (
	"regexp"
	"strings"
)

// Help is what a command's --help output says, in any of the layouts the importer tolerates:
// Cobra's default template (Usage:, Flags:, Global Flags:, Available Commands:), gh's upper-case
// sections (USAGE, FLAGS, INHERITED FLAGS, CORE COMMANDS, …) and kubectl's templates (Options:
// with "--name=default:" lines and the usage on the next lines, no type names).
type Help struct {
	Description string           // the text before the first section (Long, else Short)
	Usage       []string         // the lines of the usage section, trimmed
	Flags       map[string]*Flag // by long name
	Commands    []string         // the names listed in the command sections
}

// Flag is one flag as the help text and __complete show it.
type Flag struct {
	Name       string
	Short      string
	Type       string // the pflag type name as shown ("string", "strings", "duration", …); "bool" for none
	TypeKnown  bool   // Type is a pflag type name, not a value name taken from the usage's backquotes
	Default    string // the default as shown, unquoted; "" when none is shown
	Usage      string
	Deprecated bool
	Required   bool // set from __complete
	Inherited  bool // listed under Global Flags / INHERITED FLAGS
}

// shownTypes are the type names pflag prints in FlagUsages (after UnquoteUsage's renames).
var shownTypes = map[string]bool{
	"string": true, "int": true, "int8": true, "int16": true, "int32": true, "uint": true, "uint8": true,
	"uint16": true, "uint32": true, "float": true, "float32": true, "duration": true, "strings": true,
	"stringArray": true, "ints": true, "uints": true, "int32Slice": true, "int64Slice": true,
	"float32Slice": true, "float64Slice": true, "bools": true, "durationSlice": true,
	"stringToString": true, "stringToInt": true, "stringToInt64": true, "count": true, "ip": true,
	"ipMask": true, "ipNet": true, "ipSlice": true, "bytesHex": true, "bytesBase64": true,
	// unrenamed spellings, in case a CLI prints Value.Type() itself
	"int64": true, "uint64": true, "float64": true, "stringSlice": true, "intSlice": true, "uintSlice": true, "boolSlice": true,
}

var (
	// pflag: "  -s, --name type   usage (default x)"; bool has no type; NoOptDefVal as [=x].
	pflagLine = regexp.MustCompile(`^\s+(?:-([^-\s]),\s+)?--([A-Za-z0-9][A-Za-z0-9_.:-]*)(\[=[^\]]*\])?(?: (\S+))?(?:\s{2,}(.*))?$`)
	// kubectl: "    -A, --all-namespaces=false:" with the usage on the following lines.
	kubectlLine  = regexp.MustCompile(`^\s+(?:-([^-\s]),\s+)?--([A-Za-z0-9][A-Za-z0-9_.:-]*)=(.*):$`)
	defaultPart  = regexp.MustCompile(`\s*\(default (.*)\)\s*$`)
	backquoted   = regexp.MustCompile("`([^`]+)`")
	commandEntry = regexp.MustCompile(`^\s+([A-Za-z0-9][A-Za-z0-9_.-]*):?(?:\s{2,}|\s*$)`)
)

// ParseHelp reads one help text.
func ParseHelp(text string) *Help {
	h := &Help{Flags: map[string]*Flag{}}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	section := ""
	var desc []string
	var last *Flag
	kubectlUsage := false
	for _, raw := range lines {
		line := strings.TrimRight(raw, " \t")
		if name, ok := sectionHeader(line); ok {
			section, last, kubectlUsage = name, nil, false
			if i := strings.Index(line, ":"); name == "USAGE" && i > 0 && strings.TrimSpace(line[i+1:]) != "" {
				h.Usage = append(h.Usage, strings.TrimSpace(line[i+1:])) // "Usage: prog [flags]" on one line
			}
			continue
		}
		switch {
		case section == "":
			desc = append(desc, line)
		case strings.Contains(section, "USAGE"):
			if t := strings.TrimSpace(line); t != "" {
				h.Usage = append(h.Usage, t)
			}
		case strings.Contains(section, "FLAGS") || strings.Contains(section, "OPTIONS"):
			inherited := strings.Contains(section, "GLOBAL") || strings.Contains(section, "INHERITED") || strings.Contains(section, "PASSED TO ANY")
			if m := kubectlLine.FindStringSubmatch(line); m != nil {
				f := &Flag{Name: m[2], Short: m[1], Inherited: inherited}
				f.Type, f.Default = kubectlType(m[3])
				f.TypeKnown = f.Type != ""
				if f.Type == "" {
					f.Type = "string"
				}
				h.add(f)
				last, kubectlUsage = f, true
				continue
			}
			if m := pflagLine.FindStringSubmatch(line); m != nil && !kubectlUsage {
				f := &Flag{Name: m[2], Short: m[1], Usage: strings.TrimSpace(m[5]), Inherited: inherited}
				typ := m[4]
				if strings.HasPrefix(typ, "[=") { // "--name[=x] type" on old pflag versions
					typ = ""
				}
				typ = strings.TrimSuffix(typ, m[3])
				if i := strings.Index(typ, "[="); i > 0 {
					typ = typ[:i]
				}
				switch {
				case typ == "" || strings.HasPrefix(m[3], "[=true|false]") || m[3] == "[=true|false]":
					f.Type, f.TypeKnown = "bool", true
				case shownTypes[typ]:
					f.Type, f.TypeKnown = typ, true
				default:
					f.Type = typ // a value name from backquotes, or a custom Value type
				}
				h.add(f)
				last = f
				continue
			}
			t := strings.TrimSpace(line)
			if last != nil && t != "" && !strings.HasPrefix(t, "-") {
				if last.Usage != "" {
					last.Usage += " "
				}
				last.Usage += t // a wrapped usage, or kubectl's usage lines
				continue
			}
			if t == "" && !kubectlUsage {
				last = nil
			}
		case strings.Contains(section, "COMMANDS"):
			if m := commandEntry.FindStringSubmatch(line); m != nil {
				h.Commands = append(h.Commands, m[1])
			}
		}
	}
	for _, f := range h.Flags {
		f.finish()
	}
	h.Description = strings.TrimSpace(strings.Join(desc, "\n"))
	return h
}

func (h *Help) add(f *Flag) {
	if _, dup := h.Flags[f.Name]; !dup {
		h.Flags[f.Name] = f
	}
}

// finish takes the default and the deprecation mark out of the usage text.
func (f *Flag) finish() {
	if strings.Contains(f.Usage, "DEPRECATED") || strings.Contains(strings.ToLower(f.Usage), "(deprecated") {
		f.Deprecated = true
	}
	if m := defaultPart.FindStringSubmatchIndex(f.Usage); m != nil {
		d := f.Usage[m[2]:m[3]]
		f.Usage = strings.TrimSpace(f.Usage[:m[0]])
		if len(d) >= 2 && d[0] == '"' && d[len(d)-1] == '"' {
			d = d[1 : len(d)-1]
		}
		f.Default = d
	}
	f.Usage = backquoted.ReplaceAllString(f.Usage, "$1")
}

// kubectlType infers a flag's type from kubectl's "name=default" (kubectl prints no type names).
func kubectlType(def string) (typ, value string) {
	switch {
	case def == "true" || def == "false":
		return "bool", def
	case strings.HasPrefix(def, "'") && strings.HasSuffix(def, "'") && len(def) >= 2:
		return "string", def[1 : len(def)-1]
	case strings.HasPrefix(def, "[") && strings.HasSuffix(def, "]"):
		return "stringArray", strings.Trim(def, "[]")
	case durationValue.MatchString(def):
		return "duration", def
	case intValue.MatchString(def):
		return "int", def
	case floatValue.MatchString(def):
		return "float", def
	}
	return "", def
}

var (
	durationValue = regexp.MustCompile(`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	intValue      = regexp.MustCompile(`^-?[0-9]+$`)
	floatValue    = regexp.MustCompile(`^-?[0-9]*\.[0-9]+$`)
)

// sectionHeader recognises "Usage:", "Global Flags:", "Basic Commands (Beginner):" (Cobra, kubectl)
// and "USAGE", "INHERITED FLAGS" (gh); it returns the upper-cased title.
func sectionHeader(line string) (string, bool) {
	if line == "" || line[0] == ' ' || line[0] == '\t' {
		return "", false
	}
	if i := strings.Index(line, ":"); i > 0 && (i == len(line)-1 || strings.EqualFold(line[:i], "usage")) &&
		(len(strings.Fields(line)) <= 5 || strings.Contains(strings.ToLower(line), "options")) {
		return strings.ToUpper(line[:i]), true
	}
	if strings.ToUpper(line) == line && strings.ContainsAny(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && len(line) < 60 {
		return line, true
	}
	return "", false
}
