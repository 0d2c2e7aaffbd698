package acli

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRouting(t *testing.T) {
	gh := shipped(t, "gh")
	for _, tc := range []struct {
		in      string
		kind    Kind
		command string
		topic   []string
	}{
		{"pr list", KindCall, "pr list", nil},
		{"  auth   status  ", KindCall, "auth status", nil},
		{"help", KindHelp, "help", nil},
		{"help pr", KindHelp, "help", []string{"pr"}},
		{"help pr list", KindHelp, "help", []string{"pr", "list"}},
		{"--help", KindHelp, "help", nil},
		{"-h pr", KindHelp, "help", []string{"pr"}},
		{"schema", KindSchema, "schema", nil},
		{"schema issue view", KindSchema, "schema", []string{"issue", "view"}},
		{"schema repo", KindSchema, "schema", []string{"repo"}},
		{"version", KindVersion, "version", nil},
		{"--version", KindVersion, "version", nil},
		{"pr list --help", KindHelp, "help", []string{"pr", "list"}},
		{"pr list --state open -h", KindHelp, "help", []string{"pr", "list"}},
		{"pr list --state bogus --help", KindHelp, "help", []string{"pr", "list"}},
		{"pr --help", KindHelp, "help", []string{"pr"}},
		{"pr -h", KindHelp, "help", []string{"pr"}},
		{"pr lst --help", KindHelp, "help", []string{"pr"}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			req, err := Parse(gh, tc.in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if req.Kind != tc.kind || req.Command != tc.command || !reflect.DeepEqual(req.Topic, tc.topic) {
				t.Fatalf("got kind %d command %q topic %q, want %d %q %q", req.Kind, req.Command, req.Topic, tc.kind, tc.command, tc.topic)
			}
			if req.Kind == KindCall {
				if req.Tool == nil || req.Tool.CommandPath() != tc.command || req.Input == nil {
					t.Fatalf("call without tool or input: %+v", req)
				}
			} else if req.Tool != nil || req.Input != nil {
				t.Fatalf("%d request carries a tool or input", req.Kind)
			}
		})
	}
}

func TestRoutingErrors(t *testing.T) {
	gh := shipped(t, "gh")
	for _, tc := range []struct {
		in, code, msg, hint string
		examples            []string
	}{
		{"", ParseError, "the command is empty", "Run 'help'", []string{"help", "pr list", "pr view"}},
		{"prr list", CommandNotFound, "Command 'prr' not found", "Run 'help' to list commands", []string{"pr list", "pr view", "pr diff"}},
		{"isue view 3", CommandNotFound, "Command 'isue' not found", "Run 'help'", []string{"issue list", "issue view", "issue create"}},
		{"pr lst", CommandNotFound, "Command 'pr lst' not found", "Run 'help'", []string{"pr list", "pr close", "pr view"}},
		{"auth stat", CommandNotFound, "Command 'auth stat' not found", "", []string{"auth status", "run list", "pr list"}},
		{"is", CommandNotFound, "", "", []string{"issue list", "issue view", "issue create"}},
		{"gh pr list", CommandNotFound, "Command 'gh' not found", `Leave out the program name "gh"`, nil},
		{"pr", CommandNotFound, "Command 'pr' needs a subcommand: list, view, diff, checks, create, comment, review, merge, close", "Run 'help pr'", []string{"pr list", "pr view", "pr diff"}},
		{"pr --state open", CommandNotFound, "needs a subcommand", "", nil},
		{"PR list", CommandNotFound, "Command 'PR' not found", "", nil},
		{"-v", CommandNotFound, "Command '-v' not found", "", nil},
		{"pr list -v", ValidationError, "unknown option '-v'", "", nil},
		{"help nosuch", CommandNotFound, "Command 'nosuch' not found", "", nil},
		{"help pr nosuch", CommandNotFound, "Command 'pr nosuch' not found", "", []string{"pr list", "pr close", "pr view"}},
		{"help pr list extra", CommandNotFound, "Command 'pr list extra' not found", "", []string{"pr list", "pr view", "pr create"}},
		{"schema pr list --json", CommandNotFound, "", "", nil},
		{"version --json", ValidationError, "version takes no arguments", "Run 'version'", nil},
		{"'' list", CommandNotFound, "Command '' not found", "", nil},
		{"pr list; rm -rf /", CommandNotFound, "Command 'pr list;' not found", "", nil},
		{"pr 'list'x", CommandNotFound, "Command 'pr listx' not found", "", nil},
		{"x" + strings.Repeat("y", 200), CommandNotFound, "…' not found", "", nil},
	} {
		t.Run(tc.in, func(t *testing.T) {
			req, err := Parse(gh, tc.in, Options{})
			if err == nil {
				t.Fatalf("got %+v, want %s", req, tc.code)
			}
			if err.Code != tc.code || !strings.Contains(err.Message, tc.msg) || !strings.Contains(err.Hint, tc.hint) {
				t.Fatalf("got %+v, want %s with %q and hint %q", err, tc.code, tc.msg, tc.hint)
			}
			if tc.examples != nil && !reflect.DeepEqual(err.Examples, tc.examples) {
				t.Fatalf("examples = %q, want %q", err.Examples, tc.examples)
			}
			if len(err.Examples) > 3 {
				t.Fatalf("more than 3 examples: %q", err.Examples)
			}
		})
	}
}

func TestRoutingKit(t *testing.T) {
	b := kit(t)
	for _, tc := range []struct{ in, code, want string }{
		{"run", "", "run"},
		{"grp sub deep 1 x y", "", "grp sub deep"},
		{"grp sub", CommandNotFound, "Command 'grp sub' needs a subcommand: deep"},
		{"grp", CommandNotFound, "Command 'grp' needs a subcommand: sub, two"},
		{"broken", CommandNotFound, "Command 'broken' is unavailable: its TOOL.md did not load"},
		{"help broken", CommandNotFound, "is unavailable"},
		{"run extra", ValidationError, "unexpected argument 'extra'"},
	} {
		req, err := Parse(b, tc.in, Options{})
		switch {
		case tc.code == "" && (err != nil || req.Command != tc.want):
			t.Errorf("%q: got %+v, %v; want command %q", tc.in, req, err, tc.want)
		case tc.code != "" && (err == nil || err.Code != tc.code || !strings.Contains(err.Message, tc.want)):
			t.Errorf("%q: got %+v; want %s %q", tc.in, err, tc.code, tc.want)
		}
	}
	// The broken command is never suggested.
	_, err := Parse(b, "brokn", Options{})
	for _, ex := range err.Examples {
		if ex == "broken" {
			t.Errorf("suggested the broken command: %q", err.Examples)
		}
	}
	if _, err := Parse(nil, "x", Options{}); err == nil || err.Code != ExecutionError {
		t.Errorf("nil bundle: %v", err)
	}
}

// in is shorthand for an expected input.
type in = map[string]any

func num(s string) json.Number { return json.Number(s) }

func TestOptions(t *testing.T) {
	b := kit(t)
	for _, tc := range []struct {
		in   string
		want in
	}{
		{"run", in{}},
		// long options
		{"run --name test --count 10", in{"name": "test", "count": num("10")}},
		{"run --name=hello", in{"name": "hello"}},
		{"run --name=a=b", in{"name": "a=b"}},
		{"run --name ''", in{"name": ""}},
		{"run --name=", in{"name": ""}},
		{"run --name '   '", in{"name": "   "}},
		{"run --name 太郎", in{"name": "太郎"}},
		{"run --name ✅完了", in{"name": "✅完了"}},
		{"run --name=日本語タイトル", in{"name": "日本語タイトル"}},
		{"run --name -x", in{"name": "-x"}},
		{"run --name=--x", in{"name": "--x"}},
		{"run --name -", in{"name": "-"}},
		{"run --name a --name b", in{"name": "b"}},
		{"run --name 'a; rm -rf /'", in{"name": "a; rm -rf /"}},
		{"run --dry-run", in{"dry_run": true}},
		{"run --dry_run", in{"dry_run": true}},
		{"run --opt-in", in{"opt_in": true}},
		{"run --x-y-z v --x_y-z w", in{"x_y-z": "w"}},
		{"run --anything 12", in{"anything": "12"}},
		// types inferred from enum, items and properties when "type" is absent
		{"run --toggle", in{"toggle": true}},
		{"run --no-toggle", in{"toggle": false}},
		{"run --nums 1,2", in{"nums": []any{num("1"), num("2")}}},
		{`run --obj '{"a":"b"}'`, in{"obj": in{"a": "b"}}},
		// booleans
		{"run --verbose", in{"verbose": true}},
		{"run --verbose=false", in{"verbose": false}},
		{"run --verbose=true", in{"verbose": true}},
		{"run --verbose true", in{"verbose": true}},
		{"run --verbose false", in{"verbose": false}},
		{"run --no-verbose", in{"verbose": false}},
		{"run --no-dry-run", in{"dry_run": false}},
		{"run --verbose --no-verbose", in{"verbose": false}},
		{"run --no-cache", in{"no_cache": true}},
		{"run --no-no-cache", in{"no_cache": false}},
		{"run --cache --no-cache=false", in{"cache": true, "no_cache": false}},
		// numbers
		{"run --count 42", in{"count": num("42")}},
		{"run --count 0", in{"count": num("0")}},
		{"run --count -5", in{"count": num("-5")}},
		{"run --count=-5", in{"count": num("-5")}},
		{"run --count +7", in{"count": num("7")}},
		{"run --count 007", in{"count": num("7")}},
		{"run --count 999999999999", in{"count": num("999999999999")}},
		{"run --count 9223372036854775807", in{"count": num("9223372036854775807")}},
		{"run --count 9223372036854775808", in{"count": num("9223372036854775808")}},
		{"run --count 123456789012345678901234567890", in{"count": num("123456789012345678901234567890")}},
		{"run --count -0012345678901234567", in{"count": num("-12345678901234567")}},
		{"run --ratio 12345678901234567", in{"ratio": num("12345678901234567")}},
		{"run --ratio 0.10000000000000000001", in{"ratio": num("0.10000000000000000001")}},
		{"run --ratio -1234567890.12345678901234567890e-5", in{"ratio": num("-12345.678901234567890123456789")}},
		{"run --ratio 1.5e300", in{"ratio": num("1.5e+300")}},
		{"run --ratio 0.000001", in{"ratio": num("0.000001")}},
		{"run --ratio 0.0000012", in{"ratio": num("0.0000012")}},
		{"run --ratio 0.00000012", in{"ratio": num("1.2e-7")}},
		{"run --ratio 123456789012345678901234", in{"ratio": num("1.23456789012345678901234e+23")}},
		{"run --ratio 0", in{"ratio": num("0")}},
		{"run --ratio -0.0", in{"ratio": num("0")}},
		{"run --ratio 3.14", in{"ratio": num("3.14")}},
		{"run --ratio 0.1", in{"ratio": num("0.1")}},
		{"run --ratio -0.5", in{"ratio": num("-0.5")}},
		{"run --ratio -10", in{"ratio": num("-10")}},
		{"run --ratio .5", in{"ratio": num("0.5")}},
		{"run --ratio 5.", in{"ratio": num("5")}},
		{"run --ratio 1e3", in{"ratio": num("1000")}},
		{"run --ratio 1E-7", in{"ratio": num("1e-7")}},
		{"run --ratio 1e21", in{"ratio": num("1e+21")}},
		{"run --mode 2", in{"mode": num("2")}},
		{"run --mode 2.0", in{"mode": num("2")}},
		// arrays
		{"run --tags a --tags b", in{"tags": []any{"a", "b"}}},
		{"run --tags a,b,c", in{"tags": []any{"a", "b", "c"}}},
		{"run --tags 'a , b , c'", in{"tags": []any{"a", "b", "c"}}},
		{"run --tags single", in{"tags": []any{"single"}}},
		{"run --tags a,b --tags c", in{"tags": []any{"a", "b", "c"}}},
		{"run --tags タグ1 --tags タグ2", in{"tags": []any{"タグ1", "タグ2"}}},
		{"run --tags ''", in{"tags": []any{}}},
		{"run --tags=", in{"tags": []any{}}},
		{"run --ids 1,2,3", in{"ids": []any{num("1"), num("2"), num("3")}}},
		{"run --ids -1 --ids=-2", in{"ids": []any{num("-1"), num("-2")}}},
		{`run --pairs '{"a":1,"b":2}' --pairs '{}'`, in{"pairs": []any{in{"a": num("1"), "b": num("2")}, in{}}}},
		// enum, formats, objects
		{"run --level info", in{"level": "info"}},
		{"run --since 2026-02-02T10:00:00Z", in{"since": "2026-02-02T10:00:00Z"}},
		{"run --since 2026-01-01T00:00:00.000Z", in{"since": "2026-01-01T00:00:00.000Z"}},
		{"run --since 2026-02-02T10:00:00+09:00", in{"since": "2026-02-02T10:00:00+09:00"}},
		{"run --day 2024-02-29", in{"day": "2024-02-29"}},
		{`run --meta '{"k":[1,"x"],"n":null}'`, in{"meta": in{"k": []any{num("1"), "x"}, "n": nil}}},
		{`run --meta={}`, in{"meta": in{}}},
		// short options, declared with x-short
		{"run -v", in{"verbose": true}},
		{"run -n 3", in{"count": num("3")}},
		{"run -n3", in{"count": num("3")}},
		{"run -n=3", in{"count": num("3")}},
		{"run -n -3", in{"count": num("-3")}},
		{"run -vf", in{"verbose": true, "force": true}},
		{"run -vfn 3", in{"verbose": true, "force": true, "count": num("3")}},
		{"run -vn3", in{"verbose": true, "count": num("3")}},
		{"run -v=false", in{"verbose": false}},
		{"run -v false", in{"verbose": false}},
		{"run -l x -l y", in{"label": "y"}},
		{"run -lvalue", in{"label": "value"}},
		// end of options
		{"run --", in{}},
		{"run --verbose -- ", in{"verbose": true}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			req, err := Parse(b, tc.in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(req.Input, tc.want) {
				t.Fatalf("input = %#v, want %#v", req.Input, tc.want)
			}
		})
	}
}

func TestPositionals(t *testing.T) {
	b := kit(t)
	for _, tc := range []struct {
		in   string
		want in
	}{
		// required inputs in order
		{"files copy a b", in{"src": "a", "dst": "b"}},
		{"files copy a b --recursive", in{"src": "a", "dst": "b", "recursive": true}},
		{"files copy --recursive a b", in{"src": "a", "dst": "b", "recursive": true}},
		{"files copy a --recursive b", in{"src": "a", "dst": "b", "recursive": true}},
		{"files copy a", in{"src": "a"}}, // dst missing: left to schema validation
		// a required input given as an option is skipped by the positionals
		{"files copy --src a b", in{"src": "a", "dst": "b"}},
		{"files copy --dst b a", in{"src": "a", "dst": "b"}},
		// extras go to the only non-required array, one item each, not comma-split
		{"files copy a b c,d e", in{"src": "a", "dst": "b", "also": []any{"c,d", "e"}}},
		{"files copy a b --also x c", in{"src": "a", "dst": "b", "also": []any{"x", "c"}}},
		// a last required array takes every positional
		{"files cat x y z", in{"files": []any{"x", "y", "z"}}},
		{"files cat x,y", in{"files": []any{"x,y"}}},
		{"files cat --files a --files b,c", in{"files": []any{"a", "b", "c"}}},
		{"files cat --number -- --weird -x", in{"number": true, "files": []any{"--weird", "-x"}}},
		{"files cat -- --help", in{"files": []any{"--help"}}},
		// a property named help is reachable with = (a bare --help always asks for help)
		{"files cat --help=x a", in{"help": "x", "files": []any{"a"}}},
		{"files cat --number true a", in{"number": true, "files": []any{"a"}}},
		// -h is the tool's own x-short; --help still asks for help (see TestRouting)
		{"files cat -h a", in{"h": true, "files": []any{"a"}}},
		// integers positionally; negative numbers are never options
		{"grp sub deep 1 two three", in{"a": num("1"), "b": "two", "first": []any{"three"}}},
		{"grp sub deep -1 -2 -3", in{"a": num("-1"), "b": "-2", "first": []any{"-3"}}},
		{"grp sub deep -- -1 --b x", in{"a": num("-1"), "b": "--b", "first": []any{"x"}}},
		{"grp sub deep 1 b c d", in{"a": num("1"), "b": "b", "first": []any{"c", "d"}}},
		{"grp sub deep 検索クエリ", nil}, // a is an integer: error checked below
	} {
		t.Run(tc.in, func(t *testing.T) {
			req, err := Parse(b, tc.in, Options{})
			if tc.want == nil {
				if err == nil || err.Code != ValidationError || !strings.Contains(err.Message, "<a> must be an integer") {
					t.Fatalf("got %+v, %v", req, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(req.Input, tc.want) {
				t.Fatalf("input = %#v, want %#v", req.Input, tc.want)
			}
		})
	}
}

func TestOptionErrors(t *testing.T) {
	b := kit(t)
	gh := shipped(t, "gh")
	for _, tc := range []struct {
		in, msg, hint string
	}{
		{"run --unknown value", "unknown option '--unknown'", "Valid options: --anything, --cache, --count,"},
		{"run --nme x", "unknown option '--nme'", "Did you mean --name?"},
		{"pr list -state open", "unknown option '-state'", "Did you mean --state?"},
		{"run -name x", "-n must be an integer, not 'ame'", ""},
		{"files cat --files a b", "unexpected argument 'b'", "'files cat' takes 1 positional argument(s): <files>"},
		{"run -x", "unknown option '-x'", "Short options work only where declared"},
		{"run -vx", "unknown option '-vx'", ""},
		{"run --no-name", "unknown option '--no-name'", ""},
		{"run --no-tags", "unknown option '--no-tags'", ""},
		{"run --no-verbose=true", "--no-verbose takes no value", "Write --no-verbose, or --verbose=true"},
		{"run --count abc", "--count must be an integer, not 'abc'", "whole number"},
		{"run --count notanumber", "must be an integer", ""},
		{"run --count 1.5", "must be an integer, not '1.5'", ""},
		{"run --count 1e3", "must be an integer", ""},
		{"run --count 0x10", "must be an integer", ""},
		{"run --count 1" + strings.Repeat("0", 1000), "must be an integer", ""},
		{"run --ratio 1e-99999999999999999999", "must be a number", ""},
		{"run --count ''", "must be an integer", ""},
		{"run -n x", "-n must be an integer", ""},
		{"run --ratio NaN", "--ratio must be a number, not 'NaN'", ""},
		{"run --ratio Infinity", "must be a number", ""},
		{"run --ratio inf", "must be a number", ""},
		{"run --ratio 1e400", "must be a number", ""},
		{"run --ratio 0x1p3", "must be a number", ""},
		{"run --ratio 1_000", "must be a number", ""},
		{"run --ratio .", "must be a number", ""},
		{"run --ratio 1e", "must be a number", ""},
		{"run --verbose=yes", "--verbose must be true or false, not 'yes'", ""},
		{"run --verbose=True", "must be true or false", ""},
		{"run --count", "--count needs a value", "Write --count VALUE or --count=VALUE"},
		{"run --name --verbose", "--name needs a value", "use = for a value that starts with --"},
		{"run --level", "--level needs a value", "Use one of: debug, info, warn"},
		{"run -n", "-n needs a value", ""},
		{"run --level invalid", "--level must be one of debug, info, warn, not 'invalid'", "Use one of: debug, info, warn"},
		{"run --level INFO", "must be one of", ""},
		{"run --mode 4", "--mode must be one of 1, 2, 3", ""},
		{"run --mode 2.0000000000000000001", "--mode must be one of 1, 2, 3", ""}, // float64 made it 2
		{"run --mode x", "must be a number", ""},
		{"run --ids 1,x", "--ids must be an integer, not 'x'", ""},
		{"run --ids 1,,2", "--ids has an empty item in '1,,2'", ""},
		{"run --tags a,", "has an empty item", ""},
		{"run --since 2026-02-02", "--since must be an RFC 3339 date-time", "2026-02-02T10:00:00Z"},
		{"run --since yesterday", "RFC 3339", ""},
		{"run --since 2026-13-02T10:00:00Z", "RFC 3339", ""},
		{"run --day 2026-02-30", "--day must be a date (YYYY-MM-DD)", ""},
		{"run --day 2026-2-3", "must be a date", ""},
		{"run --meta '[1]'", "--meta must be a JSON object", `'{"key":"value"}'`},
		{"run --meta '{\"a\":1} x'", "must be a JSON object", ""},
		{"run --meta '{\"a\":1}{}'", "must be a JSON object", ""},
		{"run --meta nope", "must be a JSON object", ""},
		{"run --pairs '[1]'", "--pairs must be a JSON object", ""},
		{"run positional", "unexpected argument 'positional'", "'run' takes no positional arguments; pass other inputs as options: --anything, --cache,"},
		{"files copy a b c --also", "--also needs a value", ""},
		{"grp two a", "unexpected argument 'a'", "takes no positional"},
		{"files copy a b --src c", "", ""}, // not an error: see below
		{"pr view 42", "unexpected argument '42'", "'pr view' takes no positional arguments; pass other inputs as options: --pr, --repo"},
		{"issue view 1 2", "unexpected argument '2'", "'issue view' takes 1 positional argument(s): <issue>"},
		{"pr list --state bogus", "--state must be one of open, closed, merged, all", ""},
		{"pr list --limit ten", "--limit must be an integer", ""},
		{"pr list --json number", "unknown option '--json'", "Valid options: --assignee, --author, --base,"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			bundle := b
			if strings.HasPrefix(tc.in, "pr ") || strings.HasPrefix(tc.in, "issue ") {
				bundle = gh
			}
			req, err := Parse(bundle, tc.in, Options{})
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %#v, want an error", req.Input)
			}
			if err.Code != ValidationError || !strings.HasPrefix(err.Message, "Invalid argument: ") || !strings.Contains(err.Message, tc.msg) || !strings.Contains(err.Hint, tc.hint) {
				t.Fatalf("got %+v\nwant VALIDATION_ERROR %q, hint %q", err, tc.msg, tc.hint)
			}
		})
	}
}

func TestErrorExamples(t *testing.T) {
	gh := shipped(t, "gh")
	_, err := Parse(gh, "pr list --state bogus", Options{})
	if err.Examples[0] != "pr list --state open" {
		t.Errorf("enum error examples = %q", err.Examples)
	}
	_, err = Parse(gh, "issue create --titel x", Options{})
	if len(err.Examples) != 1 || !strings.HasPrefix(err.Examples[0], "issue create --title 'Crash when config is empty' --body ") {
		t.Errorf("examples = %q", err.Examples)
	}
	for _, ex := range err.Examples {
		if _, err := Parse(gh, ex, Options{}); err != nil {
			t.Errorf("example %q does not parse: %v", ex, err)
		}
	}
}

// Every input Parse builds for the shipped bundles validates against the tool's own schema when
// the command is right, so the host can validate Request.Input as it is.
func TestInputsValidateAgainstSchema(t *testing.T) {
	for _, tc := range []struct{ bundle, cmd string }{
		{"gh", "pr list --state open --limit 10 --label bug,ui --draft"},
		{"gh", "pr create --title 'Fix it' --body '' --draft=false --base main"},
		{"gh", "issue create 'A title' 'A body' --assignee @me"},
		{"gh", "issue view 12 --repo cli/cli"},
		{"git", "add a.go b.go --dry-run"},
		{"rg", "search 'func\\s+Parse' --context 2 --no-ignore --type go"},
		{"kubectl", "get pods --all-namespaces --selector app=web"},
		{"curl", "post https://pypi.org/x '{\"a\":1}' application/json --max-time 5"},
	} {
		b := shipped(t, tc.bundle)
		req, err := Parse(b, tc.cmd, Options{})
		if err != nil {
			t.Errorf("%s %s: %v", tc.bundle, tc.cmd, err)
			continue
		}
		if s := req.Tool.InputSchema(); s == nil {
			t.Errorf("%s: no compiled schema", tc.cmd)
		} else if err := s.Validate(req.Input); err != nil {
			t.Errorf("%s %s: input %#v does not validate: %v", tc.bundle, tc.cmd, req.Input, err)
		}
	}
}
