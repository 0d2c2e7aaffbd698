package argv

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

func parse(t *testing.T, tmpl ...string) []manifest.TemplateToken {
	t.Helper()
	toks, _, err := manifest.ParseArgv(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

func input(t *testing.T, js string) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestExpand(t *testing.T) {
	secrets := func(n string) (string, bool) {
		if n == "TOKEN" {
			return "s3cr3t", true
		}
		return "", false
	}
	cases := []struct {
		name  string
		tmpl  []string
		input string
		want  []string
	}{
		{"literal", []string{"pr", "list"}, `{}`, []string{"pr", "list"}},
		{"whole", []string{"view", "${input.n}"}, `{"n": 42}`, []string{"view", "42"}},
		{"absent drops", []string{"view", "${input.n}"}, `{}`, []string{"view"}},
		{"null drops", []string{"view", "${input.n}"}, `{"n": null}`, []string{"view"}},
		{"array spreads", []string{"add", "--", "${input.files}"}, `{"files": ["a.txt", "-b.txt"]}`, []string{"add", "--", "a.txt", "-b.txt"}},
		{"default", []string{"${input.base | default('main')}"}, `{}`, []string{"main"}},
		{"default given", []string{"${input.base | default('main')}"}, `{"base": "dev"}`, []string{"dev"}},
		{"optional", []string{"${input.title | optional('--title')}"}, `{"title": "hi there"}`, []string{"--title", "hi there"}},
		{"optional absent", []string{"${input.title | optional('--title')}"}, `{}`, nil},
		{"optional array repeats", []string{"${input.l | optional('--label')}"}, `{"l": ["a", "b"]}`, []string{"--label", "a", "--label", "b"}},
		{"optional with =", []string{"${input.d | optional('--dry-run=')}"}, `{"d": "server"}`, []string{"--dry-run=server"}},
		{"glued optional value may start with dash", []string{"${input.n | optional('--count=')}"}, `{"n": -5}`, []string{"--count=-5"}},
		{"flag true", []string{"${input.draft | flag('--draft')}"}, `{"draft": true}`, []string{"--draft"}},
		{"flag false", []string{"${input.draft | flag('--draft')}"}, `{"draft": false}`, nil},
		{"flag string true is not true", []string{"${input.draft | flag('--draft')}"}, `{"draft": "true"}`, nil},
		{"json", []string{"--argjson", "doc", "${input.doc | json()}"}, `{"doc": {"a": [1, "x"]}}`, []string{"--argjson", "doc", `{"a":[1,"x"]}`}},
		{"join", []string{"--json", "${input.f | join(',')}"}, `{"f": ["number", "title"]}`, []string{"--json", "number,title"}},
		{"object entries, sorted", []string{"${input.l | optional('--label')}"}, `{"l": {"team": "core", "app": "web", "n": 3}}`,
			[]string{"--label", "app=web", "--label", "n=3", "--label", "team=core"}},
		{"object entries with =", []string{"${input.l | optional('--label=')}"}, `{"l": {"b": "2", "a": "1"}}`, []string{"--label=a=1", "--label=b=2"}},
		{"object joined", []string{"--labels=${input.l | join(',')}"}, `{"l": {"b": "2", "a": "1"}}`, []string{"--labels=a=1,b=2"}},
		{"object whole entry", []string{"--", "${input.l}"}, `{"l": {"b": "2", "a": "1"}}`, []string{"--", "a=1", "b=2"}},
		{"embedded", []string{"--since=${input.d}"}, `{"d": "2026-01-01"}`, []string{"--since=2026-01-01"}},
		{"embedded absent drops entry", []string{"x", "--since=${input.d}"}, `{}`, []string{"x"}},
		{"embedded default", []string{"--base=${input.b | default('main')}"}, `{}`, []string{"--base=main"}},
		{"embedded two", []string{"release-${input.v}-${input.arch | default('x64')}"}, `{"v": "1.2.3"}`, []string{"release-1.2.3-x64"}},
		{"nested", []string{"${input.o.depth}"}, `{"o": {"depth": 3}}`, []string{"3"}},
		{"secret", []string{"--token", "${secrets.TOKEN}"}, `{}`, []string{"--token", "s3cr3t"}},
		{"float", []string{"--x", "${input.f}"}, `{"f": 1.5e3}`, []string{"--x", "1.5e3"}},
		{"bool", []string{"--x", "${input.b}"}, `{"b": false}`, []string{"--x", "false"}},
		{"glued to its option", []string{"--title=${input.t}"}, `{"t": "-dash"}`, []string{"--title=-dash"}},
		{"glued to a short option", []string{"-t${input.t}"}, `{"t": "-dash"}`, []string{"-t-dash"}},
		{"mixed entry led by the manifest's default", []string{"${input.a | default('-x')}${input.b}"}, `{"b": "y"}`, []string{"-xy"}},
		{"mixed entry led by a later value", []string{"${input.a}${input.b}"}, `{"a": "", "b": "x"}`, []string{"x"}},
		{"absent default is the manifest's", []string{"${input.a | default('-')}"}, `{}`, []string{"-"}},
		{"after --", []string{"--", "${input.q}"}, `{"q": "--help"}`, []string{"--", "--help"}},
		{"metacharacters verbatim", []string{"--", "${input.q}"}, `{"q": "$(touch x); rm -rf / | cat > y && \u0060id\u0060 ${input.q} 'a\"b' \n\t\u202e"}`,
			[]string{"--", "$(touch x); rm -rf / | cat > y && `id` ${input.q} 'a\"b' \n\t\u202e"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Expand(parse(t, c.tmpl...), input(t, c.input), secrets)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestExpandRefuses(t *testing.T) {
	cases := []struct {
		name  string
		code  errcode.Code
		ptr   string
		tmpl  []string
		input string
	}{
		{"dash positional", "input_invalid", "/q", []string{"search", "${input.q}"}, `{"q": "--exec=rm"}`},
		{"dash in array", "input_invalid", "/files/1", []string{"add", "${input.files}"}, `{"files": ["a", "-rf"]}`},
		{"dash at start of mixed entry", "input_invalid", "/n", []string{"get", "${input.n}.txt"}, `{"n": "-x"}`},
		{"dash via json", "input_invalid", "/n", []string{"${input.n | json()}"}, `{"n": -1}`},
		{"dash after a literal option", "input_invalid", "/t", []string{"--title", "${input.t}"}, `{"t": "-dash"}`},
		{"dash after a literal short option", "input_invalid", "/path", []string{"-1", "${input.path}"}, `{"path": "--version"}`},
		{"dash as optional()'s separate value", "input_invalid", "/n", []string{"${input.n | optional('--count')}"}, `{"n": -5}`},
		{"dash in optional()'s repeated values", "input_invalid", "/l/1", []string{"${input.l | optional('--label')}"}, `{"l": ["a", "--help"]}`},
		{"dash via join after an option", "input_invalid", "/l", []string{"--json", "${input.l | join(',')}"}, `{"l": ["-x", "y"]}`},
		{"dash via default given after an option", "input_invalid", "/b", []string{"--base", "${input.b | default('main')}"}, `{"b": "--exec=x"}`},
		{"dash leading a mixed entry from a later value", "input_invalid", "/b", []string{"${input.a}${input.b}"}, `{"a": "", "b": "-x"}`},
		{"dash leading a mixed entry after an option", "input_invalid", "/n", []string{"-o", "${input.n}.txt"}, `{"n": "-x"}`},
		{"NUL", "input_invalid", "/t", []string{"--title", "${input.t}"}, `{"t": "a\u0000b"}`},
		{"too long", "input_invalid", "/t", []string{"--title", "${input.t}"}, `{"t": "` + strings.Repeat("a", MaxArgLength+1) + `"}`},
		{"secret missing", "secret_missing", "", []string{"${secrets.NOPE}"}, `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Expand(parse(t, c.tmpl...), input(t, c.input), nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != c.code || e.Pointer != c.ptr || e.Message == "" {
				t.Fatalf("err = %#v, want code %s at %q", err, c.code, c.ptr)
			}
			if c.code == "input_invalid" && e.Hint == "" && c.name != "dash via json" {
				t.Errorf("no hint: %v", e)
			}
		})
	}
	var many []string
	for i := 0; i < 10; i++ {
		many = append(many, "--x", "${input.v}")
	}
	big := `{"v": "` + strings.Repeat("b", MaxArgLength-1) + `"}`
	if _, err := Expand(parse(t, many...), input(t, big), nil); err == nil || !strings.Contains(err.Error(), "add up to") {
		t.Fatalf("total length: %v", err)
	}
}

func TestExpandSteps(t *testing.T) {
	v := Values{Input: input(t, `{"q": "x y", "tags": ["a", "b"]}`), Steps: []string{"out put", "-dash", ""}}
	got, err := ExpandValues(parse(t, "${steps.0.output}", "--", "${steps.1.output}", "pre:${steps.1.output}", "${steps.2.output}", "${input.q}"), v)
	want := []string{"out put", "--", "-dash", "pre:-dash", "", "x y"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q %v, want %q", got, err, want)
	}
	// A step output starting with '-' is refused wherever it stands alone, like a caller's value.
	for _, tmpl := range [][]string{{"${steps.1.output}"}, {"${steps.1.output}x"}, {"--input", "${steps.1.output}"}, {"${input.tags | default('')}${steps.1.output}"}} {
		_, err := ExpandValues(parse(t, tmpl...), Values{Input: map[string]any{}, Steps: v.Steps})
		var ae *Error
		if !errors.As(err, &ae) || ae.Code != "input_invalid" || !strings.Contains(ae.Message, "step 1") {
			t.Errorf("%s: %v", tmpl, err)
		}
	}
	// A reference to a step that has not run is a bug lint prevents; it is an error, not a panic.
	if _, err := ExpandValues(parse(t, "${steps.5.output}"), v); err == nil {
		t.Error("missing step output expanded")
	}
}

func TestExpandString(t *testing.T) {
	secrets := func(n string) (string, bool) { return "s3", n == "T" }
	v := Values{Input: input(t, `{"q": "x y", "tags": ["a", "b"], "o": {"k": 1}}`), Secrets: secrets, Steps: []string{"prev"}}
	for _, c := range []struct {
		tmpl, want string
		present    bool
	}{
		{"${input.q}", "x y", true},
		{"-${input.q}-", "-x y-", true},
		{"${input.tags}", "a,b", true},
		{"${input.tags | join(' ')}", "a b", true},
		{"${input.o | json()}", `{"k":1}`, true},
		{"${input.none | default('d')}", "d", true},
		{"${input.none}", "", false},
		{"a ${input.none} b", "", false},
		{"${secrets.T}/${steps.0.output}", "s3/prev", true},
		{"$${x}", "${x}", true},
	} {
		tok, err := manifest.ParseTemplateToken(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		s, present, err := ExpandString(tok, v)
		if err != nil || s != c.want || present != c.present {
			t.Errorf("%s: %q %v %v, want %q %v", c.tmpl, s, present, err, c.want, c.present)
		}
	}
	tok, _ := manifest.ParseTemplateToken("${secrets.NOPE}")
	var ae *Error
	if _, _, err := ExpandString(tok, v); !errors.As(err, &ae) || ae.Code != "secret_missing" {
		t.Errorf("missing secret: %v", err)
	}
}

// TestOptionInjectionAfterLiteralFlag is issue 12's attack: a value right after a literal option
// that takes no value (ls -1 PATH, rg --count PATTERN) is a positional, so a caller's value there
// must not become an option. Before the fix the slot after any literal starting with '-' was taken
// for that option's value and these went through.
func TestOptionInjectionAfterLiteralFlag(t *testing.T) {
	for _, c := range []struct {
		tmpl []string
		in   string
	}{
		{[]string{"-1", "${input.path}"}, "--version"},
		{[]string{"-1", "${input.path}"}, "-la"},
		{[]string{"-1", "${input.path}"}, "-R /"},
		{[]string{"-1", "${input.path}"}, "--help"},
		{[]string{"--count", "${input.path}", "--", "."}, "--pre=/bin/sh"},
		{[]string{"--count", "${input.path | optional('--glob')}", "."}, "--pre=/bin/sh"},
	} {
		in := map[string]any{"path": c.in}
		got, err := Expand(parse(t, c.tmpl...), in, nil)
		var e *Error
		if !errors.As(err, &e) || e.Code != "input_invalid" || e.Pointer != "/path" {
			t.Errorf("%q with %q: got %q, %v; want input_invalid at /path", c.tmpl, c.in, got, err)
			continue
		}
		if !strings.Contains(e.Message, "input path") || !strings.Contains(e.Hint, "--opt=${input.x}") || !strings.Contains(e.Hint, manifest.AllowDashKeyword) {
			t.Errorf("the refusal does not name the input and the fix: %q (%q)", e.Message, e.Hint)
		}
	}
	// The ways a template passes such a value on: glued to its option, after a literal "--", or
	// as an input whose schema carries the mark.
	in := map[string]any{"path": "--pre=/bin/sh"}
	schema := input(t, `{"type": "object", "properties": {"path": {"type": "string", "x-clihost-allow-dash": true}, "o": {"type": "object", "x-clihost-allow-dash": true, "properties": {"p": {"type": "string"}}}}}`)
	for _, c := range []struct {
		tmpl   []string
		schema map[string]any
		want   []string
	}{
		{[]string{"--count", "--regexp=${input.path}", "."}, nil, []string{"--count", "--regexp=--pre=/bin/sh", "."}},
		{[]string{"--count", "${input.path | optional('--regexp=')}", "."}, nil, []string{"--count", "--regexp=--pre=/bin/sh", "."}},
		{[]string{"--count", "--", "${input.path}"}, nil, []string{"--count", "--", "--pre=/bin/sh"}},
		{[]string{"--arg", "x", "${input.path}"}, schema, []string{"--arg", "x", "--pre=/bin/sh"}},
		{[]string{"${input.path | optional('--arg')}"}, schema, []string{"--arg", "--pre=/bin/sh"}},
	} {
		got, err := ExpandValues(parse(t, c.tmpl...), Values{Input: in, Schema: c.schema})
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
	// The mark is the input's own: neither a parent's mark nor another input's lets a value through.
	for _, tmpl := range []string{"${input.o.p}", "${input.q}"} {
		v := map[string]any{"o": map[string]any{"p": "-x"}, "q": "-x"}
		if got, err := ExpandValues(parse(t, "--arg", tmpl), Values{Input: v, Schema: schema}); err == nil {
			t.Errorf("%s: %q went through without a mark of its own", tmpl, got)
		}
	}
}
