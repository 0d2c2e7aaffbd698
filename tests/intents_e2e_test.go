package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jqIntent is an INTENT.md (AIP-28) for the jq bundle: its inputs become the prompt's arguments.
const jqIntent = `---
name: Sum numbers
id: jq.sum
label: { en: "Sum numbers", fr: "Additionner" }
description: Add up the numbers of a JSON array.
version: 1.0.0
intent: ["sum these numbers", "add up"]
surfaces: [chat]
inputs:
  - { name: numbers, label: Numbers, type: text, required: true, hint: "a JSON array of numbers" }
  - { name: filter, label: Filter, type: text, default: add }
  - { name: compact, label: Compact, type: toggle, default: false }
implements:
  - tool: ./tools/eval/TOOL.md
    default: true
    mapping:
      numbers: json
---
`

// TestIntentsAsPromptsOverHTTP serves a jq bundle shipping an INTENT.md from clihostd and reads it
// with the official TypeScript SDK clients (v1 and v2) over HTTP, in tools mode and ACLI mode:
// prompts/list shows the intent with its inputs as arguments, prompts/get routes the arguments to
// the tool.
func TestIntentsAsPromptsOverHTTP(t *testing.T) {
	requireNodeModules(t)
	dir := filepath.Join(t.TempDir(), "jq")
	if err := os.CopyFS(dir, os.DirFS("../bundles/jq")); err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "CLI.md")
	data, err := os.ReadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cli, strings.Replace(string(data), "\ncommands:\n", "\nintents:\n  - { ref: ./intents/sum/INTENT.md }\ncommands:\n", 1))
	writeFile(t, filepath.Join(dir, "intents", "sum", "INTENT.md"), jqIntent)
	d := startDaemon(t, t.TempDir(), "--bundles", filepath.Dir(dir))
	var tok struct{ Token string }
	if r := d.ctl(t, "token", "--json"); json.Unmarshal([]byte(r.stdout), &tok) != nil || tok.Token == "" {
		t.Fatalf("token: %+v", r)
	}
	for _, run := range []struct {
		client   string
		acliMode bool
	}{{"client.mjs", false}, {"client.mjs", true}, {"client2.mjs", false}, {"client2.mjs", true}} {
		acliMode := run.acliMode
		tgt := httpTarget(d.mcp, "jq", acliMode)
		tgt.args = append(tgt.args, "--bearer", tok.Token)
		rep := runClient(t, run.client, tgt, []step{
			{"op": "prompts"},
			{"op": "prompt", "name": "jq.sum", "arguments": map[string]any{"numbers": "[1,2,3]", "compact": "true"}},
			{"op": "prompt", "name": "jq.sum", "arguments": map[string]any{"numbers": "[1]", "compact": "maybe"}},
			{"op": "prompt", "name": "jq.sum", "arguments": map[string]any{}},
		})
		var list struct {
			Prompts []struct {
				Name, Title, Description string
				Arguments                []struct {
					Name, Title, Description string
					Required                 bool
				}
			}
		}
		if err := json.Unmarshal(rep.Steps[0].Result, &list); err != nil || len(list.Prompts) != 1 {
			t.Fatalf("%s acli=%v prompts/list: %s %v", run.client, acliMode, rep.Steps[0].Result, rep.Steps[0].Error)
		}
		p := list.Prompts[0]
		if p.Name != "jq.sum" || p.Title != "Sum numbers" || p.Description != "Add up the numbers of a JSON array." || len(p.Arguments) != 3 ||
			p.Arguments[0].Name != "numbers" || !p.Arguments[0].Required || p.Arguments[0].Description != "a JSON array of numbers" || p.Arguments[2].Required {
			t.Errorf("%s acli=%v prompt %+v", run.client, acliMode, p)
		}
		var got struct {
			Messages []struct {
				Role    string
				Content struct{ Type, Text string }
			}
		}
		if err := json.Unmarshal(rep.Steps[1].Result, &got); err != nil || len(got.Messages) != 1 {
			t.Fatalf("%s acli=%v prompts/get: %s %v", run.client, acliMode, rep.Steps[1].Result, rep.Steps[1].Error)
		}
		text := got.Messages[0].Content.Text
		want := []string{"Call the tool `eval`", `"json": "[1,2,3]"`, `"compact": true`, `"filter": "add"`}
		if acliMode {
			want[0] = "Use the `cli` tool to run `eval`"
		}
		for _, w := range want {
			if got.Messages[0].Role != "user" || !strings.Contains(text, w) {
				t.Errorf("%s acli=%v prompt text lacks %q:\n%s", run.client, acliMode, w, text)
			}
		}
		if e := rep.Steps[2].Error; e == nil || !strings.Contains(e.Message, `"maybe" is not true or false`) {
			t.Errorf("%s acli=%v a bad toggle: %+v %s", run.client, acliMode, e, rep.Steps[2].Result)
		}
		if e := rep.Steps[3].Error; e == nil || !strings.Contains(e.Message, "argument numbers is required") {
			t.Errorf("%s acli=%v a missing argument: %+v %s", run.client, acliMode, e, rep.Steps[3].Result)
		}
	}
	// An edit of the INTENT.md alone is served after the reload it triggers, not the old prompt.
	writeFile(t, filepath.Join(dir, "intents", "sum", "INTENT.md"), strings.Replace(jqIntent, `en: "Sum numbers"`, `en: "Add them up"`, 1))
	d.waitFor(t, "reloading bundles")
	tgt := httpTarget(d.mcp, "jq", false)
	tgt.args = append(tgt.args, "--bearer", tok.Token)
	var got string
	for range 50 { // the swap follows the log line
		if got = string(runClient(t, "client.mjs", tgt, []step{{"op": "prompts"}}).Steps[0].Result); strings.Contains(got, `"title":"Add them up"`) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(got, `"title":"Add them up"`) {
		t.Errorf("after the edit: %s", got)
	}
}
