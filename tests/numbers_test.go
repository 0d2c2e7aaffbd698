package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/internal/fixture"
)

// The digits every front end must deliver to the CLI exactly: float64 would turn n into
// 12345678901234568, x into 0.1 and k into 1.2345678901234568e+29.
const (
	bigN     = "12345678901234567"
	preciseX = "0.10000000000000000001"
	bigK     = "123456789012345678901234567890"
	digits   = bigN + " " + preciseX + ` {"k":` + bigK + "}\n"
)

// echoBundle is a folder with bundle "echo": tool say echoes an integer, a number and an object
// (as JSON), so a call's result shows the exact text the CLI received.
func echoBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "echo", "CLI.md"), fixture.CLI("echo", "echo", "  say: ./tools/say/TOOL.md\n"))
	writeFile(t, filepath.Join(dir, "echo", "tools", "say", "TOOL.md"), `---
name: Say
id: echo.say
description: Echoes numbers.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties:
    n: { type: integer, maximum: `+bigN+` }
    x: { type: number }
    obj: { type: object }
  required: [n, x, obj]
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.n}", "${input.x}", "${input.obj | json()}"] }
---
`)
	return dir
}

const digitsInput = `{"n": ` + bigN + `, "x": ` + preciseX + `, "obj": {"k": ` + bigK + `}}`

func callValue(t *testing.T, r result) string {
	t.Helper()
	var env struct {
		OK    bool
		Value any
		Error any
	}
	if err := json.Unmarshal([]byte(r.stdout), &env); err != nil || !env.OK {
		t.Fatalf("call: exit %d %v %+v\n%s%s", r.code, err, env.Error, r.stdout, r.stderr)
	}
	s, _ := env.Value.(string)
	return s
}

// TestNumbersKeepEveryDigit calls the echo bundle through each front end (clihostctl call in
// process and through the daemon's control API, MCP tools mode and ACLI over the daemon's HTTP)
// and checks the CLI printed exactly the digits sent.
func TestNumbersKeepEveryDigit(t *testing.T) {
	fixture.Need(t, "echo")
	dir := echoBundle(t)
	t.Run("clihostctl call in process", func(t *testing.T) {
		ws := fixture.Workspace(t)
		r := runBin(t, bin.ctl, "", "--bundles", dir, "call", "echo", "say", "--workspace", ws, "--input", digitsInput)
		if got := callValue(t, r); got != digits {
			t.Fatalf("got %q, want %q", got, digits)
		}
		r = runBin(t, bin.ctl, "", "--bundles", dir, "call", "echo", "say", "--workspace", ws, "--input", digitsInput+` {"n": 1}`)
		if r.code != 2 || !strings.Contains(r.stderr, "more data after the JSON value") {
			t.Fatalf("trailing data: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Schema validation computes with exact values (math/big): 1e99999999 crashed it.
		r = runBin(t, bin.ctl, "", "--bundles", dir, "call", "echo", "say", "--workspace", ws, "--input", strings.Replace(digitsInput, bigN, "1e99999999", 1))
		if r.code != 2 || !strings.Contains(r.stderr, "exponent is beyond") || strings.Contains(r.stderr, "panic") {
			t.Fatalf("unbounded exponent: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	d := startDaemon(t, t.TempDir(), "--bundles", dir, "--no-catalog")
	t.Run("clihostctl call through the daemon", func(t *testing.T) {
		r := d.ctl(t, "call", "echo", "say", "--workspace", d.ws, "--input", digitsInput)
		if got := callValue(t, r); got != digits {
			t.Fatalf("got %q, want %q", got, digits)
		}
		r = d.ctl(t, "call", "echo", "say", "--workspace", d.ws, "--input", digitsInput+`]`)
		if r.code != 2 || !strings.Contains(r.stderr, "more data after the JSON value") {
			t.Fatalf("trailing data: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	var tok struct{ Token string }
	if r := d.ctl(t, "token", "--json"); json.Unmarshal([]byte(r.stdout), &tok) != nil || tok.Token == "" {
		t.Fatalf("token: %+v", r)
	}
	connect := func(t *testing.T, path string) *sdk.ClientSession {
		t.Helper()
		c, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(),
			&sdk.StreamableClientTransport{Endpoint: d.mcp + path, HTTPClient: &http.Client{Transport: bearer{tok.Token}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	t.Run("MCP tools mode over HTTP", func(t *testing.T) {
		res, err := connect(t, "/mcp/echo").CallTool(context.Background(), &sdk.CallToolParams{Name: "say", Arguments: json.RawMessage(digitsInput)})
		if err != nil || res.IsError || len(res.Content) != 1 {
			t.Fatalf("call: %v %+v", err, res)
		}
		if got := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(got, strings.TrimSuffix(digits, "\n")) {
			t.Fatalf("got %q, want %q", got, digits)
		}
	})
	t.Run("ACLI over HTTP", func(t *testing.T) {
		cmd := "say --n " + bigN + " --x " + preciseX + ` --obj '{"k": ` + bigK + `}'`
		res, err := connect(t, "/mcp/echo/acli").CallTool(context.Background(), &sdk.CallToolParams{Name: "cli", Arguments: map[string]any{"command": cmd}})
		if err != nil || res.IsError || len(res.Content) == 0 {
			t.Fatalf("call: %v %+v", err, res)
		}
		var out struct {
			Success bool
			Data    any
		}
		text := res.Content[0].(*sdk.TextContent).Text
		if err := json.Unmarshal([]byte(text), &out); err != nil || !out.Success || out.Data != digits {
			t.Fatalf("got %s (%v), want data %q", text, err, digits)
		}
	})
}
