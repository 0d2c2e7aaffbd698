package cobramcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newTree is a small program: nested commands, every common flag type, persistent and required
// flags, hidden and deprecated commands and flags. Each command prints the flags it received
// (name=value for the changed ones, sorted) and its arguments as JSON.
func newTree(stdout io.Writer) *cobra.Command {
	report := func(cmd *cobra.Command, args []string) error {
		got := map[string]any{"args": args}
		var set []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Changed {
				set = append(set, f.Name+"="+f.Value.String())
			}
		})
		got["flags"] = set
		b, _ := json.Marshal(got)
		fmt.Fprintln(cmd.OutOrStdout(), string(b))
		return nil
	}
	root := &cobra.Command{Use: "gitx", Short: "fixture", Version: "1.0.0"}
	if stdout != nil {
		root.SetOut(stdout)
	}
	root.PersistentFlags().StringP("repo", "R", "", "repository")
	root.PersistentFlags().CountP("verbose", "v", "verbosity")
	remote := &cobra.Command{Use: "remote", Short: "Manage remotes"}
	add := &cobra.Command{Use: "add <name> <url>", Short: "Add a remote", RunE: report}
	f := add.Flags()
	f.String("branch", "main", "default branch")
	f.Int("depth", 0, "depth")
	f.Float64("ratio", 0.5, "ratio")
	f.Uint("retries", 3, "retries")
	f.Bool("mirror", false, "mirror")
	f.StringSlice("track", nil, "track")
	f.StringArray("header", nil, "headers")
	f.IntSlice("ports", nil, "ports")
	f.StringToString("label", nil, "labels")
	f.Duration("timeout", 30*time.Second, "timeout")
	f.IP("bind", nil, "bind")
	f.String("old", "", "old")
	_ = f.MarkDeprecated("old", "gone")
	f.String("secret", "", "hidden")
	_ = f.MarkHidden("secret")
	_ = add.MarkFlagRequired("branch")
	rm := &cobra.Command{Use: "remove <name>...", Short: "Remove", RunE: report}
	fail := &cobra.Command{Use: "fail", Short: "Fails", RunE: func(cmd *cobra.Command, _ []string) error {
		fmt.Fprintln(cmd.ErrOrStderr(), "it broke")
		return errors.New("exit 1")
	}}
	remote.AddCommand(add, rm, fail)
	root.AddCommand(remote,
		&cobra.Command{Use: "hidden", Hidden: true, RunE: report},
		&cobra.Command{Use: "legacy", Deprecated: "no", RunE: report},
		&cobra.Command{Use: "json", Short: "prints JSON", RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), `{"a": [1, 2]}`)
			return nil
		}})
	return root
}

func TestCommandToMCPTool(t *testing.T) {
	root := newTree(nil)
	var names []string
	for _, c := range Commands(root, nil) {
		names = append(names, ToolName(c))
	}
	if want := []string{"gitx_json", "gitx_remote_add", "gitx_remote_fail", "gitx_remote_remove"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	add, _, _ := root.Find([]string{"remote", "add"})
	tool := CommandToMCPTool(add)
	got, _ := json.Marshal(tool.InputSchema)
	var schema struct {
		Properties map[string]map[string]any
		Required   []string
	}
	_ = json.Unmarshal(got, &schema)
	types := map[string]string{}
	for n, p := range schema.Properties {
		types[n] = fmt.Sprint(p["type"])
	}
	want := map[string]string{"repo": "string", "verbose": "integer", "branch": "string", "depth": "integer", "ratio": "number",
		"retries": "integer", "mirror": "boolean", "track": "array", "header": "array", "ports": "array", "label": "object",
		"timeout": "string", "bind": "string", "name": "string", "url": "string"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("types\n got %v\nwant %v", types, want)
	}
	if !reflect.DeepEqual(schema.Required, []string{"branch", "name", "url"}) {
		t.Errorf("required %v", schema.Required)
	}
	p := schema.Properties
	if p["timeout"]["pattern"] == nil || p["timeout"]["default"] != "30s" || p["branch"]["default"] != "main" || p["retries"]["minimum"] != 0.0 ||
		p["bind"]["format"] != "ipv4" || p["label"]["additionalProperties"] == nil || p["ports"]["items"].(map[string]any)["type"] != "integer" {
		t.Errorf("schema details: %s", got)
	}
	if tool.Name != "gitx_remote_add" || !strings.HasPrefix(tool.Description, "gitx remote add: Add a remote") {
		t.Errorf("tool %q %q", tool.Name, tool.Description)
	}
}

func TestExecuteMCPTool(t *testing.T) {
	root := newTree(nil)
	call := func(name, args string) *MCPResult {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(args), &m); err != nil {
			t.Fatal(err)
		}
		res, err := ExecuteMCPTool(root, name, m)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := call("gitx_remote_add", `{"name": "o", "url": "-u", "branch": "dev", "repo": "a/b", "verbose": 2, "mirror": true,
		"track": ["a", "b"], "header": ["X: 1", "Y: 2"], "ports": [1, 2], "label": {"k": "v", "a": "b"}, "timeout": "1m", "ratio": 0.25}`)
	want := `{"args":["o","-u"],"flags":["branch=dev","header=[X: 1,Y: 2]","label=[a=b,k=v]","mirror=true","ports=[1,2]","ratio=0.25","repo=a/b","timeout=1m0s","track=[a,b]","verbose=2"]}`
	if res.IsError || strings.TrimSpace(res.Content[0].Text) != want {
		t.Fatalf("got %+v\nwant %s", res, want)
	}
	// Flags of the previous call do not leak into the next one.
	res = call("gitx_remote_add", `{"name": "o", "url": "u", "branch": "x"}`)
	if want := `{"args":["o","u"],"flags":["branch=x"]}`; strings.TrimSpace(res.Content[0].Text) != want {
		t.Fatalf("second call: %s", res.Content[0].Text)
	}
	res = call("gitx_remote_remove", `{"name": ["a", "b"]}`)
	if want := `{"args":["a","b"],"flags":null}`; strings.TrimSpace(res.Content[0].Text) != want {
		t.Fatalf("variadic: %s", res.Content[0].Text)
	}
	for _, bad := range []string{`{"name": "o", "url": "u"}`, `{"name": "o", "url": "u", "branch": "b", "nope": 1}`,
		`{"name": "o", "url": "u", "branch": "b", "mirror": "yes"}`, `{"name": ["o"], "url": "u", "branch": "b"}`} {
		if res := call("gitx_remote_add", bad); !res.IsError {
			t.Errorf("%s was accepted: %+v", bad, res)
		}
	}
	if res := call("gitx_remote_fail", `{}`); !res.IsError || !strings.Contains(res.Content[0].Text, "it broke") {
		t.Errorf("failure: %+v", res)
	}
	if _, err := ExecuteMCPTool(root, "gitx_hidden", nil); !errors.Is(err, ErrToolNotFound) {
		t.Errorf("hidden command ran: %v", err)
	}
}

// TestServer drives the bridge through the MCP SDK's client: tools/list and tools/call, with a
// filter, PreExecute, OutputParser, ErrorHandler, Logger and Factory.
func TestServer(t *testing.T) {
	var logged []string
	opts := &Options{
		ServerInfo:    ServerInfo{Name: "gitx", Version: "1.0.0"},
		CommandFilter: func(c *cobra.Command) bool { return DefaultFilter(c) && c.Name() != "fail" },
		PreExecute:    func(c *cobra.Command) error { return nil },
		OutputParser: func(raw string, c *cobra.Command) (interface{}, error) {
			var v any
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				return nil, err
			}
			return v, nil
		},
		ErrorHandler: func(err error) *MCPError { return &MCPError{Code: 1, Message: "failed: " + err.Error()} },
		Logger:       loggerFunc(func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }),
		Factory:      func(stdout, _ io.Writer) *cobra.Command { return newTree(stdout) },
	}
	ctx := context.Background()
	c := fixture.MCPClient(t, NewServer(newTree(nil), opts), nil)
	names := fixture.MCPToolNames(t, c)
	if want := []string{"gitx_json", "gitx_remote_add", "gitx_remote_remove"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("tools %v", names)
	}
	res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "gitx_json", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res.StructuredContent); res.IsError || string(got) != `{"a":[1,2]}` {
		t.Fatalf("json: %s %+v", got, res)
	}
	res, err = c.CallTool(ctx, &sdk.CallToolParams{Name: "gitx_remote_add", Arguments: map[string]any{"name": "o"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, _ := res.Content[0].(*sdk.TextContent); !res.IsError || tc == nil || !strings.HasPrefix(tc.Text, "failed: ") {
		t.Fatalf("missing required: %+v", res)
	}
	if _, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "gitx_remote_fail", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a filtered-out tool was called")
	}
	if len(logged) == 0 {
		t.Error("nothing logged")
	}
}

type loggerFunc func(string, ...any)

func (f loggerFunc) Printf(format string, args ...any) { f(format, args...) }

// TestBuildArgsPositionalNamedLikeHiddenFlag: a positional whose name only a hidden flag has keeps
// its name in the schema, and BuildArgs passes it as a positional, not as that flag.
func TestBuildArgsPositionalNamedLikeHiddenFlag(t *testing.T) {
	cmd := &cobra.Command{Use: "get <name>", Run: func(*cobra.Command, []string) {}}
	cmd.Flags().String("name", "", "")
	_ = cmd.Flags().MarkHidden("name")
	if _, ok := CommandToMCPTool(cmd).InputSchema.Properties["name"]; !ok {
		t.Fatal("positional name missing from the schema")
	}
	args, err := BuildArgs(cmd, map[string]any{"name": "x"})
	if err != nil || !reflect.DeepEqual(args, []string{"x"}) {
		t.Fatalf("args %q, %v", args, err)
	}
}
