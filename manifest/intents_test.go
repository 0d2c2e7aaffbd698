package manifest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

const intentOK = `---
name: List items
id: demo.list-items
label: { en: "List items", fr: "Lister" }
description: Show the items.
version: 1.0.0
intent: ["list my items", "show items"]
surfaces: [chat]
inputs:
  - { name: limit, label: Limit, type: number, hint: "how many" }
  - { name: style, label: Style, type: choice, values: [short, long] }
implements:
  - { tool: ./tools/item-list/TOOL.md, when: { style: long } }
  - { tool: demo.item.list, default: true }
---
# List items
`

// withIntents declares intents in CLI.md.
func withIntents(refs ...string) edit {
	var b strings.Builder
	b.WriteString("intents:\n")
	for _, r := range refs {
		b.WriteString("  - { ref: " + r + " }\n")
	}
	return edit{cliFile, "commands:\n", b.String() + "commands:\n"}
}

func findingsOf(b *Bundle, rule string) Findings {
	var out Findings
	for _, f := range b.Findings {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

// TestIntentsLoad: a valid INTENT.md loads, with its routes resolved to the bundle's tool (by path
// and by id); actions, the schema's name of the list, loads the same files.
func TestIntentsLoad(t *testing.T) {
	for _, e := range []edit{withIntents("./intents/list/INTENT.md"), {cliFile, "commands:\n", "actions: [{ ref: ./intents/list/INTENT.md }]\ncommands:\n"}} {
		b := diskBundle(t, []edit{e}, map[string]string{"demo/intents/list/INTENT.md": intentOK}, nil)
		if b.Findings.HasErrors() || len(b.Intents) != 1 {
			t.Fatalf("%d intents:\n%s", len(b.Intents), findingsText(b.Findings))
		}
		it := b.Intents[0]
		if it.ID != "demo.list-items" || it.Label.String() != "List items" || len(it.Tools) != 2 || it.Tools[0] == nil || it.Tools[0] != it.Tools[1] || it.Inputs[1].Values[1].Value != "long" {
			t.Fatalf("intent %+v", it)
		}
	}
}

// TestIntentsLint: a missing file, an invalid frontmatter (with the file and line), a ref out of
// the bundle, a symlink out, an unknown tool and a missing default are errors, and the bundle is
// not servable.
func TestIntentsLint(t *testing.T) {
	bad := strings.Replace(intentOK, "surfaces: [chat]", "surfaces: [billboard]", 1)
	cases := []struct {
		name, rule, ref, file, content, marker string
		link                                   string // INTENT.md is a symlink to this outside file
	}{
		{name: "missing file", rule: "intents-ref-missing", ref: "./intents/none/INTENT.md", marker: "ref: ./intents/none"},
		{name: "invalid frontmatter", rule: "schema-enum", ref: "./intents/list/INTENT.md", content: bad, file: "demo/intents/list/INTENT.md", marker: "surfaces:"},
		{name: "ref leaves the bundle", rule: "intents-ref-escapes", ref: "../other/INTENT.md", marker: "ref: ../other"},
		{name: "absolute ref", rule: "intents-ref-escapes", ref: "/etc/passwd", marker: "ref: /etc/passwd"},
		{name: "symlink out", rule: "bundle-file-outside", ref: "./intents/list/INTENT.md", link: intentOK, marker: "ref: ./intents/list"},
		{name: "unknown tool", rule: "intent-tool-unknown", ref: "./intents/list/INTENT.md", file: "demo/intents/list/INTENT.md",
			content: strings.Replace(intentOK, "tool: demo.item.list", "tool: demo.item.delete", 1), marker: "tool: demo.item.delete"},
		{name: "no default", rule: "intent-default", ref: "./intents/list/INTENT.md", file: "demo/intents/list/INTENT.md",
			content: strings.Replace(intentOK, ", default: true", "", 1), marker: "implements:"},
		// The demo tool's inputs are closed (additionalProperties: false): a mapping onto a name it
		// does not declare would make every prompts/get taking that route fail.
		{name: "mapping onto an input the tool lacks", rule: "intent-mapping-unknown", ref: "./intents/list/INTENT.md", file: "demo/intents/list/INTENT.md",
			content: strings.Replace(intentOK, "default: true }", "default: true, mapping: { limit: max } }", 1), marker: "tool: demo.item.list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]string{}
			if tc.content != "" {
				extra["demo/intents/list/INTENT.md"] = tc.content
			}
			var links map[string]string
			if tc.link != "" {
				links = map[string]string{"demo/intents/list/INTENT.md": outsideFile(t, "INTENT.md", tc.link)}
			}
			b := diskBundle(t, []edit{withIntents(tc.ref)}, extra, links)
			fs := findingsOf(b, tc.rule)
			if len(fs) != 1 || fs[0].Severity != SeverityError || !b.Findings.HasErrors() || len(b.Intents) != 0 {
				t.Fatalf("want one %s error, got:\n%s", tc.rule, findingsText(b.Findings))
			}
			file, src := cliFile, strings.Replace(baseCLI, "commands:\n", "intents:\n  - { ref: "+tc.ref+" }\ncommands:\n", 1)
			if tc.file != "" {
				file, src = tc.file, tc.content
			}
			if !strings.HasSuffix(fs[0].Pos.File, filepath.FromSlash(file)) || fs[0].Pos.Line != lineOf(t, src, tc.marker) {
				t.Fatalf("finding at %s:%d, want %s:%d: %s", fs[0].Pos.File, fs[0].Pos.Line, file, lineOf(t, src, tc.marker), fs[0])
			}
		})
	}
}

// TestIntentResolve: arguments are typed, routed by when (else the default), hidden by
// depends_on, and renamed by mapping; bad arguments are refused with the input's name.
func TestIntentResolve(t *testing.T) {
	src := strings.Replace(intentOK, "implements:\n", `  - { name: detail, label: Detail, type: text, depends_on: { style: long } }
  - { name: tags, label: Tags, type: multi-choice, values: [a, b] }
  - { name: since, label: Since, type: date, default: 2024-01-31 }
  - { name: extra, label: Extra, type: text, default: { 1: one, 2.5: [x, 2024-02-01] } }
implements:
`, 1)
	src = strings.Replace(src, "default: true }", "default: true, mapping: { limit: max, style: { from: tags } } }", 1)
	// The tool's inputs are opened, so that the mapping's targets and every input pass through.
	open := edit{toolFile, "  additionalProperties: false\n", ""}
	b := diskBundle(t, []edit{withIntents("./intents/list/INTENT.md"), open}, map[string]string{"demo/intents/list/INTENT.md": src}, nil)
	if len(b.Intents) != 1 {
		t.Fatalf("not loaded:\n%s", findingsText(b.Findings))
	}
	it := b.Intents[0]
	it.Tools[1] = &ToolEntry{Path: []string{"other"}} // tell the routes apart
	tool, in, err := it.Resolve(map[string]string{"limit": "3", "style": "long", "detail": "d"})
	if err != nil || tool != it.Tools[0] || in["limit"] != 3.0 || in["style"] != "long" || in["detail"] != "d" {
		t.Errorf("when route: %v %v %v", tool, in, err)
	}
	tool, in, err = it.Resolve(map[string]string{"limit": "3", "style": "short", "detail": "hidden", "tags": "a, b"})
	if err != nil || tool != it.Tools[1] || in["max"] != 3.0 || in["limit"] != nil || in["detail"] != nil || fmt.Sprint(in["style"]) != "[a b]" {
		t.Errorf("default route: %v %v %v", tool, in, err)
	}
	// YAML's own types (a timestamp, a map with number keys) reach the tool input as JSON values.
	if raw, err := json.Marshal(in); err != nil || !strings.Contains(string(raw), `"since":"2024-01-31"`) || !strings.Contains(string(raw), `"extra":{"1":"one","2.5":["x","2024-02-01"]}`) {
		t.Errorf("defaults: %s %v", raw, err)
	}
	for args, want := range map[string]string{"limit=x": `argument limit: "x" is not a number`, "style=huge": `argument style: "huge" is not one of short, long`,
		"tags=a,c": `"c" is not one of a, b`, "colour=red": "argument colour: the intent has no such input"} {
		k, v, _ := strings.Cut(args, "=")
		if _, _, err := it.Resolve(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// TestIntentRouteClosedTool: AIP-28 maps an intent input to the routed tool's input of the same
// name; an input the tool does not declare (a routing input such as style, read only by when) is
// not handed to a tool whose inputs are closed (additionalProperties: false), so that every route
// of a linted intent builds an input its tool accepts.
func TestIntentRouteClosedTool(t *testing.T) {
	src := strings.Replace(intentOK, "implements:\n", "  - { name: q, label: Query, type: text, required: true }\n  - { name: mode, label: Mode, type: choice, values: [a, b], default: a }\nimplements:\n", 1)
	src = strings.Replace(src, "default: true }", "default: true, mapping: { q: query } }", 1)
	src = strings.Replace(src, "when: { style: long } }", "when: { style: long }, mapping: { q: { from: q } } }", 1)
	src = strings.Replace(src, "mapping: { q: { from: q } }", "mapping: { query: { from: q } }", 1)
	b := diskBundle(t, []edit{withIntents("./intents/list/INTENT.md")}, map[string]string{"demo/intents/list/INTENT.md": src}, nil)
	if len(b.Intents) != 1 || b.Findings.HasErrors() {
		t.Fatalf("not loaded:\n%s", findingsText(b.Findings))
	}
	for _, style := range []string{"short", "long"} {
		tool, in, err := b.Intents[0].Resolve(map[string]string{"q": "x", "style": style, "limit": "2", "mode": "b"})
		if err != nil {
			t.Fatal(err)
		}
		if len(in) != 2 || in["query"] != "x" || in["limit"] != 2.0 {
			t.Fatalf("style %s: input %v, want only query and limit", style, in)
		}
		if err := tool.InputSchema().Validate(in); err != nil {
			t.Fatalf("style %s: the input the route builds does not fit its tool: %v", style, err)
		}
	}
}

// TestIntentFieldBounds: AIP-28's field options min/max (number), min_length/max_length and
// pattern (text-like) bound the prompt arguments, as a form would; an argument outside them is
// refused with the input's name, and a pattern that does not compile is a lint error.
func TestIntentFieldBounds(t *testing.T) {
	src := strings.Replace(intentOK, "implements:\n", "  - { name: n, label: N, type: number, min: 1, max: 10 }\n  - { name: s, label: S, type: text, min_length: 2, max_length: 5, pattern: \"^[a-z]+$\" }\nimplements:\n", 1)
	open := edit{toolFile, "  additionalProperties: false\n", ""}
	b := diskBundle(t, []edit{withIntents("./intents/list/INTENT.md"), open}, map[string]string{"demo/intents/list/INTENT.md": src}, nil)
	if len(b.Intents) != 1 {
		t.Fatalf("not loaded:\n%s", findingsText(b.Findings))
	}
	it := b.Intents[0]
	if _, _, err := it.Resolve(map[string]string{"n": "10", "s": "abc"}); err != nil {
		t.Fatalf("in bounds: %v", err)
	}
	for args, want := range map[string]string{"n=0": "argument n: 0 is less than its min 1", "n=10.5": "argument n: 10.5 is more than its max 10",
		"s=a": "argument s: 1 characters, fewer than its min_length 2", "s=abcdef": "argument s: 6 characters, more than its max_length 5",
		"s=AB": "argument s: \"AB\" does not match its pattern ^[a-z]+$"} {
		k, v, _ := strings.Cut(args, "=")
		if _, _, err := it.Resolve(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	bad := strings.Replace(src, `pattern: "^[a-z]+$"`, `pattern: "(["`, 1)
	b = diskBundle(t, []edit{withIntents("./intents/list/INTENT.md"), open}, map[string]string{"demo/intents/list/INTENT.md": bad}, nil)
	if fs := findingsOf(b, "intent-input-pattern"); len(fs) != 1 || fs[0].Severity != SeverityError || fs[0].Pos.Line != lineOf(t, bad, "name: s,") || len(b.Intents) != 0 {
		t.Fatalf("want one intent-input-pattern error at the input, got:\n%s", findingsText(b.Findings))
	}
}
