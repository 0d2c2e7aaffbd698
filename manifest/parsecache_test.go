package manifest

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestParseCacheNamesEachFile: the same text loaded under two names (two bundles, or one moved)
// reports its duplicate key at each name, from the cache or not, and a caller that edits the
// findings it got changes nothing of the next load's.
func TestParseCacheNamesEachFile(t *testing.T) {
	fsys := buildBundle(t, []edit{{toolFile, "risk_level: 0\n", "risk_level: 0\nname: again\n"}}, nil)
	resetParseCache()
	var first Findings
	for _, dir := range []string{"a/", "b/", "a/"} {
		b := LoadBundle(fsys, cliFile, LoadOptions{Display: func(p string) string { return dir + p }})
		if len(b.Findings) != 1 || b.Findings[0].Rule != "yaml-duplicate-key" || b.Findings[0].Pos.File != dir+toolFile {
			t.Fatalf("%s:\n%s", dir, findingsText(b.Findings))
		}
		if first == nil {
			first = slices.Clone(b.Findings)
		} else if b.Findings[0].Pos.Line != first[0].Pos.Line || b.Findings[0].Message != first[0].Message {
			t.Fatalf("%s: %s, first load %s", dir, b.Findings[0], first[0])
		}
		b.Findings[0].Pos.File, b.Findings[0].Message = "changed", "changed"
	}
}

// TestParseDocumentNeverCached: the exported ParseDocument hands out a tree of its own each time,
// so a caller that edits it cannot change what a later load of the same text sees.
func TestParseDocumentNeverCached(t *testing.T) {
	fsys := buildBundle(t, nil, nil)
	resetParseCache()
	if b := LoadBundle(fsys, cliFile, LoadOptions{}); len(b.Findings) != 0 {
		t.Fatal(findingsText(b.Findings))
	}
	for range 2 {
		doc, _ := ParseDocument(toolFile, []byte(baseTool))
		doc.Root.Content = nil // a hostile caller
	}
	b := LoadBundle(fsys, cliFile, LoadOptions{})
	if len(b.Findings) != 0 || len(b.Tools) != 1 || b.Tools[0].Tool.ID != "demo.item.list" || b.Tools[0].InputSchema() == nil {
		t.Fatalf("after a caller edited its own tree:\n%s", findingsText(b.Findings))
	}
}

// TestParseCacheBounded: however many distinct files are loaded, the cache holds at most
// parseCacheNodes nodes and parseCacheBytes of text, and a file that would take more than an
// eighth of either (many small values, or one long one) is parsed every time, never cached.
func TestParseCacheBounded(t *testing.T) {
	resetParseCache()
	for i := range 3000 {
		text := strings.Replace(baseTool, "id: demo.item.list", fmt.Sprintf("id: demo.item.l%d", i), 1)
		if doc, fs := loadDocument("x.md", []byte(text)); doc.Root == nil || len(fs) != 0 {
			t.Fatal(fs)
		}
		if parseCache.nodes > parseCacheNodes || parseCache.bytes > parseCacheBytes {
			t.Fatalf("after %d files the cache holds %d nodes, %d bytes", i+1, parseCache.nodes, parseCache.bytes)
		}
	}
	long := "---\ndescription: " + strings.Repeat("x", parseCacheBytes/8) + "\n---\n"
	resetParseCache()
	if doc, _ := loadDocument("long.md", []byte(long)); doc.Root == nil || len(parseCache.m) != 0 {
		t.Fatalf("a file of %d bytes was cached", len(long))
	}
	var big strings.Builder
	big.WriteString("---\nlist:\n")
	for i := range parseCacheNodes / 8 {
		fmt.Fprintf(&big, "  - %d\n", i)
	}
	big.WriteString("---\n")
	resetParseCache()
	a, _ := loadDocument("big.md", []byte(big.String()))
	b, _ := loadDocument("big.md", []byte(big.String()))
	if a.Root == nil || a.Root == b.Root || len(parseCache.m) != 0 {
		t.Fatalf("a file of %d nodes was cached", a.nodes)
	}
}

// TestParseCacheConcurrentLoads: loads of one bundle running at once, sharing its cached trees,
// all see the same bundle as a load from an empty cache.
func TestParseCacheConcurrentLoads(t *testing.T) {
	fsys := buildBundle(t, []edit{{toolFile, "risk_level: 0\n", "risk_level: 7\nname: again\n"}}, nil)
	ResetSchemaCache()
	want := LoadBundle(fsys, cliFile, LoadOptions{})
	if len(want.Findings) != 2 {
		t.Fatal(findingsText(want.Findings))
	}
	var wg sync.WaitGroup
	got := make([]*Bundle, 16)
	for i := range got {
		wg.Go(func() { got[i] = LoadBundle(fsys, cliFile, LoadOptions{}) })
	}
	wg.Wait()
	for i, b := range got {
		if !reflect.DeepEqual(b.Findings, want.Findings) || !reflect.DeepEqual(b.Tools[0].Tool, want.Tools[0].Tool) || !reflect.DeepEqual(b.CLI, want.CLI) {
			t.Fatalf("load %d:\n%s", i, findingsText(b.Findings))
		}
	}
}

// TestParseCacheHoldsOnlyWhatItCounts: a hostile file cannot make a cached entry hold more than
// the cache counts against its bound. Every node reachable from a cached tree, the slots behind a
// mapping's kept keys included, is counted: a key repeated, the repeat's value a long list, would
// otherwise stay reachable through the mapping's backing array (about 40 MB of nodes per 512 KiB
// file). And each duplicate-key finding kept with the tree counts as a node and its message's
// bytes: a file of nothing but one short key repeated would otherwise hold 100k findings.
func TestParseCacheHoldsOnlyWhatItCounts(t *testing.T) {
	var repeated strings.Builder
	repeated.WriteString("---\nname: x\nnested:\n  b: 2\n")
	for _, indent := range []string{"  ", ""} { // a duplicate nested and one at the top
		fmt.Fprintf(&repeated, "%sa: 0\n%sa: [%s0]\n", indent, indent, strings.Repeat("0,", 20000))
	}
	repeated.WriteString("---\n")
	for _, c := range []struct {
		name, text string
		dups       int
	}{
		{"a repeated key's long list", repeated.String(), 2},
		{"one key repeated", "---\n" + strings.Repeat("a: 0\n", 20001) + "---\n", 20000},
	} {
		resetParseCache()
		doc, fs := loadDocument("dup.md", []byte(c.text))
		if doc.Root == nil || len(fs) != c.dups {
			t.Fatalf("%s: want %d duplicate-key findings, got %d", c.name, c.dups, len(fs))
		}
		parseCache.Lock()
		for _, p := range parseCache.m {
			held, text := reachableNodes(p.root)+len(p.dups), len(p.body)
			for _, f := range p.dups {
				text += len(f.Message)
			}
			if held > p.nodes || text > p.bytes {
				t.Errorf("%s: a cached entry holds %d nodes and findings and %d bytes, but counts %d and %d", c.name, held, text, p.nodes, p.bytes)
			}
		}
		parseCache.Unlock()
	}
}

// reachableNodes counts the nodes under n that the garbage collector keeps alive, through every
// slot of each Content array (up to its capacity), n itself not counted.
func reachableNodes(n *yaml.Node) int {
	count := 0
	for _, c := range n.Content[:cap(n.Content)] {
		if c != nil {
			count += 1 + reachableNodes(c)
		}
	}
	return count
}

// TestParseCacheBoundsManyTinyFiles: files of next to nothing (an empty mapping, a line of body)
// add no node and a few bytes each, but every entry costs its map slot, its record and its tree's
// top node: loading 100,000 distinct ones must not hold more than the bound's 15 MB or so.
func TestParseCacheBoundsManyTinyFiles(t *testing.T) {
	resetParseCache()
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	for i := range 100000 {
		if doc, fs := loadDocument("tiny.md", []byte("---\n{}\n---\n"+strconv.Itoa(i))); doc.Root == nil || len(fs) != 0 {
			t.Fatal(fs)
		}
	}
	full := heap()
	resetParseCache()
	if held := int64(full) - int64(heap()); held > 20<<20 {
		t.Fatalf("the parse cache holds %d MB after 100,000 tiny files", held>>20)
	}
}
