package output

import (
	"encoding/json"
	"strings"
	"testing"
)

// aliasTree is YAML whose value, once aliases are expanded, holds fan^levels copies of a leaf
// string of leafBytes bytes, and pad plain nodes (which keep the YAML library's own ratio of
// aliased to plain nodes below its alarm).
func aliasTree(leafBytes, fan, levels, pad int) string {
	var b strings.Builder
	b.WriteString("pad: [" + strings.Repeat("0,", pad) + "0]\n")
	b.WriteString("l0: &l0 \"" + strings.Repeat("x", leafBytes) + "\"\n")
	for i := 1; i <= levels; i++ {
		p := "*l" + string(rune('0'+i-1))
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(p+",", fan-1) + p + "]\n")
	}
	return b.String()
}

// TestYAMLOutputBombRefused parses tool output in YAML that stays under the YAML library's own
// alias ratio check (padded with plain nodes) but stands for 10^5 copies of a 64 KiB string: 6.5 GB once the result is
// encoded as JSON for the agent. It is refused as output that does not parse, saying why.
func TestYAMLOutputBombRefused(t *testing.T) {
	c := Convention{Format: FormatYAML, Stream: "stdout", ErrorStream: "stderr"}
	for name, doc := range map[string]string{
		"wide leaf":      aliasTree(64<<10, 10, 5, 5000),
		"billion laughs": aliasTree(3, 9, 9, 0),
		"deep nesting":   strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
	} {
		o := Parse(c, Process{Stdout: []byte(doc)})
		if o.OK || o.Failure == nil || o.Failure.Code != "output_parse_failed" {
			t.Fatalf("%s: ok %v, failure %+v", name, o.OK, o.Failure)
		}
		if name != "billion laughs" && !strings.Contains(o.Failure.Message, "YAML") {
			t.Fatalf("%s: message %q", name, o.Failure.Message)
		}
	}
}

// TestYAMLOutputSmallAliasesKept is the positive control: output that shares a few nodes through
// aliases (as some CLIs print) parses to the expanded value.
func TestYAMLOutputSmallAliasesKept(t *testing.T) {
	c := Convention{Format: FormatYAML, Stream: "stdout", ErrorStream: "stderr"}
	o := Parse(c, Process{Stdout: []byte(aliasTree(8, 3, 2, 0) + "m:\n  <<: {a: 1}\n  b: 2\n")})
	if !o.OK {
		t.Fatalf("failure %+v", o.Failure)
	}
	out, err := json.Marshal(o.Value)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), `"xxxxxxxx"`); n != 1+3+9 {
		t.Fatalf("%d copies of the leaf in %s", n, out)
	}
	if !strings.Contains(string(out), `"m":{"a":1,"b":2}`) {
		t.Fatalf("merge key not applied: %s", out)
	}
}
