package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// TestAgentCannotChooseTheWorkspace: MCP over HTTP runs every call in the workspace the operator
// configured (clihostd --workspace). Nothing an MCP client sends selects another: not an input
// named like a workspace, not _meta, not an ACLI flag.
func TestAgentCannotChooseTheWorkspace(t *testing.T) {
	fixture.Need(t, "pwd")
	files := map[string]string{
		"pwd/CLI.md": fixture.CLI("pwd", "pwd", "  here: ./tools/here/TOOL.md\n"),
		"pwd/tools/here/TOOL.md": `---
name: Here
id: pwd.here
description: Prints the working directory.
version: 1.0.0
inputs: { type: object, additionalProperties: true, properties: { label: { type: string } } }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["-P"] }
---
`,
	}
	h := host.New(fixture.Registry(t, files), host.Options{})
	ws, other := fixture.Workspace(t), fixture.Workspace(t)
	tools := connect(t, h, "pwd", Options{Caller: host.Caller{Workspace: ws}})
	res, err := tools.CallTool(context.Background(), &sdk.CallToolParams{Name: "here",
		Arguments: map[string]any{"workspace": other, "cwd": other, "dir": other, "Workspace": other},
		Meta:      sdk.Meta{"workspace": other, "cwd": other}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if got := strings.TrimSpace(text(t, res)); got != ws {
		t.Fatalf("ran in %q, want the configured workspace %s", got, ws)
	}
	acli := connect(t, h, "pwd", Options{Caller: host.Caller{Workspace: ws}, ACLI: true})
	for _, cmd := range []string{"here --workspace " + other, "here --cwd " + other, "--workspace " + other + " here"} {
		res, err := acli.CallTool(context.Background(), &sdk.CallToolParams{Name: "cli", Arguments: map[string]any{"command": cmd, "workspace": other}})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(text(t, res)), &m); err != nil {
			t.Fatal(err)
		}
		if data, _ := m["data"].(string); strings.Contains(data, other) || m["success"] == true && strings.TrimSpace(data) != ws {
			t.Fatalf("ACLI %q ran in %v", cmd, m)
		}
	}
}
