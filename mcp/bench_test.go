package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// bigBundle is a bundle of n tools (each with its own input schema) running /usr/bin/true.
func bigBundle(tb testing.TB, n int) *host.Host {
	tb.Helper()
	files := map[string]string{}
	var cmds strings.Builder
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("t%03d", i)
		fmt.Fprintf(&cmds, "  %s: ./tools/%s/TOOL.md\n", name, name)
		files["big/tools/"+name+"/TOOL.md"] = fmt.Sprintf(`---
name: Tool %d
id: big.%s
description: Tool number %d of a large bundle, for benchmarks.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { label: { type: string, description: "a label" }, n%d: { type: integer, minimum: 0 } } }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [%s, "${input.label | optional('--label=')}"] }
---
`, i, name, i, i, name)
	}
	files["big/CLI.md"] = fixture.CLI("true", "big", cmds.String())
	return host.New(fixture.Registry(tb, files), host.Options{})
}

// BenchmarkToolsList200 lists all tools of a 200-tool bundle (one page at the default page size) with
// a raw JSON-RPC request to the stateless HTTP endpoint over loopback and reads the whole response:
// the server's cost, without an SDK client's decoding and validation of what it receives.
func BenchmarkToolsList200(b *testing.B) {
	h := bigBundle(b, 200)
	srv := httptest.NewServer(Handler(h, Options{Caller: host.Caller{Workspace: fixture.Workspace(b)}}))
	defer srv.Close()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`)
	for b.Loop() {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp/big", bytes.NewReader(body))
		setStreamableHeaders(req.Header)
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%d %v %s", resp.StatusCode, err, out)
		}
		if n := bytes.Count(out, []byte(`"name":"t`)); n != 200 || bytes.Contains(out, []byte("nextCursor")) {
			b.Fatalf("listed %d tools in one page: %.300s", n, out)
		}
	}
}

// BenchmarkHTTPToolsCall calls a trivial tool through the streamable-HTTP endpoint (a new stateless
// request each time, over loopback); BenchmarkHostCall is the same call made directly.
func BenchmarkHTTPToolsCall(b *testing.B) {
	h := bigBundle(b, 1)
	srv := httptest.NewServer(Handler(h, Options{Caller: host.Caller{Workspace: fixture.Workspace(b)}}))
	defer srv.Close()
	c, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp/big"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "t000", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

func BenchmarkHostCall(b *testing.B) {
	h := bigBundle(b, 1)
	bd, err := h.Bundle("big")
	if err != nil {
		b.Fatal(err)
	}
	caller := host.Caller{Workspace: fixture.Workspace(b)}
	for b.Loop() {
		if env := h.Call(context.Background(), bd, "t000", map[string]any{}, caller, host.CallOptions{}); !env.OK {
			b.Fatalf("%+v", env.Error)
		}
	}
}

// BenchmarkHTTPRouting is the HTTP endpoint's own work for one request, in process and without a
// tool run: a `ping` to /mcp/b050 of a daemon serving 100 bundles, named by id as agents do,
// through Handler's routing, the bundle look-up and the SDK's stateless session, answered into
// a recorder.
func BenchmarkHTTPRouting(b *testing.B) {
	files := map[string]string{}
	for i := range 100 {
		id := fmt.Sprintf("b%03d", i)
		files[id+"/CLI.md"] = fixture.CLI("true", id, "  run: ./tools/run/TOOL.md\n")
		files[id+"/tools/run/TOOL.md"] = strings.ReplaceAll(fixture.True()["true/tools/run/TOOL.md"], "true.run", id+".run")
	}
	h := host.New(fixture.Registry(b, files), host.Options{})
	handler := Handler(h, Options{Caller: host.Caller{Workspace: fixture.Workspace(b)}})
	body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}`
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/mcp/b050", strings.NewReader(body))
		setStreamableHeaders(req.Header)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"result"`) {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
