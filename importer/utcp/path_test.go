package utcp

import (
	"strings"
	"testing"
)

// TestPathInputsMarked: a UTCP input whose name says it holds a file or directory is imported with
// format: path (a string, or an array's string items); other inputs and an existing format are kept.
func TestPathInputsMarked(t *testing.T) {
	manual := `{"tools":[{"name":"cat_it","inputs":{"type":"object","properties":{
		"file":{"type":"string"},"paths":{"type":"array","items":{"type":"string"}},
		"name":{"type":"string"},"when":{"type":"string","format":"date"}}},
		"tool_call_template":{"call_template_type":"cli","commands":[{"command":"cat UTCP_ARG_file_UTCP_END UTCP_ARG_paths_UTCP_END UTCP_ARG_name_UTCP_END UTCP_ARG_when_UTCP_END"}]}}]}`
	b, err := Convert([]byte(manual), Options{ID: "paths"})
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for name, data := range b.Files {
		if strings.HasSuffix(name, "TOOL.md") {
			doc = string(data)
		}
	}
	if strings.Count(doc, "format: path") != 2 || !strings.Contains(doc, "format: date") {
		t.Fatalf("want file and paths items marked format: path, when kept as date:\n%s", doc)
	}
}
