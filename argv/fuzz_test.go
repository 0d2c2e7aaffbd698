package argv

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/clihost/clihost/manifest"
)

// fuzzToken is one entry of the templates FuzzExpandOptionInjection builds, with a model of what
// it expands to: each argument, and whether its first byte is a caller's value.
type fuzzToken struct {
	raw   string
	model func(v fuzzValues) (args []modelArg, dropped bool)
}

type modelArg struct {
	text     string
	caller   bool // the argument begins with a caller's value (an input or a step's output)
	marked   bool // that value is an input marked x-clihost-allow-dash
	dashDash bool // a literal "--"
}

type fuzzValues struct {
	a, b, c, m, step string
	n                json.Number
	has              map[string]bool
	arr              []string
}

func lit(s string) fuzzToken {
	return fuzzToken{s, func(fuzzValues) ([]modelArg, bool) { return []modelArg{{text: s, dashDash: s == "--"}}, false }}
}

// one models a whole-entry value: the caller's when present, else nothing (or def).
func one(raw, name string, get func(fuzzValues) string, marked bool) fuzzToken {
	return fuzzToken{raw, func(v fuzzValues) ([]modelArg, bool) {
		if !v.has[name] {
			return nil, false
		}
		return []modelArg{{text: get(v), caller: true, marked: marked}}, false
	}}
}

// led models a mixed entry made of parts; a part is the manifest's text or a caller's value.
func led(raw string, parts func(v fuzzValues) (texts []string, caller []bool, dropped bool)) fuzzToken {
	return fuzzToken{raw, func(v fuzzValues) ([]modelArg, bool) {
		texts, caller, dropped := parts(v)
		if dropped {
			return nil, true
		}
		arg := modelArg{text: strings.Join(texts, "")}
		for i, t := range texts {
			if t != "" {
				arg.caller = caller[i]
				break
			}
		}
		return []modelArg{arg}, false
	}}
}

var fuzzTokens = []fuzzToken{
	lit("--"), lit("-1"), lit("--pre"), lit("x"), lit("-"),
	one("${input.a}", "a", func(v fuzzValues) string { return v.a }, false),
	{"${input.b | default('-d')}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["b"] {
			return []modelArg{{text: "-d"}}, false
		}
		return []modelArg{{text: v.b, caller: true}}, false
	}},
	{"${input.c | optional('--c')}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["c"] {
			return nil, false
		}
		return []modelArg{{text: "--c"}, {text: v.c, caller: true}}, false
	}},
	{"${input.c | optional('--c=')}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["c"] {
			return nil, false
		}
		return []modelArg{{text: "--c=" + v.c}}, false
	}},
	one("${input.a | json()}", "a", func(v fuzzValues) string { b, _ := json.Marshal(v.a); return string(b) }, false),
	{"${input.arr}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["arr"] {
			return nil, false
		}
		var out []modelArg
		for _, s := range v.arr {
			out = append(out, modelArg{text: s, caller: true})
		}
		return out, false
	}},
	one("${input.arr | join(',')}", "arr", func(v fuzzValues) string { return strings.Join(v.arr, ",") }, false),
	one("${input.m}", "m", func(v fuzzValues) string { return v.m }, true),
	{"${input.m | optional('-m')}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["m"] {
			return nil, false
		}
		return []modelArg{{text: "-m"}, {text: v.m, caller: true, marked: true}}, false
	}},
	led("pre${input.a}", func(v fuzzValues) ([]string, []bool, bool) {
		return []string{"pre", v.a}, []bool{false, true}, !v.has["a"]
	}),
	led("${input.a}suf", func(v fuzzValues) ([]string, []bool, bool) {
		return []string{v.a, "suf"}, []bool{true, false}, !v.has["a"]
	}),
	led("${input.a}${input.b}", func(v fuzzValues) ([]string, []bool, bool) {
		return []string{v.a, v.b}, []bool{true, true}, !v.has["a"] || !v.has["b"]
	}),
	one("${steps.0.output}", "step", func(v fuzzValues) string { return v.step }, false),
	led("${input.b | default('')}${steps.0.output}", func(v fuzzValues) ([]string, []bool, bool) {
		if !v.has["b"] {
			return []string{"", v.step}, []bool{false, true}, false
		}
		return []string{v.b, v.step}, []bool{true, true}, false
	}),
	led("--opt=${input.arr | join(' ')}", func(v fuzzValues) ([]string, []bool, bool) {
		return []string{"--opt=", strings.Join(v.arr, " ")}, []bool{false, true}, !v.has["arr"]
	}),
	one("${input.n}", "n", func(v fuzzValues) string { return v.n.String() }, false),
	{"${input.f | flag('--f')}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["f"] {
			return nil, false
		}
		return []modelArg{{text: "--f"}}, false
	}},
	{"${input.m | default('-')}${input.a}", func(v fuzzValues) ([]modelArg, bool) {
		if !v.has["a"] {
			return nil, true
		}
		if !v.has["m"] {
			return []modelArg{{text: "-" + v.a}}, false // the manifest's default leads
		}
		arg := modelArg{text: v.m + v.a, caller: v.m != "" || v.a != "", marked: v.m != ""}
		return []modelArg{arg}, false
	}},
}

// FuzzExpandOptionInjection checks the argv invariant of issue 12 against a model of expansion: no
// argument that begins with a caller's value starts with '-' unless a literal "--" came before it
// or the value is an input marked x-clihost-allow-dash. Expand refuses exactly the calls the model
// says break it (or hold a NUL byte), and otherwise gives the model's arguments.
func FuzzExpandOptionInjection(f *testing.F) {
	// a, b, c, m are inputs; a step's output is b+a.
	f.Add([]byte{1, 5}, "--version", "", "", "", uint8(1), int8(0))           // ["-1", "${input.path}"]
	f.Add([]byte{1, 5}, "-la", "", "", "", uint8(1), int8(0))                 // ls -1 -la
	f.Add([]byte{1, 5}, "-R /", "", "", "", uint8(1), int8(0))                // ls -1 "-R /"
	f.Add([]byte{2, 5, 0, 3}, "--pre=/bin/sh", "", "", "", uint8(1), int8(0)) // rg --pre
	f.Add([]byte{7, 8, 12, 13}, "", "", "-c", "-m", uint8(0x0c), int8(0))
	f.Add([]byte{17, 18, 0, 17}, "", "-out", "", "", uint8(0), int8(0))
	f.Add([]byte{16, 15, 14, 9, 19, 21}, "", "-b", "", "", uint8(0x53), int8(-3))
	f.Add([]byte{10, 11, 20, 6, 22}, "-a", "", "ok", "", uint8(0x3f), int8(-1))
	f.Fuzz(func(t *testing.T, shape []byte, a, b, c, m string, present uint8, n int8) {
		if len(shape) > 64 {
			shape = shape[:64]
		}
		clip := func(s string) string {
			if len(s) > 256 {
				return s[:256]
			}
			return s
		}
		v := fuzzValues{a: clip(a), b: clip(b), c: clip(c), m: clip(m), step: clip(b + a), n: json.Number(strconv.Itoa(int(n))),
			has: map[string]bool{"step": true}}
		v.arr = []string{v.a, v.c}
		input := map[string]any{}
		for i, name := range []string{"a", "b", "c", "m", "arr", "n", "f"} {
			if present&(1<<i) == 0 {
				continue
			}
			v.has[name] = true
			switch name {
			case "arr":
				input[name] = []any{v.arr[0], v.arr[1]}
			case "n":
				input[name] = v.n
			case "f":
				input[name] = true
			default:
				input[name] = map[string]string{"a": v.a, "b": v.b, "c": v.c, "m": v.m}[name]
			}
		}
		var raw []string
		var want []string
		refuse := false
		dashDash := false
		for _, s := range shape {
			tok := fuzzTokens[int(s)%len(fuzzTokens)]
			raw = append(raw, tok.raw)
			args, dropped := tok.model(v)
			if dropped {
				continue
			}
			for _, arg := range args {
				if arg.caller && !arg.marked && !dashDash && strings.HasPrefix(arg.text, "-") || strings.IndexByte(arg.text, 0) >= 0 {
					refuse = true
				}
				want = append(want, arg.text)
				dashDash = dashDash || arg.dashDash
			}
		}
		toks, _, err := manifest.ParseArgv(raw)
		if err != nil {
			t.Fatal(err)
		}
		schema := map[string]any{"type": "object", "properties": map[string]any{"m": map[string]any{"type": "string", manifest.AllowDashKeyword: true}}}
		got, err := ExpandValues(toks, Values{Input: input, Steps: []string{v.step}, Schema: schema})
		var ae *Error
		switch {
		case refuse && (!errors.As(err, &ae) || ae.Code != "input_invalid"):
			t.Fatalf("%q with %#v: got %q, %v; a caller's value starting with '-' stands alone", raw, input, got, err)
		case !refuse && err != nil:
			t.Fatalf("%q with %#v: refused: %v", raw, input, err)
		case !refuse && !reflect.DeepEqual(got, want) && len(got)+len(want) > 0:
			t.Fatalf("%q with %#v: got %q, want %q", raw, input, got, want)
		}
	})
}
