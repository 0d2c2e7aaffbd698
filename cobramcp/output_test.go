package cobramcp

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/clihost/clihost/internal/fixture"
)

func TestParseTable(t *testing.T) {
	cases := map[string][]map[string]any{
		// docker ps: two-word header, blank cells, a cell wider than its header with a space.
		"CONTAINER ID   IMAGE   STATUS       PORTS    NAMES\n" +
			"a1b2c3d4e5f6   nginx   Up 2 hours   80/tcp   web\n" +
			"0f9e8d7c6b5a   redis   Exited (0)            cache\n": {
			{"container_id": "a1b2c3d4e5f6", "image": "nginx", "status": "Up 2 hours", "ports": "80/tcp", "names": "web"},
			{"container_id": "0f9e8d7c6b5a", "image": "redis", "status": "Exited (0)", "ports": "", "names": "cache"}},
		// ps: right-aligned numbers, a last column with spaces.
		"  PID TTY          TIME CMD\n    1 ?        00:00:02 init splash\n 4242 pts/0    00:00:00 bash\n": {
			{"pid": "1", "tty": "?", "time": "00:00:02", "cmd": "init splash"},
			{"pid": "4242", "tty": "pts/0", "time": "00:00:00", "cmd": "bash"}},
		// kubectl: a value that runs past its header ("2 hours ago" under AGE).
		"NAME   READY   AGE\napi    1/1     2 hours ago\n\n": {{"name": "api", "ready": "1/1", "age": "2 hours ago"}},
		// tab-separated, duplicate names, %CPU.
		"NAME\t%CPU\tNAME\nx\t1.5\ty\n": {{"name": "x", "cpu": "1.5", "name_2": "y"}},
		"":                              {},
		"ONLY A HEADER\n":               {},
	}
	for in, want := range cases {
		if got := ParseTable(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%q:\n got %v\nwant %v", in, got, want)
		}
	}
}

// TestToolMetadata: hints and output schemas from command annotations reach tools/list, and the
// heuristic on Args fills in positionals.
func TestToolMetadata(t *testing.T) {
	root := &cobra.Command{Use: "app"}
	run := func(*cobra.Command, []string) {}
	list := &cobra.Command{Use: "list", Run: run}
	SetAnnotations(list, ToolAnnotations{Title: "List", ReadOnlyHint: Bool(true), OpenWorldHint: Bool(false)})
	SetOutputSchema(list, &JSONSchema{Type: "array", Items: &Property{Type: "object", Properties: map[string]Property{"id": {Type: "string"}}}})
	rm := &cobra.Command{Use: "rm <name>", Run: run, Annotations: map[string]string{AnnotationDestructive: "true", AnnotationIdempotent: "true", AnnotationReadOnly: "maybe"}}
	search := &cobra.Command{Use: "search [query]", Args: cobra.ExactArgs(1), Run: run}
	pick := &cobra.Command{Use: "pick", Args: cobra.RangeArgs(1, 3), Run: run}
	exec := &cobra.Command{Use: "exec <pod>", Args: cobra.MinimumNArgs(1), Run: run}
	none := &cobra.Command{Use: "none <ignored>", Args: cobra.NoArgs, Run: run}
	valid := &cobra.Command{Use: "valid", ValidArgs: []string{"a\tthe a", "b"}, Args: cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs), Run: run}
	root.AddCommand(list, rm, search, pick, exec, none, valid)

	c := fixture.MCPClient(t, NewServer(root, nil), nil)
	tools, err := c.ListTools(context.Background(), &sdk.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range tools.Tools {
		byName[tl.Name] = tl
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	if got := js(byName["app_list"].Annotations); got != `{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true,"title":"List"}` {
		t.Errorf("list annotations %s", got)
	}
	if got := js(byName["app_list"].OutputSchema); got != `{"properties":{"result":{"items":{"properties":{"id":{"type":"string"}},"type":"object"},"type":"array"}},"required":["result"],"type":"object"}` {
		t.Errorf("list output schema %s", got)
	}
	if got := js(byName["app_rm"].Annotations); got != `{"destructiveHint":true,"idempotentHint":true,"readOnlyHint":false}` {
		t.Errorf("rm annotations %s (an unparsable readOnly counts as absent)", got)
	}
	if byName["app_search"].Annotations != nil || byName["app_search"].OutputSchema != nil {
		t.Errorf("search has metadata it did not declare: %s", js(byName["app_search"]))
	}
	positionals := map[string]string{
		"app_search": `{"properties":{"query":{"description":"query argument","type":"string"}},"required":["query"],"type":"object"}`,
		"app_none":   `{"type":"object"}`,
	}
	for name, want := range positionals {
		if got := js(byName[name].InputSchema); got != want {
			t.Errorf("%s input schema\n got %s\nwant %s", name, got, want)
		}
	}
	required := map[string][]string{"app_pick": {"arg1"}, "app_exec": {"pod"}, "app_valid": {"arg1"}}
	props := map[string][]string{"app_pick": {"arg1", "arg2", "arg3"}, "app_exec": {"args", "pod"}, "app_valid": {"arg1"}}
	for name, want := range required {
		var s struct {
			Properties map[string]any
			Required   []string
		}
		_ = json.Unmarshal([]byte(js(byName[name].InputSchema)), &s)
		var names []string
		for p := range s.Properties {
			names = append(names, p)
		}
		if sortStrings(names); !reflect.DeepEqual(s.Required, want) || !reflect.DeepEqual(names, props[name]) {
			t.Errorf("%s: properties %v required %v; want %v and %v", name, names, s.Required, props[name], want)
		}
	}
	args, err := BuildArgs(pick, map[string]any{"arg1": "a", "arg3": "c"})
	if err != nil || !reflect.DeepEqual(args, []string{"a", "c"}) {
		t.Errorf("pick args %q %v", args, err)
	}
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

// TestStructuredOutput: JSON, YAML and tables become structuredContent as the command declares
// or its output flag says; declared output that does not parse or does not match its schema is
// an error, not an unchecked result.
func TestStructuredOutput(t *testing.T) {
	var print string
	root := &cobra.Command{Use: "app"}
	mk := func(use string) *cobra.Command {
		c := &cobra.Command{Use: use, RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write([]byte(print))
			return err
		}}
		root.AddCommand(c)
		return c
	}
	plain := mk("plain")
	yml := mk("yml")
	SetOutputFormat(yml, FormatYAML)
	table := mk("table")
	SetOutputFormat(table, FormatTable)
	SetOutputSchema(table, &JSONSchema{Type: "array", Items: &Property{Type: "object", Required: []string{"name"}}})
	get := mk("get")
	get.Flags().StringP("output", "o", "", "format")
	typed := mk("typed")
	SetOutputSchema(typed, &JSONSchema{Type: "object", Properties: map[string]Property{"n": {Type: "integer"}}, Required: []string{"n"}})
	_ = plain

	cases := []struct {
		tool, out string
		args      map[string]any
		want      string // structuredContent as JSON; "error" for an isError result
	}{
		{"app_plain", "hello\n", nil, "null"},
		{"app_plain", `{"a": [1, 2]}`, nil, `{"a":[1,2]}`},
		{"app_plain", "[1, 2]\n", nil, `{"result":[1,2]}`},
		{"app_plain", "{not json", nil, "null"},
		{"app_yml", "a: 1\nb: [x, y]\n", nil, `{"a":1,"b":["x","y"]}`},
		{"app_yml", "1: one\n", nil, `{"1":"one"}`},
		{"app_yml", "--- a\n--- b\n", nil, `{"result":["a","b"]}`},
		{"app_yml", "a: [unclosed\n", nil, "error"},
		{"app_yml", "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", nil, "error"},
		{"app_table", "NAME   AGE\nweb    2d\n", nil, `{"result":[{"age":"2d","name":"web"}]}`},
		{"app_get", "name: x\n", map[string]any{"output": "yaml"}, `{"name":"x"}`},
		{"app_get", "NAME  SIZE\nx     2\n", map[string]any{"output": "wide"}, `{"result":[{"name":"x","size":"2"}]}`},
		{"app_get", "name: [\n", map[string]any{"output": "yaml"}, "null"},
		{"app_typed", `{"n": 3}`, nil, `{"n":3}`},
		{"app_typed", `{"n": "three"}`, nil, "error"},
		{"app_typed", "", nil, "error"},
	}
	for _, tc := range cases {
		print = tc.out
		res, err := ExecuteMCPTool(root, tc.tool, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		got := "error"
		if !res.IsError {
			b, _ := json.Marshal(res.StructuredContent)
			got = string(b)
			if res.Content[0].Text != tc.out {
				t.Errorf("%s %q: text %q", tc.tool, tc.out, res.Content[0].Text)
			}
		}
		if got != tc.want {
			t.Errorf("%s %q: %s, want %s (%v)", tc.tool, tc.out, got, tc.want, res.Content)
		}
	}
}

// TestBadOutputSchemaPanics: an output schema annotation that is not a schema stops NewServer,
// as the SDK's AddTool does on a bad tool.
func TestBadOutputSchemaPanics(t *testing.T) {
	root := &cobra.Command{Use: "app"}
	root.AddCommand(&cobra.Command{Use: "x", Run: func(*cobra.Command, []string) {}, Annotations: map[string]string{AnnotationOutputSchema: `{"type": 7}`}})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), AnnotationOutputSchema) {
			t.Errorf("recovered %v", r)
		}
	}()
	NewServer(root, nil)
}
