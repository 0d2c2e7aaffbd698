package manifest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAllSized: the whole text is read whatever size was expected: smaller (a file that grew
// after stat), larger (one that shrank), exact, or nothing; also in one-byte reads.
func TestReadAllSized(t *testing.T) {
	const text = "---\nname: x\n---\nbody\n"
	for _, size := range []int64{0, 3, int64(len(text)), 4096} {
		for _, oneByte := range []bool{false, true} {
			r := strings.NewReader(text)
			data, err := readAllSized(r, size)
			if oneByte {
				data, err = readAllSized(iotest.OneByteReader(strings.NewReader(text)), size)
			}
			if err != nil || string(data) != text {
				t.Errorf("size %d, one byte %v: %q, %v", size, oneByte, data, err)
			}
		}
	}
	if data, err := readAllSized(iotest.ErrReader(iotest.ErrTimeout), 10); err == nil || data != nil {
		t.Errorf("a failing reader: %q, %v", data, err)
	}
}

// TestSplitFrontmatterAllocatesNothing: finding the frontmatter's end looks at each line in place.
func TestSplitFrontmatterAllocatesNothing(t *testing.T) {
	data := []byte(baseTool)
	if n := testing.AllocsPerRun(20, func() { splitFrontmatter(data) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// TestPointerLookup: JSON pointers are walked token by token, with RFC 6901's escapes undone and
// empty keys, array indexes and missing entries handled.
func TestPointerLookup(t *testing.T) {
	doc, problems := ParseDocument("x.md", []byte("---\na/b: 1\n\"c~d\": 2\n\"\": 3\nlist:\n  - 4\n  - {\"\": 5}\n---\n"))
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	for ptr, line := range map[string]int{"/a~1b": 2, "/c~0d": 3, "/": 4, "/list/1": 7, "/list/1/": 7, "/list/0": 6} {
		if !doc.Has(ptr) || doc.Pos(ptr).Line != line {
			t.Errorf("%q: has %v, line %d, want %d", ptr, doc.Has(ptr), doc.Pos(ptr).Line, line)
		}
	}
	for _, ptr := range []string{"/a/b", "/list/2", "/list/x", "/list/0/0", "/none"} {
		if doc.Has(ptr) {
			t.Errorf("%q: found", ptr)
		}
	}
}

// TestDuplicateKeysShortAndLong: a duplicate key is reported at itself, naming the line of the
// first, and dropped, in mappings short enough to be scanned and long enough to need a map, and
// for keys that are the same only as JSON strings (1 and "1"); the values keep the first.
func TestDuplicateKeysShortAndLong(t *testing.T) {
	for _, n := range []int{2, shortMapping, shortMapping + 1, 200} {
		var b strings.Builder
		b.WriteString("---\nm:\n")
		for i := range n {
			fmt.Fprintf(&b, "  k%d: %d\n", i, i)
		}
		b.WriteString("  k1: again\n  1: one\n  \"1\": two\n---\n")
		doc, findings := ParseDocument("f.md", []byte(b.String()))
		if doc.Root == nil || len(findings) != 2 {
			t.Fatalf("%d keys: %v", n, findings)
		}
		if f := findings[0]; f.Rule != "yaml-duplicate-key" || f.Pos.Line != n+3 || f.Message != `key "k1" is already defined at line 4` {
			t.Errorf("%d keys: %v", n, f)
		}
		if f := findings[1]; f.Pos.Line != n+5 || f.Message != fmt.Sprintf(`key "1" is already defined at line %d`, n+4) {
			t.Errorf("%d keys: %v", n, f)
		}
		m, _ := doc.Values()["m"].(map[string]any)
		if len(m) != n+1 || m["k1"] != json.Number("1") || m["1"] != "one" || len(doc.Root.Content[1].Content) != 2*(n+1) {
			t.Errorf("%d keys: values %v", n, m)
		}
	}
}

// TestValueAtMatchesValues: a field converted alone equals the same field of the whole
// frontmatter's values, before and after those are built.
func TestValueAtMatchesValues(t *testing.T) {
	for _, name := range []string{"inputs", "outputs", "examples", "runner", "absent"} {
		alone, _ := ParseDocument(toolFile, []byte(baseTool))
		whole, _ := ParseDocument(toolFile, []byte(baseTool))
		first := alone.valueAt(name)
		if want := whole.Values()[name]; !reflect.DeepEqual(first, want) || !reflect.DeepEqual(whole.valueAt(name), want) {
			t.Errorf("%s: alone %v, whole %v", name, first, want)
		}
	}
}
