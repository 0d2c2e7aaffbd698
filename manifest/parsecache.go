package manifest

import (
	"crypto/sha256"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"
)

// parseCache holds the parsed frontmatter of the bundle files loaded lately, by the SHA-256 of the
// whole file: a reload (the daemon reloads every bundle when one file changes) parses again only
// the files whose text changed. What ParseDocument makes of a file is a function of its bytes
// alone, apart from the file name in positions, which each load sets again. An entry is shared by
// every load of the same text and never modified: check, the only step that edits a tree, runs
// before the tree is cached, and every later step (positions, decoding, values, rules) only reads
// it. The trees are held only here, never handed out (ParseDocument, exported, always parses
// afresh), so no caller can change one. Files that did not parse are not cached. The cache is
// bounded by the nodes it holds and by the bytes of the files they came from (parseCacheNodes and
// parseCacheBytes: about 15 MB at most; a duplicate-key finding counts as a node and its message's
// bytes), and dropped whole when full; a file that would take an eighth of either is not cached.
var parseCache struct {
	sync.Mutex
	m            map[[sha256.Size]byte]*parsed
	nodes, bytes int
}

const (
	parseCacheNodes = 1 << 16 // YAML nodes, about 160 bytes each
	parseCacheBytes = 4 << 20 // file text, which bounds the nodes' strings and the bodies
	// parsedOverhead is what an entry costs besides its nodes and text: its record and map slot.
	parsedOverhead = 192
)

// parsed is what parsing one file's text found.
type parsed struct {
	root   *yaml.Node
	body   string
	digest [sha256.Size]byte
	dups   Findings // positions without a file name
	nodes  int      // the tree's nodes and the duplicate-key findings
	bytes  int      // the file's size and the findings' messages
}

// loadDocument is ParseDocument through parseCache.
func loadDocument(file string, data []byte) (*Document, Findings) {
	if len(data) > MaxFileSize {
		return ParseDocument(file, data)
	}
	key := sha256.Sum256(data)
	parseCache.Lock()
	p := parseCache.m[key]
	parseCache.Unlock()
	if p != nil {
		doc := &Document{File: file, Root: p.root, Body: p.body, offset: 1, digest: p.digest, nodes: p.nodes - 1 - len(p.dups), dups: withFile(p.dups, file)}
		return doc, doc.dups
	}
	doc, findings := ParseDocument(file, data)
	if doc.Root == nil {
		return doc, findings
	}
	// A duplicate-key finding kept with the tree weighs about a node, plus its message (which
	// quotes the key): a file of one short key repeated would otherwise hold many times its size.
	// The tree's top node and the entry itself count too, or files of next to nothing ("{}") would
	// each hold about 300 bytes while counting a dozen.
	nodes, size := 1+doc.nodes+len(doc.dups), parsedOverhead+len(data)
	for _, f := range doc.dups {
		size += len(f.Message)
	}
	if nodes <= parseCacheNodes/8 && size <= parseCacheBytes/8 {
		putParsed(key, &parsed{root: doc.Root, body: doc.Body, digest: doc.digest, dups: withFile(doc.dups, ""), nodes: nodes, bytes: size})
	}
	return doc, findings
}

func putParsed(key [sha256.Size]byte, p *parsed) {
	parseCache.Lock()
	defer parseCache.Unlock()
	if parseCache.m == nil || parseCache.nodes+p.nodes > parseCacheNodes || parseCache.bytes+p.bytes > parseCacheBytes {
		parseCache.m, parseCache.nodes, parseCache.bytes = map[[sha256.Size]byte]*parsed{}, 0, 0
	}
	if _, ok := parseCache.m[key]; !ok {
		parseCache.m[key] = p
		parseCache.nodes += p.nodes
		parseCache.bytes += p.bytes
	}
}

// withFile returns a copy of fs with every position in file.
func withFile(fs Findings, file string) Findings {
	if len(fs) == 0 {
		return nil
	}
	out := slices.Clone(fs)
	for i := range out {
		out[i].Pos.File = file
	}
	return out
}

// resetParseCache empties parseCache.
func resetParseCache() {
	parseCache.Lock()
	parseCache.m, parseCache.nodes, parseCache.bytes = nil, 0, 0
	parseCache.Unlock()
}
