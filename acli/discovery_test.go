package acli

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// asJSON round-trips v through JSON, as an MCP client sees it.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestRootHelp(t *testing.T) {
	gh := shipped(t, "gh")
	h, err := Help(gh, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := asJSON(t, h)
	if got := keys(m); !reflect.DeepEqual(got, []string{"commands", "description", "examples", "usage"}) {
		t.Fatalf("root help fields = %q", got)
	}
	if !strings.HasPrefix(m["description"].(string), "GitHub's official command-line client.") {
		t.Errorf("description = %q", m["description"])
	}
	cmds := m["commands"].([]any)
	if len(cmds) != 33 || !reflect.DeepEqual(cmds[0], map[string]any{"name": "pr list", "description": "List pull requests"}) {
		t.Errorf("commands = %v", cmds)
	}
	ex := m["examples"].([]any)
	if len(ex) == 0 || ex[len(ex)-1] != "help pr list" {
		t.Errorf("examples = %v", ex)
	}
	for _, e := range ex {
		if _, err := Parse(gh, e.(string), Options{}); err != nil {
			t.Errorf("root help example %q does not parse: %v", e, err)
		}
	}
}

func TestGroupHelp(t *testing.T) {
	gh := shipped(t, "gh")
	h, err := Help(gh, []string{"issue"})
	if err != nil {
		t.Fatal(err)
	}
	m := asJSON(t, h)
	if got := keys(m); !reflect.DeepEqual(got, []string{"command", "commands", "description", "usage"}) {
		t.Fatalf("group help fields = %q", got)
	}
	if m["command"] != "issue" || m["description"] != "Commands under 'issue': list, view, create, comment, close" || len(m["commands"].([]any)) != 5 {
		t.Errorf("group help = %v", m)
	}
}

func TestCommandHelp(t *testing.T) {
	gh := shipped(t, "gh")
	h, err := Help(gh, []string{"issue", "create"})
	if err != nil {
		t.Fatal(err)
	}
	m := asJSON(t, h)
	if got := keys(m); !reflect.DeepEqual(got, []string{"arguments", "command", "description", "examples", "usage"}) {
		t.Fatalf("command help fields = %q", got)
	}
	if m["command"] != "issue create" || m["usage"] != "issue create <title> <body> [options]" {
		t.Errorf("command help = %v", m)
	}
	args := m["arguments"].([]any)
	want0 := map[string]any{"name": "--title", "type": "string", "required": true, "positional": float64(0), "description": "Issue title."}
	if !reflect.DeepEqual(args[0], want0) {
		t.Errorf("first argument = %v, want %v", args[0], want0)
	}
	if a := args[2].(map[string]any); a["name"] != "--assignee" || a["required"] != false || a["positional"] != nil {
		t.Errorf("third argument = %v", a)
	}

	h, _ = Help(gh, []string{"pr", "list"})
	var state, draft Argument
	for _, a := range h.(CommandHelp).Arguments {
		switch a.Name {
		case "--state":
			state = a
		case "--draft":
			draft = a
		}
	}
	if !reflect.DeepEqual(state.Enum, []any{"open", "closed", "merged", "all"}) || draft.Type != "flag" {
		t.Errorf("--state = %+v, --draft = %+v", state, draft)
	}

	b := kit(t)
	h, _ = Help(b, []string{"run"})
	byName := map[string]Argument{}
	for _, a := range h.(CommandHelp).Arguments {
		byName[a.Name] = a
	}
	if a := byName["--count"]; a.Type != "integer" || a.Short != "-n" || a.Default != json.Number("1") {
		t.Errorf("--count = %+v", a)
	}
	if a := byName["--force"]; a.Short != "-f" {
		t.Errorf("--force = %+v", a)
	}
	if a := byName["--since"]; a.Type != "datetime" || a.Format != "date-time" {
		t.Errorf("--since = %+v", a)
	}
	if a := byName["--ids"]; a.Type != "array" || a.Items != "integer" {
		t.Errorf("--ids = %+v", a)
	}
	if a := byName["--dry-run"]; a.Type != "flag" {
		t.Errorf("--dry-run = %+v", a)
	}
	for cmd, usage := range map[string]string{
		"files copy":   "files copy <src> <dst> [<also>...] [options]",
		"files cat":    "files cat <files>... [options]",
		"grp sub deep": "grp sub deep <a> <b> <first>... [options]",
		"grp two":      "grp two [options]",
	} {
		h, err := Help(b, strings.Fields(cmd))
		if err != nil || h.(CommandHelp).Usage != usage {
			t.Errorf("usage of %s = %q, %v; want %q", cmd, h, err, usage)
		}
	}
	h, _ = Help(b, []string{"files", "copy"})
	if a := h.(CommandHelp).Arguments[2]; a.Name != "--also" || a.Required || a.Positional == nil || *a.Positional != 2 {
		t.Errorf("--also = %+v", a)
	}

	if _, err := Help(gh, []string{"pr", "nope"}); err == nil || err.Code != CommandNotFound {
		t.Errorf("unknown topic: %v", err)
	}
	if _, err := Help(nil, nil); err == nil {
		t.Error("nil bundle")
	}
}

func TestSchema(t *testing.T) {
	gh := shipped(t, "gh")
	s, err := Schema(gh, []string{"pr", "list"})
	if err != nil {
		t.Fatal(err)
	}
	m := asJSON(t, s)
	if got := keys(m); !reflect.DeepEqual(got, []string{"command", "description", "inputSchema", "outputSchema"}) {
		t.Fatalf("schema fields = %q", got)
	}
	in := m["inputSchema"].(map[string]any)
	if m["command"] != "pr list" || in["type"] != "object" || in["properties"].(map[string]any)["limit"].(map[string]any)["maximum"] != float64(1000) {
		t.Errorf("schema = %v", m)
	}
	if m["outputSchema"].(map[string]any)["type"] != "array" {
		t.Errorf("outputSchema = %v", m["outputSchema"])
	}

	all, err := Schema(gh, nil)
	if err != nil {
		t.Fatal(err)
	}
	list := all.(SchemaList).Commands
	if len(list) != 33 || list[0].Command != "pr list" || list[32].Command != "auth status" {
		t.Errorf("schema list = %d commands", len(list))
	}
	group, _ := Schema(gh, []string{"issue"})
	if cmds := group.(SchemaList).Commands; len(cmds) != 5 || cmds[0].Command != "issue list" {
		t.Errorf("group schema = %v", cmds)
	}
	if _, err := Schema(gh, []string{"nope"}); err == nil || err.Code != CommandNotFound {
		t.Errorf("unknown topic: %v", err)
	}
	if s, _ := Schema(kit(t), nil); len(s.(SchemaList).Commands) != 5 {
		t.Errorf("the broken tool is listed: %v", s)
	}
}

func TestVersion(t *testing.T) {
	m := asJSON(t, Version(shipped(t, "gh")))
	want := map[string]any{
		"acli_version":   "0.1.0",
		"implementation": map[string]any{"name": "clihost", "version": "gh@1.0.0"},
		"capabilities":   map[string]any{"commands": []any{"pr", "issue", "run", "workflow", "release", "repo", "search", "label", "gist", "api", "auth"}, "extensions": []any{}},
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("version = %v", m)
	}
	if m := asJSON(t, Version(nil)); m["capabilities"].(map[string]any)["commands"] == nil {
		t.Errorf("nil bundle: %v", m)
	}
}

func TestToolDefinition(t *testing.T) {
	gh := shipped(t, "gh")
	d := ToolDescription(gh)
	if !strings.HasPrefix(d, "GitHub's official command-line client.") || !strings.HasSuffix(d, " Commands: pr, issue, run, workflow, release, repo, search, label, gist, api, auth. Run 'help' for details.") {
		t.Errorf("description = %q", d)
	}
	if d := ToolDescription(nil); d != "Execute CLI command. Run 'help' for details." {
		t.Errorf("nil bundle: %q", d)
	}
	m := asJSON(t, InputSchema(gh))
	if m["type"] != "object" || !reflect.DeepEqual(m["required"], []any{"command"}) || m["additionalProperties"] != false ||
		m["properties"].(map[string]any)["command"].(map[string]any)["type"] != "string" {
		t.Errorf("input schema = %v", m)
	}
	if ToolName != "cli" || SpecVersion != "0.1.0" {
		t.Error("constants")
	}
}

func TestEnvelope(t *testing.T) {
	ok := asJSON(t, Success("pr list", []any{1}, "Found 1", 142*time.Millisecond+900*time.Microsecond))
	want := map[string]any{"success": true, "data": []any{float64(1)}, "message": "Found 1",
		"_meta": map[string]any{"command": "pr list", "duration_ms": float64(142)}}
	if !reflect.DeepEqual(ok, want) {
		t.Errorf("success = %v", ok)
	}
	fast := asJSON(t, Success("version", map[string]any{}, "", 0))
	if fast["_meta"].(map[string]any)["duration_ms"] != float64(0) || fast["message"] != nil {
		t.Errorf("zero duration = %v", fast)
	}
	fail := asJSON(t, Failure("pr lst", &Error{Code: CommandNotFound, Message: "Command 'pr lst' not found", Hint: "Run 'help'", Examples: []string{"pr list"}}))
	want = map[string]any{"success": false,
		"error": map[string]any{"code": "COMMAND_NOT_FOUND", "message": "Command 'pr lst' not found", "hint": "Run 'help'", "examples": []any{"pr list"}},
		"_meta": map[string]any{"command": "pr lst"}}
	if !reflect.DeepEqual(fail, want) {
		t.Errorf("failure = %v", fail)
	}
	if f := asJSON(t, Failure("x", &Error{Code: Timeout, Message: "m"})); keys(f["error"].(map[string]any))[0] != "code" || len(keys(f["error"].(map[string]any))) != 2 {
		t.Errorf("hint and examples are omitted when empty: %v", f)
	}
	if f := Failure("x", nil); f.Error == nil || f.Error.Code != ExecutionError {
		t.Errorf("nil error: %+v", f)
	}
	long := strings.Repeat("é", MaxCommandLength+5)
	if got := Failure(long, &Error{}).Meta.Command; got != strings.Repeat("é", MaxCommandLength)+"…" {
		t.Errorf("long command echoed with %d runes", len([]rune(got)))
	}
	if got := Failure("a\xffb", &Error{}).Meta.Command; got != "a\uFFFDb" {
		t.Errorf("invalid UTF-8 echoed as %q", got)
	}
	if e := (&Error{Code: ParseError, Message: "m"}); e.Error() != "PARSE_ERROR: m" {
		t.Errorf("Error() = %q", e.Error())
	}
}

// Every example in every shipped TOOL.md can be rendered as an ACLI command (help shows it), and
// parses back to the same input.
func TestExamplesRoundTrip(t *testing.T) {
	examples := 0
	for _, name := range []string{"gh", "git", "jq", "rg", "kubectl", "ffmpeg", "yt-dlp", "curl", "helm", "aws"} {
		b := shipped(t, name)
		for _, e := range b.Tools {
			if e.Tool == nil {
				t.Fatalf("%s %s did not load", name, e.CommandPath())
			}
			for _, ex := range e.Tool.Examples {
				examples++
				cmd, ok := renderExample(e, ex.Input)
				if !ok {
					t.Errorf("%s %s: example %q cannot be written as options, so help leaves it out", name, e.CommandPath(), ex.Name)
					continue
				}
				req, err := Parse(b, cmd, Options{})
				if err != nil {
					t.Errorf("%s: %q: %v", name, cmd, err)
					continue
				}
				if !reflect.DeepEqual(req.Input, ex.Input) {
					t.Errorf("%s: %q parsed to %#v, want %#v", name, cmd, req.Input, ex.Input)
				}
			}
		}
	}
	if examples == 0 {
		t.Fatal("the shipped bundles have no examples: the loop above checked nothing")
	}
	b := kit(t)
	var run = b.Tools[0]
	// The negative control: the kit's third example cannot be written as options, and help leaves
	// it out.
	if cmd, ok := renderExample(run, run.Tool.Examples[2].Input); ok {
		t.Errorf("kit example 3 rendered as %q, want it refused", cmd)
	}
	got := toolExamples(run, 0)
	want := []string{
		`run --count=-5 --dry-run=false --level info --meta '{"k":[1,"x,y"]}' --name 'it'\''s a test' --ratio 0.5 --tags a,b --verbose`,
		`run --label=-h --name=--weird`,
		`run --name '' --tags ''`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kit examples =\n%q\nwant\n%q", got, want)
	}
	for i, cmd := range got {
		req, err := Parse(b, cmd, Options{})
		if err != nil || !reflect.DeepEqual(req.Input, run.Tool.Examples[[]int{0, 1, 3}[i]].Input) {
			t.Errorf("%q: %#v, %v", cmd, req, err)
		}
	}
}
