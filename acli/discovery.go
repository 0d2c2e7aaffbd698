package acli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/clihost/clihost/manifest"
)

// RootHelp answers "help" (spec §6.2.1). Commands lists every runnable command by its full path
// ("pr list"), not only the first level, so one call shows everything an agent can run.
type RootHelp struct {
	Description string           `json:"description"`
	Commands    []CommandSummary `json:"commands"`
	Usage       string           `json:"usage"`
	Examples    []string         `json:"examples"`
}

// CommandSummary is one entry of a command list: the command path and the tool's title.
type CommandSummary struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// GroupHelp answers "help <group>", e.g. "help pr". The spec does not define it; it follows the
// command help's field names with the group's commands in place of arguments.
type GroupHelp struct {
	Command     string           `json:"command"`
	Description string           `json:"description"`
	Usage       string           `json:"usage"`
	Commands    []CommandSummary `json:"commands"`
}

// CommandHelp answers "help <command>" and "<command> --help" (spec §6.2.2).
type CommandHelp struct {
	Command     string     `json:"command"`
	Description string     `json:"description"`
	Usage       string     `json:"usage"`
	Arguments   []Argument `json:"arguments"`
	Examples    []string   `json:"examples,omitempty"`
}

// Argument describes one input of a command (spec §6.2.2). Type uses the spec's vocabulary (§7.2):
// string, integer, number, flag (a boolean), datetime (format date-time or date), array, plus object,
// which the spec does not list. Required, Positional (0-based slot for positional use), Short,
// Format and Items (the item type of an array) are where the spec is silent; the names follow the
// reference implementation.
type Argument struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Required    bool   `json:"required"`
	Default     any    `json:"default,omitempty"`
	Enum        []any  `json:"enum,omitempty"`
	Description string `json:"description,omitempty"`
	Positional  *int   `json:"positional,omitempty"`
	Short       string `json:"short,omitempty"`
	Format      string `json:"format,omitempty"`
	Items       string `json:"items,omitempty"`
	Examples    []any  `json:"examples,omitempty"`
}

// CommandSchema answers "schema <command>" (spec §6.3, with description added). The schemas are
// the TOOL.md's inputs and outputs, shared with the bundle: do not modify them.
type CommandSchema struct {
	Command      string         `json:"command"`
	Description  string         `json:"description"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema,omitempty"`
}

// SchemaList answers "schema" and "schema <group>". The spec does not define its shape.
type SchemaList struct {
	Commands []CommandSchema `json:"commands"`
}

// VersionInfo answers "version" (spec §6.4).
type VersionInfo struct {
	ACLIVersion    string         `json:"acli_version"`
	Implementation Implementation `json:"implementation"`
	Capabilities   Capabilities   `json:"capabilities"`
}

// Implementation names the implementation: clihost, serving bundle id@version.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Capabilities lists the top-level commands and the extensions (none).
type Capabilities struct {
	Commands   []string `json:"commands"`
	Extensions []string `json:"extensions"`
}

// rootUsage is the usage line of root help.
const rootUsage = "<command> [subcommand] [arguments] [--option value]"

// Help returns the help for topic: RootHelp when it is empty, GroupHelp for a group, CommandHelp
// for a command. An unknown topic is COMMAND_NOT_FOUND.
func Help(b *manifest.Bundle, topic []string) (any, *Error) {
	if b == nil || b.CLI == nil {
		return nil, noBundle()
	}
	if len(topic) == 0 {
		return rootHelp(b), nil
	}
	node, err := lookupNode(b, topic)
	if err != nil {
		return nil, err
	}
	name := strings.Join(topic, " ")
	if node.Children != nil {
		var cmds []CommandSummary
		var subs []string
		for _, c := range node.Children {
			subs = append(subs, c.Name)
		}
		for _, t := range b.Tools {
			if t.Tool != nil && len(t.Path) > len(topic) && slices.Equal(t.Path[:len(topic)], topic) {
				cmds = append(cmds, CommandSummary{Name: t.CommandPath(), Description: t.Tool.Name})
			}
		}
		return GroupHelp{Command: name, Description: fmt.Sprintf("Commands under '%s': %s", name, strings.Join(subs, ", ")),
			Usage: name + " <subcommand> [arguments] [--option value]", Commands: cmds}, nil
	}
	return commandHelp(entry(b, topic)), nil
}

func rootHelp(b *manifest.Bundle) RootHelp {
	h := RootHelp{Description: strings.TrimSpace(b.CLI.Description), Commands: []CommandSummary{}, Usage: rootUsage}
	var first string
	for _, t := range b.Tools {
		if t.Tool == nil {
			continue
		}
		if first == "" {
			first = t.CommandPath()
		}
		h.Commands = append(h.Commands, CommandSummary{Name: t.CommandPath(), Description: t.Tool.Name})
		if ex := toolExamples(t, 1); len(ex) > 0 && len(h.Examples) < 4 {
			h.Examples = append(h.Examples, ex[0])
		}
	}
	if first != "" {
		h.Examples = append(h.Examples, wordHelp+" "+first)
	}
	if h.Examples == nil {
		h.Examples = []string{wordHelp}
	}
	return h
}

func commandHelp(e *manifest.ToolEntry) CommandHelp {
	props := properties(e)
	req := requiredNames(e)
	pos := map[string]int{}
	usage := []string{e.CommandPath()}
	for i, r := range req {
		pos[r] = i
		u := "<" + r + ">"
		if i == len(req)-1 && typeOf(schemaOf(props[r])) == "array" {
			u += "..."
		}
		usage = append(usage, u)
	}
	if x := extraArray(e); x != "" {
		pos[x] = len(req)
		usage = append(usage, "[<"+x+">...]")
	}
	args := []Argument{}
	for _, k := range propertyOrder(e) {
		s := schemaOf(props[k])
		a := Argument{Name: "--" + kebab(k), Type: argType(s), Default: s["default"]}
		a.Enum, _ = s["enum"].([]any)
		a.Description, _ = s["description"].(string)
		a.Format, _ = s["format"].(string)
		a.Examples, _ = s["examples"].([]any)
		if x, ok := s["x-short"].(string); ok {
			a.Short = "-" + strings.TrimPrefix(x, "-")
		}
		if a.Type == "array" {
			a.Items = argType(schemaOf(s["items"]))
		}
		if i, ok := pos[k]; ok {
			a.Positional = &i
			a.Required = i < len(req) && req[i] == k
		}
		args = append(args, a)
	}
	if len(args) > 0 {
		usage = append(usage, "[options]")
	}
	return CommandHelp{Command: e.CommandPath(), Description: strings.TrimSpace(e.Tool.Description),
		Usage: strings.Join(usage, " "), Arguments: args, Examples: toolExamples(e, 0)}
}

// argType maps a property schema to the spec's argument types (see Argument).
func argType(s map[string]any) string {
	switch t := typeOf(s); t {
	case "boolean":
		return "flag"
	case "string", "":
		if f := s["format"]; f == "date-time" || f == "date" {
			return "datetime"
		}
		return "string"
	default:
		return t
	}
}

// Schema returns the schemas for topic: a SchemaList of every command (empty topic) or of a
// group's commands, or one CommandSchema. An unknown topic is COMMAND_NOT_FOUND.
func Schema(b *manifest.Bundle, topic []string) (any, *Error) {
	if b == nil || b.CLI == nil {
		return nil, noBundle()
	}
	if len(topic) > 0 {
		node, err := lookupNode(b, topic)
		if err != nil {
			return nil, err
		}
		if node.Children == nil {
			return commandSchema(entry(b, topic)), nil
		}
	}
	list := SchemaList{Commands: []CommandSchema{}}
	for _, t := range b.Tools {
		if t.Tool != nil && len(t.Path) > len(topic) && slices.Equal(t.Path[:len(topic)], topic) {
			list.Commands = append(list.Commands, commandSchema(t))
		}
	}
	return list, nil
}

func commandSchema(e *manifest.ToolEntry) CommandSchema {
	return CommandSchema{Command: e.CommandPath(), Description: strings.TrimSpace(e.Tool.Description),
		InputSchema: e.Tool.Inputs, OutputSchema: e.Tool.Outputs}
}

// Version returns the version data (spec §6.4): implementation clihost at "<bundle id>@<bundle
// version>", the bundle's top-level commands, and no extensions.
func Version(b *manifest.Bundle) any {
	v := VersionInfo{ACLIVersion: SpecVersion, Implementation: Implementation{Name: "clihost"},
		Capabilities: Capabilities{Commands: topLevelNames(b), Extensions: []string{}}}
	if b != nil && b.CLI != nil {
		v.Implementation.Version = b.CLI.ID + "@" + b.CLI.Version
	}
	if v.Capabilities.Commands == nil {
		v.Capabilities.Commands = []string{}
	}
	return v
}

func noBundle() *Error {
	return &Error{Code: ExecutionError, Message: "Execution failed: no bundle is loaded", Hint: "Check the server's bundle configuration"}
}

// toolExamples renders up to n (all when n <= 0) of the tool's TOOL.md examples as ACLI commands.
// Every input is written as an option (--name value), which always parses back to the same input.
// An example that cannot be written so (an unknown input, a null, a list item with a comma or
// surrounding spaces) is skipped.
func toolExamples(e *manifest.ToolEntry, n int) []string {
	var out []string
	for _, ex := range e.Tool.Examples {
		if n > 0 && len(out) == n {
			break
		}
		if s, ok := renderExample(e, ex.Input); ok {
			out = append(out, s)
		}
	}
	return out
}

func renderExample(e *manifest.ToolEntry, input any) (string, bool) {
	m, ok := input.(map[string]any)
	if !ok {
		return "", false
	}
	props := properties(e)
	for k := range m {
		if _, ok := props[k]; !ok {
			return "", false
		}
	}
	var sb strings.Builder
	sb.WriteString(e.CommandPath())
	for _, k := range propertyOrder(e) {
		v, ok := m[k]
		if !ok {
			continue
		}
		opt := "--" + kebab(k)
		switch v := v.(type) {
		case bool:
			sb.WriteString(" " + opt)
			if !v {
				sb.WriteString("=false")
			}
		case []any:
			var items []string
			for _, it := range v {
				s, ok := scalarText(it)
				if !ok || strings.Contains(s, ",") || s != strings.TrimSpace(s) || s == "" {
					return "", false
				}
				items = append(items, s)
			}
			writeOption(&sb, opt, strings.Join(items, ","))
		default:
			s, ok := scalarText(v)
			if !ok {
				return "", false
			}
			writeOption(&sb, opt, s)
		}
	}
	return sb.String(), true
}

// scalarText is the command-line text of a string, number, boolean or JSON object.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), true
	case bool:
		return fmt.Sprint(v), true
	case map[string]any:
		data, err := json.Marshal(v)
		return string(data), err == nil
	}
	return "", false
}

// writeOption appends " opt value", or " opt=value" when the value starts with "-" and so could be
// read as an option.
func writeOption(sb *strings.Builder, opt, value string) {
	if strings.HasPrefix(value, "-") {
		sb.WriteString(" " + opt + "=" + quoteArg(value))
		return
	}
	sb.WriteString(" " + opt + " " + quoteArg(value))
}

// quoteArg writes s so that Tokenize reads it back as one argument: bare when it is made of safe
// characters, else in single quotes (a ' inside closes the quotes, is escaped with \ and reopens them).
func quoteArg(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_./:@%+=,-", c) >= 0) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
