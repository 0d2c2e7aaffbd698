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
