package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a manifest file; larger files are refused before parsing.
const MaxFileSize = 1 << 20

// maxDepth bounds the nesting of YAML values converted for validation.
const maxDepth = 64

// Document is a parsed markdown file with YAML frontmatter. It keeps the YAML node tree so every
// value can be traced back to its line and column through its JSON pointer.
type Document struct {
	File   string
	Root   *yaml.Node // the frontmatter mapping; nil when the frontmatter did not parse
	Body   string     // the markdown after the frontmatter
	offset int        // lines before the YAML text (the opening --- line)
	dups   Findings
	digest [sha256.Size]byte // SHA-256 of the YAML text, which the values are a function of
	nodes  int               // the nodes of the checked tree (check)

	// values is the frontmatter as JSON-compatible values, built on first use: a reload whose
	// validation is cached needs only a few subtrees of it (valueAt).
	valuesOnce sync.Once
	values     map[string]any
	built      atomic.Bool // values is set (for valueAt, which may run beside Values)
}

// Values returns the frontmatter as JSON-compatible values (mapping keys are strings), or nil
// when the frontmatter did not parse. It is built on the first call; callers must not modify it.
func (d *Document) Values() map[string]any {
	if d.Root == nil {
		return nil
	}
	d.valuesOnce.Do(func() {
		d.values, _ = valueOf(d.Root).(map[string]any)
		d.built.Store(true)
	})
	return d.values
}

// valueAt returns the JSON-compatible value of the top-level field name, nil when it is absent:
// from Values when it was built, else the field alone is converted.
func (d *Document) valueAt(name string) any {
	if d.built.Load() {
		return d.values[name]
	}
	if _, n := d.lookup(JoinPointer("", name)); n != nil {
		return valueOf(n)
	}
	return nil
}

// Pos returns the position of the value at the JSON pointer ptr ("" is the document itself),
// falling back to the nearest enclosing value that exists.
func (d *Document) Pos(ptr string) Pos {
	for {
		if _, v := d.lookup(ptr); v != nil {
			return d.nodePos(v)
		}
		if ptr == "" {
			return Pos{File: d.File, Line: 1, Col: 1}
		}
		ptr = parentPointer(ptr)
	}
}

// KeyPos returns the position of the mapping key whose value is at ptr, or of the value when ptr
// has no key (an array element or the root).
func (d *Document) KeyPos(ptr string) Pos {
	if k, _ := d.lookup(ptr); k != nil {
		return d.nodePos(k)
	}
	return d.Pos(ptr)
}

// Has reports whether a value exists at ptr.
func (d *Document) Has(ptr string) bool {
	_, v := d.lookup(ptr)
	return v != nil
}

// lookup walks the node tree along a JSON pointer and returns the key node (nil for array elements
// and the root) and the value node (nil when the pointer leads nowhere). Positions are looked up
// only for findings, so walking is cheaper than indexing every node up front.
func (d *Document) lookup(ptr string) (key, val *yaml.Node) {
	val = d.Root
	if val == nil {
		return nil, nil
	}
	if ptr == "" {
		return nil, val
	}
	for rest, more := ptr[1:], true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, "/")
		if strings.IndexByte(tok, '~') >= 0 {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
		key = nil
		switch val.Kind {
		case yaml.MappingNode:
			var next *yaml.Node
			for i := 0; i+1 < len(val.Content); i += 2 {
				if val.Content[i].Value == tok {
					key, next = val.Content[i], val.Content[i+1]
					break
				}
			}
			val = next
		case yaml.SequenceNode:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(val.Content) {
				return nil, nil
			}
			val = val.Content[i]
		default:
			return nil, nil
		}
		if val == nil {
			return nil, nil
		}
	}
	return key, val
}

func (d *Document) nodePos(n *yaml.Node) Pos {
	return Pos{File: d.File, Line: n.Line + d.offset, Col: n.Column}
}

func parentPointer(ptr string) string {
	i := strings.LastIndexByte(ptr, '/')
	if i <= 0 {
		return ""
	}
	return ptr[:i]
}

// JoinPointer appends reference tokens to a JSON pointer, escaping them as RFC 6901 requires.
// The result is built in one allocation, sized up front.
func JoinPointer(ptr string, tokens ...any) string {
	size := len(ptr)
	for _, t := range tokens {
		size++
		switch t := t.(type) {
		case int:
			size += 20
		case string:
			size += len(t) + strings.Count(t, "~") + strings.Count(t, "/")
		default:
			size += 24 // rare (int64 and the like); the builder grows if it is longer
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(ptr)
	for _, t := range tokens {
		b.WriteByte('/')
		switch t := t.(type) {
		case int:
			var digits [20]byte
			b.Write(strconv.AppendInt(digits[:0], int64(t), 10))
		case string:
			writeEscaped(&b, t)
		default:
			writeEscaped(&b, fmt.Sprint(t))
		}
	}
	return b.String()
}

// writeEscaped writes one reference token, "~" as "~0" and "/" as "~1".
func writeEscaped(b *strings.Builder, tok string) {
	if strings.IndexAny(tok, "~/") < 0 {
		b.WriteString(tok)
		return
	}
	for i := 0; i < len(tok); i++ {
		switch tok[i] {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(tok[i])
		}
	}
}

var (
	yamlLineRE        = regexp.MustCompile(`line (\d+)`)
	yamlParserProblem = regexp.MustCompile(`: (did not find expected|found duplicate %|found incompatible YAML document|found undefined tag handle)`)
)

// ParseDocument splits data into frontmatter and body and parses the frontmatter. It never panics:
// every problem, including YAML syntax errors, is returned as a finding with its position. When the
// frontmatter cannot be used at all, doc.Root is nil; otherwise the findings are problems such as
// duplicate keys (the first occurrence is kept).
func ParseDocument(file string, data []byte) (doc *Document, findings Findings) {
	doc = &Document{File: file}
	fail := func(line int, rule, msg, hint string) (*Document, Findings) {
		return doc, Findings{{Pos: Pos{File: file, Line: line, Col: 1}, Severity: SeverityError, Rule: rule, Message: msg, Hint: hint}}
	}
	if len(data) > MaxFileSize {
		return fail(1, "file-too-large", fmt.Sprintf("file is %d bytes, more than the %d allowed", len(data), MaxFileSize), "split long prose out of the manifest")
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	front, body, ok := splitFrontmatter(data)
	if !ok {
		if bytes.HasPrefix(data, []byte("---")) {
			return fail(1, "frontmatter-unterminated", "the frontmatter opened by --- is never closed", "end the YAML frontmatter with a line holding only ---")
		}
		return fail(1, "frontmatter-missing", "the file does not start with YAML frontmatter", "start the file with a line holding only ---, the YAML fields, and another ---")
	}
	doc.offset = 1
	doc.Body = string(body)
	doc.digest = sha256.Sum256(front)

	var root yaml.Node
	if err := safeUnmarshal(front, &root); err != nil {
		line, context := 1, ""
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
			if yamlParserProblem.MatchString(err.Error()) {
				// yaml.v3 reports parser (not scanner) errors with a 0-based line, at the start of
				// the block or flow collection being parsed.
				line++
				context = " in the block that starts here"
			}
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = yamlLineRE.ReplaceAllString(msg, "")
		msg = strings.TrimLeft(msg, ": ")
		return fail(line+doc.offset, "yaml-syntax", "YAML syntax error: "+msg+context, "check indentation and quoting; values holding ': ', '#' or starting with '{', '[', '*', '&', '!', '%', '@' or '`' need quotes")
	}
	if len(root.Content) == 0 {
		return fail(1, "frontmatter-empty", "the frontmatter is empty", "declare the manifest's fields between the --- lines")
	}
	if aliases := doc.aliasFinding(&root); len(aliases) > 0 {
		return doc, aliases
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return fail(top.Line+doc.offset, "frontmatter-not-mapping", "the frontmatter must be a YAML mapping of field names to values", "write one `field: value` per line")
	}
	if err := doc.check(top, 0); err != nil {
		return fail(top.Line+doc.offset, "yaml-structure", err.Error(), "simplify the YAML: no deep nesting")
	}
	doc.Root = top
	return doc, doc.dups
}

// safeUnmarshal guards against panics inside the YAML library on hostile input.
func safeUnmarshal(data []byte, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: line 1: unparseable input (%v)", r)
		}
	}()
	return yaml.Unmarshal(data, n)
}

// splitFrontmatter returns the YAML between an opening "---" line and the next "---" or "..." line.
func splitFrontmatter(data []byte) (front, body []byte, ok bool) {
	first, rest, found := bytes.Cut(data, []byte("\n"))
	if !found || string(bytes.TrimRight(first, " \t\r")) != "---" {
		return nil, nil, false
	}
	pos := 0
	for pos <= len(rest) {
		end := bytes.IndexByte(rest[pos:], '\n')
		var line []byte
		next := len(rest) + 1
		if end < 0 {
			line = rest[pos:]
		} else {
			line = rest[pos : pos+end]
			next = pos + end + 1
		}
		if t := bytes.TrimRight(line, " \t\r"); string(t) == "---" || string(t) == "..." {
			if next > len(rest) {
				return rest[:pos], nil, true
			}
			return rest[:pos], rest[next:], true
		}
		pos = next
	}
	return nil, nil, false
}

// check bounds the nesting of the tree at n and drops duplicate mapping keys from it, reporting
// each (the first one is kept). Mapping keys count by their text, as they will as JSON strings: a
// YAML integer key 1 and a string key "1" are the same key.
func (d *Document) check(n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("YAML nested deeper than %d levels", maxDepth)
	}
	switch n.Kind {
	case yaml.MappingNode:
		kept := n.Content[:0]
		var seen map[string]*yaml.Node // for long mappings; short ones are scanned
		if len(n.Content) > 2*shortMapping {
			seen = make(map[string]*yaml.Node, len(n.Content)/2)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if first := keptKey(kept, seen, k.Value); first != nil {
				d.dups = append(d.dups, Finding{Pos: d.nodePos(k), Severity: SeverityError, Rule: "yaml-duplicate-key",
					Message: fmt.Sprintf("key %q is already defined at line %d", k.Value, first.Line+d.offset), Hint: "merge the two entries; only the first is used"})
				continue
			}
			kept = append(kept, k, val)
			if seen != nil {
				seen[k.Value] = k
			}
			if err := d.check(val, depth+1); err != nil {
				return err
			}
		}
		// The dropped keys' nodes are let go: left behind the kept ones in the backing array they
		// would stay reachable from the tree (and the parse cache), uncounted in d.nodes.
		clear(n.Content[len(kept):])
		n.Content = kept
		d.nodes += len(kept)
	case yaml.SequenceNode:
		d.nodes += len(n.Content)
		for _, c := range n.Content {
			if err := d.check(c, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// shortMapping is the number of keys up to which a mapping's duplicates are found by scanning the
// keys kept so far rather than with a map.
const shortMapping = 16

// keptKey returns the kept key node named name, or nil: from seen when there is one, else by
// scanning kept (alternate keys and values).
func keptKey(kept []*yaml.Node, seen map[string]*yaml.Node, name string) *yaml.Node {
	if seen != nil {
		return seen[name]
	}
	for j := 0; j < len(kept); j += 2 {
		if kept[j].Value == name {
			return kept[j]
		}
	}
	return nil
}

// valueOf turns a checked YAML node (check: no duplicate keys, bounded depth, no aliases) into
// JSON-compatible values (map[string]any, []any, string, bool, json.Number, nil). Mapping keys
// become strings, which normalises YAML integer keys such as output.exit_codes.
func valueOf(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = valueOf(n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = valueOf(c)
		}
		return s
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil
}

func scalarValue(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		return strings.EqualFold(n.Value, "true")
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		var i int64 // 0x1f, 0o17, 1_000 and the other YAML spellings
		if n.Decode(&i) == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil && n.Decode(&f) != nil {
			return n.Value
		}
		if s := strconv.FormatFloat(f, 'g', -1, 64); !strings.ContainsAny(s, "IN") {
			return json.Number(s)
		}
	}
	return n.Value
}

// decode fills out from the frontmatter. The YAML library keeps decoding past a type mismatch, so
// out is filled as far as possible; mismatches are reported by the schema validation.
func (d *Document) decode(out any) {
	if d.Root == nil {
		return
	}
	defer func() { _ = recover() }()
	_ = d.Root.Decode(out)
}
