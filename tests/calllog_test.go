package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallLogLine: clihostd --log-format json logs every line as JSON, and one line per call with
// the audit line's call id, the bundle, the tool, the duration, the outcome and the agent, never
// an argument value; a failed call's line carries its error code.
func TestCallLogLine(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--log-format", "json")
	r := d.ctl(t, "token", "create", "logbot")
	token := strings.TrimSpace(r.stdout)
	if r.code != 0 {
		t.Fatalf("token create: %s", r.stderr)
	}
	hc := &http.Client{Transport: bearer{token}}
	c, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "0"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: d.mcp + "/mcp/jq", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const marker = "ARGUMENT-VALUE-7f3a"
	res, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "eval", Arguments: map[string]any{"json": `{"a":"` + marker + `"}`, "filter": ".a"}})
	if err != nil || res.IsError {
		t.Fatalf("eval: %v %+v", err, res)
	}
	if _, err := c.CallTool(context.Background(), &sdk.CallToolParams{Name: "eval", Arguments: map[string]any{"json": "{", "filter": "." + marker}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.log.Wait(`"msg":"call"`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the second call's line
	audit, _ := os.ReadFile(filepath.Join(d.state, "audit.jsonl"))
	var calls []map[string]any
	for _, l := range d.log.All() {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("a log line is not JSON: %q", l)
			continue
		}
		if strings.Contains(l, marker) || strings.Contains(l, token) {
			t.Errorf("a log line holds an argument value or the token: %s", l)
		}
		if m["msg"] == "call" {
			calls = append(calls, m)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("%d call lines, want 2", len(calls))
	}
	for i, want := range []string{"ok", "input_invalid"} {
		m := calls[i]
		id, _ := m["call_id"].(string)
		if id == "" || !strings.Contains(string(audit), `"call_id":"`+id+`"`) || m["bundle"] != "jq" || m["tool"] != "jq.eval" || m["agent"] != "logbot" {
			t.Errorf("call line %v: want the audit's call id, bundle jq, tool jq.eval, agent logbot", m)
		}
		if _, ok := m["duration_ms"].(float64); !ok {
			t.Errorf("call line %v: no duration_ms", m)
		}
		if out, _ := m["outcome"].(string); out != want && !(i == 1 && out != "ok" && out != "") {
			t.Errorf("call line %d: outcome %v, want %s", i, m["outcome"], want)
		}
	}
}
