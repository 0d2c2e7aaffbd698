package usage

import (
	"reflect"
	"testing"
)

func TestParseArgs(t *testing.T) {
	cases := map[string][]Arg{
		"<name> <url> [flags]":                  {{Name: "name", Required: true}, {Name: "url", Required: true}},
		"[pattern] [flags]":                     {{Name: "pattern"}},
		"<name>... [flags]":                     {{Name: "name", Required: true, Variadic: true}},
		"[files...]":                            {{Name: "files", Variadic: true}},
		"[flags] [revision] [-- path...]":       {{Name: "revision"}, {Name: "path", Variadic: true, AfterDash: true}},
		"{<number> | <url> | <branch>} [flags]": {{Name: "number", Required: true}},
		"[<number> | <url> | <branch>] [flags]": {{Name: "number"}},
		"[command]":                             nil,
		"SUBCOMMAND [options]":                  {{Name: "subcommand", Required: true}},
		"NAME [--image=image] [--port=port]":    {{Name: "name", Required: true}},
		"(POD | TYPE/NAME) [-c CONTAINER] [flags] -- COMMAND [args...] [options]": {
			{Name: "pod", Required: true}, {Name: "command", Required: true, AfterDash: true}, {Name: "args", Variadic: true, AfterDash: true}},
		"[(-o|--output=)json|yaml] (TYPE[.VERSION][.GROUP] [NAME | -l label] | TYPE[.VERSION][.GROUP]/NAME ...) [flags] [options]": {
			{Name: "type", Required: true, Variadic: true}},
		"<src> <src>": {{Name: "src", Required: true}, {Name: "src_2", Required: true}},
	}
	for use, want := range cases {
		if got := ParseArgs(use); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %+v\nwant %+v", use, got, want)
		}
	}
}
