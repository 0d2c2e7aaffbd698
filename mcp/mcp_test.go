package mcp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/registry"
)

func newHost(t *testing.T) *host.Host {
	t.Helper()
	reg, err := registry.Load(registry.EmbeddedSource())
	if err != nil {
		t.Fatal(err)
	}
	return host.New(reg, host.Options{})
}

// connect runs the bundle's server in memory and returns a connected client session.
func connect(t *testing.T, h *host.Host, bundle string, o Options) *sdk.ClientSession {
	t.Helper()
	b, err := h.Bundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return fixture.MCPClient(t, NewServer(h, b, o), nil)
}

func text(t *testing.T, r *sdk.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("content %+v", r.Content)
	}
	tc, ok := r.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("content %T", r.Content[0])
	}
	return tc.Text
}

func TestToolsModeListsEveryToolWithPaging(t *testing.T) {
	h := newHost(t)
	c := connect(t, h, "gh", Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}, PageSize: 3})
	var names []string
	var cursor string
	pages := 0
	for {
		res, err := c.ListTools(context.Background(), &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
			if tl.Name == "pr_list" {
				if !tl.Annotations.ReadOnlyHint || !strings.Contains(tl.Description, "Runs `gh pr list`") || tl.InputSchema == nil {
					t.Errorf("pr_list: %+v", tl)
				}
			}
			if tl.Name == "pr_create" && (tl.Annotations.ReadOnlyHint || tl.Annotations.OpenWorldHint == nil || !*tl.Annotations.OpenWorldHint) {
				t.Errorf("pr_create annotations %+v", tl.Annotations)
			}
		}
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	b, _ := h.Bundle("gh")
	if len(names) != len(b.Tools) || pages < 3 {
		t.Fatalf("%d tools over %d pages: %v", len(names), pages, names)
	}
}

func TestToolsModeCalls(t *testing.T) {
	fixture.Need(t, "jq")
	h := newHost(t)
	c := connect(t, h, "jq", Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}})
	res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "eval", Arguments: map[string]any{"json": `{"a":"b"}`, "filter": ".a", "raw_output": true}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(t, res) != "b\n" {
		t.Fatalf("eval: %+v %q", res, text(t, res))
	}
	res, err = c.CallTool(context.Background(), &sdk.CallToolParams{Name: "eval", Arguments: map[string]any{"json": `{}`}})
	if err != nil {
		t.Fatal(err)
	}
	var env host.Envelope
	if err := json.Unmarshal([]byte(text(t, res)), &env); err != nil || !res.IsError || env.Error.Code != "input_invalid" {
		t.Fatalf("missing filter: %+v %s", res, text(t, res))
	}
}

func TestACLIMode(t *testing.T) {
	fixture.Need(t, "jq")
	h := newHost(t)
	c := connect(t, h, "jq", Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}, ACLI: true})
	tools, err := c.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "cli" {
		t.Fatalf("tools %+v %v", tools, err)
	}
	call := func(cmd string) (map[string]any, bool) {
		res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "cli", Arguments: map[string]any{"command": cmd}})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(text(t, res)), &m); err != nil {
			t.Fatal(err)
		}
		return m, res.IsError
	}
	m, isErr := call(`eval --json '{"a":[1,2]}' --filter '.a | add'`)
	if isErr || m["success"] != true || m["data"] != "3\n" {
		t.Fatalf("eval: %v", m)
	}
	m, isErr = call("help")
	if isErr || m["success"] != true {
		t.Fatalf("help: %v", m)
	}
	m, isErr = call("frobnicate now")
	e, _ := m["error"].(map[string]any)
	if !isErr || e["code"] != "COMMAND_NOT_FOUND" {
		t.Fatalf("unknown command: %v", m)
	}
	m, _ = call(`eval --filter .`)
	e, _ = m["error"].(map[string]any)
	if e["code"] != "VALIDATION_ERROR" {
		t.Fatalf("missing input: %v", m)
	}
}

func TestHTTPHandler(t *testing.T) {
	fixture.Need(t, "jq")
	h := newHost(t)
	srv := httptest.NewServer(Handler(h, Options{Caller: host.Caller{Workspace: fixture.Workspace(t)}}))
	defer srv.Close()
	for path, tool := range map[string]string{"/mcp/jq": "eval", "/mcp/jq@1/acli": "cli"} {
		c, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + path}, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		res, err := c.ListTools(context.Background(), nil)
		if err != nil || len(res.Tools) == 0 || (tool == "cli") != (len(res.Tools) == 1) {
			t.Fatalf("%s: %v %v", path, res, err)
		}
		found := false
		for _, tl := range res.Tools {
			found = found || tl.Name == tool
		}
		if !found {
			t.Fatalf("%s lacks %s", path, tool)
		}
		c.Close()
	}
	if _, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp/nope"}, nil); err == nil {
		t.Fatal("unknown bundle connected")
	}
}
