package utcp

import (
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestManualSchemasKept: a manual's inputs and outputs reach TOOL.md whole through the typed
// schema: an input that accepts anything ({}) stays {} and declared (lint clean), numbers and x-
// extensions are kept; a schema that is not JSON Schema refuses its tool, naming why.
func TestManualSchemasKept(t *testing.T) {
	manual := `{"tools":[{"name":"echo_any","inputs":{"type":"object","properties":{
		"any":{},"n":{"type":"integer","minimum":1,"maximum":9007199254740991,"x-clihost-allow-dash":true}},"required":["any"]},
		"outputs":{"type":"object","properties":{"ok":{"type":"boolean"}}},
		"tool_call_template":{"call_template_type":"cli","commands":[{"command":"echo UTCP_ARG_any_UTCP_END UTCP_ARG_n_UTCP_END"}]}},
		{"name":"bad","inputs":{"type":5},
		"tool_call_template":{"call_template_type":"cli","commands":[{"command":"echo hi"}]}}]}`
	b, err := Convert([]byte(manual), Options{ID: "schemas"})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Refused) != 1 || b.Refused[0].Tool != "bad" || !strings.Contains(b.Refused[0].Error(), "its inputs are not a JSON Schema") {
		t.Errorf("refused %v, want bad for its inputs", b.Refused)
	}
	files := map[string]string{}
	for name, data := range b.Files {
		files["schemas/"+name] = string(data)
	}
	fixture.Registry(t, files) // fails on any lint finding
	doc := files["schemas/tools/echo_any/TOOL.md"]
	for _, want := range []string{"    any: {}\n", "maximum: 9007199254740991\n", "x-clihost-allow-dash: true\n", "outputs:\n  type: object\n  properties:\n    ok:\n      type: boolean\n"} {
		if !strings.Contains(doc, want) {
			t.Errorf("TOOL.md lacks %q:\n%s", want, doc)
		}
	}
}
