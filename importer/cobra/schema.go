package cobra

import (
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clihost/clihost/importer/cobra/usage"
	"github.com/clihost/clihost/importer/pathinput"
)

// Property is the JSON Schema of one flag or positional, and the argv template entry that puts it
// back on the command line.
type Property struct {
	Schema *jsonschema.Schema
	Argv   string
}

// FlagProperty maps a flag's pflag type to JSON Schema (as cobra-mcp-bridge.md's table says) and
// to an argv entry: --name=VALUE for scalars, --name for a true bool (--name=VALUE when the default
// is true, so false can be passed), slices joined with commas into one --name=a,b, arrays
// (stringArray) as one --name=item per item, maps as one --name=key=value per pair. The default is
// told in the description only: a declared default would be filled in by the host and passed on
// every call.
func FlagProperty(f *Flag) Property {
	desc := f.Usage
	if desc == "" {
		desc = f.Name
	}
	s := &jsonschema.Schema{}
	opt := fmt.Sprintf("${input.%s | optional('--%s=')}", f.Name, f.Name)
	argv := opt
	typ := f.Type
	if !f.TypeKnown {
		typ = "string"
	}
	switch typ {
	case "bool":
		s.Type = "boolean"
		argv = fmt.Sprintf("${input.%s | flag('--%s')}", f.Name, f.Name)
		if f.Default == "true" {
			argv = fmt.Sprintf("--%s=${input.%s}", f.Name, f.Name)
		}
	case "int", "int8", "int16", "int32", "int64":
		s.Type = "integer"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		s.Type, s.Minimum = "integer", jsonschema.Ptr(0.0)
	case "count":
		s.Type, s.Minimum = "integer", jsonschema.Ptr(0.0)
		desc += " (a count: the number of times the flag is given)"
	case "float", "float32", "float64":
		s.Type = "number"
	case "duration":
		s.Type, s.Pattern = "string", usage.DurationPattern
		desc += " (a duration such as 30s, 5m or 1h30m)"
		s.Examples = []any{"30s", "5m", "1h"}
	case "ip":
		s.Type = "string"
		s.AnyOf = []*jsonschema.Schema{{Format: "ipv4"}, {Format: "ipv6"}}
	case "ipNet":
		s.Type, s.Pattern = "string", `^[0-9A-Fa-f:.]+/[0-9]{1,3}$`
		desc += " (an address range in CIDR notation)"
	case "ipMask":
		s.Type = "string"
	case "bytesHex":
		s.Type, s.Pattern = "string", `^([0-9A-Fa-f]{2})*$`
	case "strings", "stringSlice", "ipSlice", "durationSlice":
		s.Type, s.Items = "array", &jsonschema.Schema{Type: "string"}
		argv = fmt.Sprintf("--%s=${input.%s | join(',')}", f.Name, f.Name)
	case "ints", "intSlice", "uints", "uintSlice", "int32Slice", "int64Slice":
		s.Type, s.Items = "array", &jsonschema.Schema{Type: "integer"}
		argv = fmt.Sprintf("--%s=${input.%s | join(',')}", f.Name, f.Name)
	case "float32Slice", "float64Slice":
		s.Type, s.Items = "array", &jsonschema.Schema{Type: "number"}
		argv = fmt.Sprintf("--%s=${input.%s | join(',')}", f.Name, f.Name)
	case "bools", "boolSlice":
		s.Type, s.Items = "array", &jsonschema.Schema{Type: "boolean"}
		argv = fmt.Sprintf("--%s=${input.%s | join(',')}", f.Name, f.Name)
	case "stringArray":
		s.Type, s.Items = "array", &jsonschema.Schema{Type: "string"}
	case "stringToString", "stringToInt", "stringToInt64":
		// An object; each entry is passed as its own --name=key=value (pflag merges them).
		value := "string"
		if typ != "stringToString" {
			value = "integer"
		}
		s.Type = "object"
		s.AdditionalProperties = &jsonschema.Schema{Type: value}
		s.PropertyNames = &jsonschema.Schema{Pattern: "^[^=,]+$"}
		desc += " (key=value pairs)"
	default:
		s.Type = "string"
		if f.Type != "" && f.Type != "string" && f.Type != "bool" {
			desc += fmt.Sprintf(" (value: %s)", f.Type)
		}
	}
	if d := shownDefault(f); d != "" {
		desc += fmt.Sprintf(" (default %s)", d)
	}
	if typ == "string" || typ == "strings" || typ == "stringSlice" || typ == "stringArray" {
		valueName := ""
		if !f.TypeKnown {
			valueName = f.Type
		}
		pathinput.Mark(s, f.Name, valueName)
	}
	s.Description = desc
	return Property{Schema: s, Argv: argv}
}

// shownDefault is the default worth telling: none for zero values.
func shownDefault(f *Flag) string {
	switch f.Default {
	case "", "[]", "0", "false", "0s", "map[]":
		return ""
	}
	if f.Type == "string" || !f.TypeKnown {
		return fmt.Sprintf("%q", f.Default)
	}
	return f.Default
}

// ArgProperty is the schema and argv entry of a positional: a string, or an array of strings for
// a variadic one (one argument per item).
func ArgProperty(a usage.Arg, command string) Property {
	desc := fmt.Sprintf("%s argument of %s", a.Name, command)
	s := &jsonschema.Schema{Type: "string", Description: desc}
	if a.Variadic {
		s = &jsonschema.Schema{Type: "array", Items: &jsonschema.Schema{Type: "string"}, Description: desc + " (one or more values)"}
		if a.Required {
			s.MinItems = jsonschema.Ptr(1)
		}
	}
	pathinput.Mark(s, a.Name)
	return Property{Schema: s, Argv: fmt.Sprintf("${input.%s}", a.Name)}
}

// dummy is a value of the flag's type, used to satisfy a required flag while listing the others.
func dummy(f *Flag) (string, bool) {
	switch f.Type {
	case "bool":
		return "", false
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count", "ints", "uints", "float", "float32", "float64":
		return "1", true
	case "duration":
		return "1s", true
	case "ip":
		return "127.0.0.1", true
	case "ipNet":
		return "10.0.0.0/8", true
	case "stringToString", "stringToInt", "stringToInt64":
		return "a=1", true
	case "bools":
		return "true", true
	}
	if strings.Contains(f.Type, "Slice") && !strings.HasPrefix(f.Type, "string") {
		return "1", true
	}
	return "x", true
}
