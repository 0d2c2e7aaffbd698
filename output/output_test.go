package output

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

func TestConventionAndJSONFlag(t *testing.T) {
	cli := &manifest.CLI{Output: &manifest.Output{DefaultFormat: "text", JSONFlag: "--json", JSONFlagArgs: []string{"number,title"},
		ExitCodes: map[string]string{"0": "ok", "1": "no_match", "4": "auth_required"}, Stream: "stdout"}}
	tool := &manifest.Tool{Runner: &manifest.ToolRunner{Output: &manifest.ToolOutput{Format: "json", JSONFlagArgs: []string{"url"}, ExitCodes: map[string]string{"1": "ok"}}}}
	c := For(cli, tool)
	if c.Format != "json" || c.JSONFlag != "--json" || !reflect.DeepEqual(c.JSONFlagArgs, []string{"url"}) || c.ExitCodes[1] != "ok" || c.ExitCodes[4] != "auth_required" {
		t.Fatalf("convention %+v", c)
	}
	if got := c.Args([]string{"pr", "list"}); !reflect.DeepEqual(got, []string{"pr", "list", "--json", "url"}) {
		t.Fatalf("Args = %q", got)
	}
	if got := c.Args([]string{"search", "--", "-q"}); !reflect.DeepEqual(got, []string{"search", "--json", "url", "--", "-q"}) {
		t.Fatalf("Args before -- = %q", got)
	}
	if got := c.Args([]string{"pr", "--json=a,b"}); !reflect.DeepEqual(got, []string{"pr", "--json=a,b"}) {
		t.Fatalf("flag already present: %q", got)
	}
	if c := For(cli, nil); c.Format != "text" || c.JSONFlag != "" {
		t.Fatalf("text tool got a JSON flag: %+v", c)
	}
	jsonCLI := &manifest.CLI{Output: &manifest.Output{DefaultFormat: "json", JSONFlag: "-o"}}
	if c := For(jsonCLI, tool); c.JSONFlag != "" || c.Format != "json" {
		t.Fatalf("JSON-by-default CLI got a flag: %+v", c)
	}
}

func TestParseFormats(t *testing.T) {
	text := Convention{Format: "text", Stream: "stdout", ErrorStream: "stderr"}
	cases := []struct {
		c    Convention
		p    Process
		want any
	}{
		{text, Process{Stdout: []byte("\x1b[32mgreen\x1b[0m and \x1b]0;title\x07plain\n")}, "green and plain\n"},
		{Convention{Format: "json", Stream: "stdout"}, Process{Stdout: []byte(`{"a": [1, 2]}`)}, map[string]any{"a": []any{json.Number("1"), json.Number("2")}}},
		{Convention{Format: "json", Stream: "stdout"}, Process{Stdout: []byte("{\"n\":1}\n{\"n\":2}\n")}, []any{map[string]any{"n": json.Number("1")}, map[string]any{"n": json.Number("2")}}},
		{Convention{Format: "yaml", Stream: "stdout"}, Process{Stdout: []byte("a: 1\nb: [x]\n")}, map[string]any{"a": 1, "b": []any{"x"}}},
		{Convention{Format: "text", Stream: "stderr"}, Process{Stdout: []byte("x"), Stderr: []byte("from stderr")}, "from stderr"},
		{Convention{Format: "binary", Stream: "stdout"}, Process{Stdout: []byte{0, 1, 2}}, map[string]any{"encoding": "base64", "bytes": 3, "data": "AAEC"}},
	}
	for i, c := range cases {
		o := Parse(c.c, c.p)
		if !o.OK || !reflect.DeepEqual(o.Value, c.want) {
			t.Errorf("case %d: %+v, want %#v", i, o, c.want)
		}
	}
	o := Parse(Convention{Format: "json", Stream: "stdout"}, Process{Stdout: []byte("not json")})
	if o.OK || o.Failure.Code != "output_parse_failed" {
		t.Fatalf("bad JSON: %+v", o)
	}
	o = Parse(Convention{Format: "json", Stream: "stdout"}, Process{Stdout: []byte(`{"a":`), StdoutTruncated: true})
	if o.OK || !strings.Contains(o.Failure.Hint, "capture limit") {
		t.Fatalf("truncated JSON: %+v", o.Failure)
	}
}

func TestExitCodes(t *testing.T) {
	c := Convention{Format: "text", Stream: "stdout", ErrorStream: "stderr", ExitCodes: map[int]string{0: "ok", 1: "no_match", 4: "auth_required", 3: "ok"}}
	cases := []struct {
		exit     int
		stderr   string
		ok       bool
		code     errcode.Code
		category string
	}{
		{0, "", true, "", ""},
		{3, "", true, "", ""},
		{1, "", false, "no_match", "unknown"},
		{4, "To get started with GitHub CLI, please run: gh auth login", false, "auth_required", "authentication"},
		{2, "error: unexpected argument '--bogus' found", false, "upstream_error", "unknown"},
		{7, "curl: (7) Failed to connect to x port 443: Connection refused", false, "upstream_error", "network"},
		{1 + 4, "HTTP 429: too many requests; retry after 30 seconds", false, "upstream_error", "rate_limit"},
		{124, "", false, "timeout", "timeout"},
		{-1, "", false, "killed", "unknown"},
	}
	for _, tc := range cases {
		o := Parse(c, Process{ExitCode: tc.exit, Stderr: []byte(tc.stderr)})
		if o.OK != tc.ok {
			t.Fatalf("exit %d: ok=%v", tc.exit, o.OK)
		}
		if !tc.ok && (o.Failure.Code != tc.code || o.Failure.Category != tc.category || o.Failure.Hint == "" || o.Failure.Message == "") {
			t.Errorf("exit %d: %+v, want code %s category %s", tc.exit, o.Failure, tc.code, tc.category)
		}
	}
	o := Parse(c, Process{ExitCode: 5, Stderr: []byte("HTTP 429: too many requests; retry after 30 seconds")})
	if !o.Failure.Retryable || o.Failure.RetryAfterMS != 30000 {
		t.Fatalf("retry-after: %+v", o.Failure)
	}
	o = Parse(c, Process{TimedOut: true, ExitCode: -1})
	if o.Failure.Code != "timeout" || !o.Failure.Retryable {
		t.Fatalf("timed out: %+v", o.Failure)
	}
	o = Parse(c, Process{ExitCode: 9, Stderr: []byte(strings.Repeat("x", 3*MaxStderrInError))})
	if len(o.Failure.Stderr) > MaxStderrInError+len("…") {
		t.Fatalf("stderr excerpt is %d bytes", len(o.Failure.Stderr))
	}
}

func TestClassifyTable(t *testing.T) {
	cases := map[string]string{
		"insufficient_quota":        "quota",
		"RESOURCE_EXHAUSTED":        "quota",
		"rate.limit reached":        "rate_limit",
		"Throttling: slow down":     "rate_limit",
		"invalid_api_key":           "authentication",
		"HTTP 403 Forbidden":        "authentication",
		"malformed request":         "validation",
		"ECONNRESET":                "network",
		"Could not resolve host: x": "network",
		"502 Bad Gateway":           "server",
		"operation timed out":       "timeout",
		"ENOENT: no such file":      "not_found",
		"cli_not_installed":         "configuration",
		"something odd happened":    "unknown",
	}
	for text, want := range cases {
		if got := Classify(text); got.Category != want {
			t.Errorf("Classify(%q) = %s, want %s", text, got.Category, want)
		}
	}
	for text, ms := range map[string]int64{"rate limit: retry after 100ms": 100, "rate_limit wait 5 seconds": 5000, "429": DefaultRetryAfterMS, "rate limit, retry after 2 minutes": 120000} {
		if got := Classify(text).RetryAfterMS; got != ms {
			t.Errorf("retry-after of %q = %d, want %d", text, got, ms)
		}
	}
}

func TestStripANSI(t *testing.T) {
	cases := map[string]string{
		"\x1b[1;31mred\x1b[0m":       "red",
		"\x1b[2K\x1b[1Gprogress":     "progress",
		"\x1b]8;;http://x\x1b\\link": "link",
		"no escapes":                 "no escapes",
		"\x1b=keypad":                "keypad",
	}
	for in, want := range cases {
		if got := StripANSI(in); got != want {
			t.Errorf("StripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEmptyOutput: output.empty (CLI.md) or runner.output.empty (TOOL.md) says what an empty
// json or yaml result stands for; without it empty output fails with output_parse_failed and a
// hint naming the field. Output that was cut is never taken for empty.
func TestEmptyOutput(t *testing.T) {
	jsonTool := func(empty string) *manifest.Tool {
		return &manifest.Tool{Runner: &manifest.ToolRunner{Output: &manifest.ToolOutput{Format: "json", Empty: empty}}}
	}
	cases := []struct {
		name  string
		cli   *manifest.CLI
		tool  *manifest.Tool
		p     Process
		want  any
		fails bool
	}{
		{"undeclared", &manifest.CLI{}, jsonTool(""), Process{Stdout: []byte("\n")}, nil, true},
		{"tool array", &manifest.CLI{}, jsonTool("[]"), Process{Stdout: []byte(" \n")}, []any{}, false},
		{"tool object", &manifest.CLI{}, jsonTool("{}"), Process{}, map[string]any{}, false},
		{"bundle default", &manifest.CLI{Output: &manifest.Output{DefaultFormat: "json", Empty: "[]"}}, nil, Process{}, []any{}, false},
		{"tool overrides bundle", &manifest.CLI{Output: &manifest.Output{Empty: "[]"}}, jsonTool("null"), Process{}, nil, false},
		{"yaml", &manifest.CLI{Output: &manifest.Output{DefaultFormat: "yaml", Empty: "[]"}}, nil, Process{Stdout: []byte("\n")}, []any{}, false},
		{"not empty", &manifest.CLI{}, jsonTool("[]"), Process{Stdout: []byte(`[{"a":1}]`)}, []any{map[string]any{"a": json.Number("1")}}, false},
		{"cut is not empty", &manifest.CLI{}, jsonTool("[]"), Process{StdoutTruncated: true}, nil, true},
		{"text ignores it", &manifest.CLI{Output: &manifest.Output{Empty: "[]"}}, nil, Process{}, "", false},
	}
	for _, tc := range cases {
		out := Parse(For(tc.cli, tc.tool), tc.p)
		if tc.fails {
			if out.OK || out.Failure.Code != errcode.OutputParseFailed {
				t.Errorf("%s: %+v, want output_parse_failed", tc.name, out)
			}
			continue
		}
		if !out.OK || !reflect.DeepEqual(out.Value, tc.want) {
			t.Errorf("%s: %+v (%#v), want %#v", tc.name, out, out.Value, tc.want)
		}
	}
	f := Parse(For(&manifest.CLI{}, jsonTool("")), Process{}).Failure
	if f == nil || !strings.Contains(f.Hint, `empty: "[]"`) {
		t.Errorf("hint %+v", f)
	}
}
