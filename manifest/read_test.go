package manifest

import (
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
