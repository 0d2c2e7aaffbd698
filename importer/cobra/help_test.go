package cobra

import (
	"reflect"
	"testing"
)

// Help texts written in the three layouts (Cobra's default template, gh's and kubectl's).
const cobraHelp = `Add a remote

Usage:
  gitx remote add <name> <url> [flags]

Flags:
      --branch string          default branch (default "main")
      --fetch                  fetch after adding (default true)
      --mirror[=true|false]    set up as mirror
      --label stringToString   labels (default [])
      --mode string[="fast"]   mode
      --old string             an old flag (DEPRECATED: use --branch)
      --timeout duration       fetch timeout (default 30s)

Global Flags:
  -R, --repo OWNER/REPO   repository OWNER/REPO
  -v, --verbose count     verbosity
`

const ghHelp = `List pull requests in a GitHub repository.

USAGE
  gh pr list [flags]

FLAGS
  -L, --limit int         Maximum number of items to fetch (default 30)
  -s, --state string      Filter by state: {open|closed|merged|all} (default "open")
      --json fields       Output JSON with the specified fields

INHERITED FLAGS
      --help                     Show help for command
  -R, --repo [HOST/]OWNER/REPO   Select another repository using the [HOST/]OWNER/REPO format

CORE COMMANDS
  list:        List pull requests
`

const kubectlHelp = `Display one or many resources.

Options:
    -A, --all-namespaces=false:
	If present, list the requested object(s) across all namespaces.

    --chunk-size=500:
	Return large lists in chunks.

    -f, --filename=[]:
	Filename, directory, or URL to files.

    -o, --output='':
	Output format. One of: (json, yaml, name).

    --request-timeout='0s':
	The length of time to wait.

    --wait=5m0s:
	How long to wait.

Usage:
  kubectl get [(-o|--output=)json|yaml] (TYPE[.VERSION][.GROUP] [NAME | -l label] | TYPE[.VERSION][.GROUP]/NAME ...) [flags] [options]
`

func TestParseHelp(t *testing.T) {
	type flag struct {
		Type    string
		Known   bool
		Default string
		Dep     bool
		Inh     bool
	}
	cases := []struct {
		name, text string
		usage      string
		flags      map[string]flag
	}{
		{"cobra", cobraHelp, "gitx remote add <name> <url> [flags]", map[string]flag{
			"branch": {"string", true, "main", false, false}, "fetch": {"bool", true, "true", false, false},
			"mirror": {"bool", true, "", false, false}, "label": {"stringToString", true, "[]", false, false},
			"mode": {"string", true, "", false, false}, "old": {"string", true, "", true, false},
			"timeout": {"duration", true, "30s", false, false}, "repo": {"OWNER/REPO", false, "", false, true},
			"verbose": {"count", true, "", false, true}}},
		{"gh", ghHelp, "gh pr list [flags]", map[string]flag{
			"limit": {"int", true, "30", false, false}, "state": {"string", true, "open", false, false},
			"json": {"fields", false, "", false, false}, "help": {"bool", true, "", false, true},
			"repo": {"[HOST/]OWNER/REPO", false, "", false, true}}},
		{"kubectl", kubectlHelp, "kubectl get [(-o|--output=)json|yaml] (TYPE[.VERSION][.GROUP] [NAME | -l label] | TYPE[.VERSION][.GROUP]/NAME ...) [flags] [options]", map[string]flag{
			"all-namespaces": {"bool", true, "false", false, false}, "chunk-size": {"int", true, "500", false, false},
			"filename": {"stringArray", true, "", false, false}, "output": {"string", true, "", false, false},
			"request-timeout": {"string", true, "0s", false, false}, "wait": {"duration", true, "5m0s", false, false}}},
	}
	for _, c := range cases {
		h := ParseHelp(c.text)
		if len(h.Usage) != 1 || h.Usage[0] != c.usage {
			t.Errorf("%s: usage %q", c.name, h.Usage)
		}
		got := map[string]flag{}
		for n, f := range h.Flags {
			got[n] = flag{f.Type, f.TypeKnown, f.Default, f.Deprecated, f.Inherited}
		}
		if !reflect.DeepEqual(got, c.flags) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.flags)
		}
	}
	if h := ParseHelp(ghHelp); !reflect.DeepEqual(h.Commands, []string{"list"}) || h.Description != "List pull requests in a GitHub repository." {
		t.Errorf("gh commands %q, description %q", h.Commands, h.Description)
	}
	if u := ParseHelp(kubectlHelp).Flags["output"].Usage; u != "Output format. One of: (json, yaml, name)." {
		t.Errorf("kubectl usage %q", u)
	}
}

func TestFlagProperty(t *testing.T) {
	cases := []struct {
		f          Flag
		typ, items string
		argv       string
	}{
		{Flag{Name: "s", Type: "string", TypeKnown: true}, "string", "", "${input.s | optional('--s=')}"},
		{Flag{Name: "n", Type: "int", TypeKnown: true}, "integer", "", "${input.n | optional('--n=')}"},
		{Flag{Name: "u", Type: "uint", TypeKnown: true}, "integer", "", "${input.u | optional('--u=')}"},
		{Flag{Name: "f", Type: "float", TypeKnown: true}, "number", "", "${input.f | optional('--f=')}"},
		{Flag{Name: "b", Type: "bool", TypeKnown: true}, "boolean", "", "${input.b | flag('--b')}"},
		{Flag{Name: "t", Type: "bool", TypeKnown: true, Default: "true"}, "boolean", "", "--t=${input.t}"},
		{Flag{Name: "ss", Type: "strings", TypeKnown: true}, "array", "string", "--ss=${input.ss | join(',')}"},
		{Flag{Name: "sa", Type: "stringArray", TypeKnown: true}, "array", "string", "${input.sa | optional('--sa=')}"},
		{Flag{Name: "is", Type: "ints", TypeKnown: true}, "array", "integer", "--is=${input.is | join(',')}"},
		{Flag{Name: "m", Type: "stringToString", TypeKnown: true}, "object", "", "${input.m | optional('--m=')}"},
		{Flag{Name: "d", Type: "duration", TypeKnown: true}, "string", "", "${input.d | optional('--d=')}"},
		{Flag{Name: "c", Type: "count", TypeKnown: true}, "integer", "", "${input.c | optional('--c=')}"},
		{Flag{Name: "ip", Type: "ip", TypeKnown: true}, "string", "", "${input.ip | optional('--ip=')}"},
		{Flag{Name: "r", Type: "OWNER/REPO"}, "string", "", "${input.r | optional('--r=')}"},
	}
	for _, c := range cases {
		p := FlagProperty(&c.f)
		items := ""
		if p.Schema.Items != nil {
			items = p.Schema.Items.Type
		}
		if p.Schema.Type != c.typ || items != c.items || p.Argv != c.argv {
			t.Errorf("%s (%s): %v %q", c.f.Name, c.f.Type, p.Schema, p.Argv)
		}
	}
}
