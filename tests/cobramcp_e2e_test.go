package tests

// The cobramcp bridge end to end: a real Cobra program built with it (cobramcp/internal/demo) and
// `clihostctl mcp-self`, served over stdio and driven by the official TypeScript SDK clients.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildDemo builds cobramcp's demo program.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("go", "build", "-o", bin, "../cobramcp/internal/demo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build demo: %v\n%s", err, out)
	}
	return bin
}

// TestCobraMCPBridgeStdio: commands that print with fmt.Println, write 1 MiB to os.Stdout, run
// echo, panic and read stdin keep the stdio stream valid for both TypeScript clients, each result
// holds its own output, and declared tables, YAML and output schemas arrive as structured content
// the clients accept (SDK v1 checks structuredContent against the tool's outputSchema).
func TestCobraMCPBridgeStdio(t *testing.T) {
	requireNodeModules(t)
	demo := buildDemo(t)
	steps := []step{
		{"op": "list"},
		{"op": "call", "name": "demo_println", "arguments": map[string]any{"words": []string{"hello", "world"}}},
		{"op": "call", "name": "demo_big", "arguments": map[string]any{}},
		{"op": "call", "name": "demo_spawn", "arguments": map[string]any{"text": "from echo"}},
		{"op": "call", "name": "demo_panic", "arguments": map[string]any{}},
		{"op": "call", "name": "demo_stdin", "arguments": map[string]any{}},
		{"op": "call", "name": "demo_list", "arguments": map[string]any{}},
		{"op": "call", "name": "demo_config", "arguments": map[string]any{}},
		{"op": "call", "name": "demo_get", "arguments": map[string]any{"name": "x", "output": "yaml"}},
		{"op": "call", "name": "demo_println", "arguments": map[string]any{"words": []string{"last"}}},
	}
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			rep := runClient(t, client, target{"stdio", []string{"--stdio", "env", "MCP_MODE=true", demo}}, steps)
			var list struct {
				Tools []struct {
					Name         string          `json:"name"`
					Annotations  map[string]any  `json:"annotations"`
					OutputSchema json.RawMessage `json:"outputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(rep.Steps[0].Result, &list); err != nil {
				t.Fatalf("list: %v %s", err, rep.Steps[0].Result)
			}
			for _, tl := range list.Tools {
				switch tl.Name {
				case "demo_list":
					if tl.Annotations["readOnlyHint"] != true || tl.Annotations["openWorldHint"] != false || !strings.Contains(string(tl.OutputSchema), `"result"`) {
						t.Errorf("demo_list: %v %s", tl.Annotations, tl.OutputSchema)
					}
				case "demo_remove":
					if tl.Annotations["destructiveHint"] != true {
						t.Errorf("demo_remove: %v", tl.Annotations)
					}
				}
			}
			res := make([]toolResult, len(steps))
			for i, s := range rep.Steps[1:] {
				if s.Error != nil {
					t.Fatalf("step %d (%s): %+v", i+1, callDesc(steps[i+1]), s.Error)
				}
				if err := json.Unmarshal(s.Result, &res[i+1]); err != nil {
					t.Fatal(err)
				}
			}
			if got := res[1].text(); got != "hello world\n" {
				t.Errorf("println: %q", got)
			}
			if got := res[2].text(); len(got) != 1<<20 {
				t.Errorf("big: %d bytes", len(got))
			}
			if got := res[3].text(); got != "from echo\n" {
				t.Errorf("spawn: %q", got)
			}
			if got := res[4].text(); !res[4].IsError || !strings.Contains(got, "boom") {
				t.Errorf("panic: %v %q", res[4].IsError, got)
			}
			if got := res[5].text(); got != "read 0 bytes\n" {
				t.Errorf("stdin: %q", got)
			}
			wantStructured := map[int]string{
				6: `{"result":[{"created":"2 hours ago","id":"1","name":"web","status":"Up 2 hours"},{"created":"3 days ago","id":"22","name":"db","status":""}]}`,
				7: `{"name":"demo","ports":[80,443],"replicas":3}`,
				8: `{"name":"x","size":2}`,
			}
			for i, want := range wantStructured {
				var v any
				_ = json.Unmarshal(res[i].StructuredContent, &v)
				if got, _ := json.Marshal(v); string(got) != want || res[i].IsError {
					t.Errorf("%s: structured %s, want %s", callDesc(steps[i]), got, want)
				}
			}
			if got := res[9].text(); got != "last\n" {
				t.Errorf("last: %q", got)
			}
		})
	}
}

// TestMCPSelfStdio: `clihostctl mcp-self` on its real stdin and stdout, its tools marked
// read-only.
func TestMCPSelfStdio(t *testing.T) {
	requireNodeModules(t)
	steps := []step{{"op": "list"}, {"op": "call", "name": "clihostctl_version", "arguments": map[string]any{}}}
	rep := runClient(t, "client.mjs", target{"stdio", []string{"--stdio", bin.ctl, "mcp-self"}}, steps)
	if !strings.Contains(string(rep.Steps[0].Result), `"readOnlyHint":true`) {
		t.Errorf("list: %s", rep.Steps[0].Result)
	}
	var res toolResult
	if err := json.Unmarshal(rep.Steps[1].Result, &res); err != nil || res.IsError || !strings.Contains(res.text(), "clihostctl") {
		t.Errorf("version: %s %v", rep.Steps[1].Result, err)
	}
}
