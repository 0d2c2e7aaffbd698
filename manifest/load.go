package manifest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"

	"github.com/clihost/clihost/schemas"
)

// Bundle is a loaded CLI bundle: its CLI.md, the TOOL.md of every command, and what lint found.
type Bundle struct {
	Dir      string       `json:"dir"`  // the bundle folder, as displayed
	File     string       `json:"file"` // CLI.md, as displayed
	CLI      *CLI         `json:"cli"`
	Body     string       `json:"-"`
	Tools    []*ToolEntry `json:"tools"`
	Intents  []*Intent    `json:"intents,omitempty"` // the INTENT.md files that loaded without errors
	Findings Findings     `json:"findings,omitempty"`
	IDPos    Pos          `json:"-"` // where id is declared, for findings about the bundle as a whole
	OSDir    string       `json:"-"` // the bundle folder on disk; empty for the embedded catalog

	// Secrets is auth.ref's SECRETS.md inventory (secrets.go).
	Secrets []SecretSlot `json:"secrets,omitempty"`

	// RunnerImagePos and RunnerNeedsPos are where the runner block (inline in CLI.md, or its
	// RUNNER.md) names its image and its needs.native, for findings about what this host cannot
	// honour of them (zero when absent).
	RunnerImagePos Pos `json:"-"`
	RunnerNeedsPos Pos `json:"-"`

	fsys   fs.FS
	fsPath string // CLI.md inside fsys
}

// ToolEntry is one leaf of the commands tree with its parsed TOOL.md (nil Tool when it failed to load).
type ToolEntry struct {
	Path []string `json:"path"` // command path, e.g. [pr list]
	Ref  string   `json:"ref"`
	File string   `json:"file"` // as displayed
	Tool *Tool    `json:"tool,omitempty"`

	inputSchema, outputSchema *jsonschema.Schema
}

// InputSchema returns the compiled inputs schema, or nil when it did not compile.
func (t *ToolEntry) InputSchema() *jsonschema.Schema { return t.inputSchema }

// OutputSchema returns the compiled outputs schema, or nil when it did not compile.
func (t *ToolEntry) OutputSchema() *jsonschema.Schema { return t.outputSchema }

// CommandPath returns the command path joined by spaces, e.g. "pr list".
func (t *ToolEntry) CommandPath() string { return strings.Join(t.Path, " ") }

// ID returns the bundle id, or "" when the manifest did not decode.
func (b *Bundle) ID() string {
	if b.CLI == nil {
		return ""
	}
	return b.CLI.ID
}

// Major returns the major number of the manifest version (0 when it does not parse).
func (b *Bundle) Major() uint64 {
	if b.CLI == nil {
		return 0
	}
	if v, err := NormalizeVersion(b.CLI.Version); err == nil {
		return v.Major()
	}
	return 0
}

// Key returns the bundle's stable identity, id@major.
func (b *Bundle) Key() string { return fmt.Sprintf("%s@%d", b.ID(), b.Major()) }

// Tool finds a tool by TOOL.md id, by command path ("pr list") or by dotted path ("pr.list").
func (b *Bundle) Tool(name string) *ToolEntry {
	for _, t := range b.Tools {
		if t.Tool != nil && t.Tool.ID == name {
			return t
		}
	}
	for _, t := range b.Tools {
		if p := strings.Join(t.Path, " "); p == name || strings.Join(t.Path, ".") == name || MCPName(t.Path) == name {
			return t
		}
	}
	return nil
}

// LoadOptions adjusts how a bundle is loaded.
type LoadOptions struct {
	// Display maps a path inside the filesystem to the path shown in findings. Default: unchanged.
	Display func(string) string
	// OSPath maps a path inside the filesystem to the operating system's path, for bundles on disk
	// (vendored binaries run from there). Nil for filesystems that are not on disk.
	OSPath func(string) string
}

func (o LoadOptions) display(p string) string {
	if o.Display == nil {
		return p
	}
	return o.Display(p)
}

// LoadBundle reads, validates and lints the bundle whose CLI.md is at cliPath inside fsys. It
// never panics and always returns a Bundle; problems are in Bundle.Findings.
func LoadBundle(fsys fs.FS, cliPath string, opts LoadOptions) *Bundle {
	b := &Bundle{fsys: fsys, fsPath: cliPath, Dir: opts.display(path.Dir(cliPath)), File: opts.display(cliPath)}
	if opts.OSPath != nil {
		b.OSDir = opts.OSPath(path.Dir(cliPath))
	}
	root, f := manifestInside(b.OSDir, path.Base(cliPath))
	if f != nil {
		f.Pos.File = b.File
		b.Findings = Findings{*f}
		return b
	}
	data, err := readManifest(fsys, cliPath)
	if err != nil {
		b.Findings = Findings{{Pos: Pos{File: b.File}, Severity: SeverityError, Rule: "file-unreadable", Message: err.Error(), Hint: "check the path and its permissions"}}
		return b
	}
	doc, problems := loadDocument(b.File, data)
	b.Body, b.IDPos = doc.Body, doc.Pos("/id")
	if doc.Root == nil {
		b.Findings = problems
		return b
	}
	c := newCollector(doc)
	c.semantic = problems
	schema, err := schemas.CLI()
	if err != nil {
		panic(err) // the embedded schema is part of the binary; tests guarantee it compiles
	}
	cli := &CLI{}
	doc.decode(cli)
	b.CLI = cli
	l := &linter{b: b, c: c, refs: newCollector(doc), opts: opts, cli: cli}
	l.root = root
	l.runnerFile = l.loadRunnerFile()
	// CLI.md's own checks run while the tools load, on the same workers; neither writes what the
	// other reads.
	l.loadTools(func() {
		c.schema(schema)
		l.cliRules()
	})
	l.secretBindRules()
	l.loadIntents()
	c.merge(l.refs)
	b.Findings = append(b.Findings, c.findings()...)
	if rf := l.runnerFile; rf != nil {
		b.Findings = append(b.Findings, rf.c.findings()...)
	}
	b.Findings.Sort()
	return b
}

// collector gathers findings for one document. Schema findings at a pointer where a semantic rule
// also reported are dropped, since the semantic finding says more.
type collector struct {
	doc      *Document
	semantic Findings
	fromRule map[string]bool
	schemaFs []pointed
	// meant holds the pointers of the fields that unknown keys were probably meant to be (a
	// "did you mean" suggestion), so that rules about those fields being absent stay quiet: one
	// typo is one finding.
	meant map[string]bool
}

type pointed struct {
	ptr string
	f   Finding
}

func newCollector(doc *Document) *collector {
	return &collector{doc: doc}
}

// ruled records that a rule reported at ptr (the maps are made on first use: most documents have
// no findings).
func (c *collector) ruled(ptr string) {
	if c.fromRule == nil {
		c.fromRule = map[string]bool{}
	}
	c.fromRule[ptr] = true
}

// at reports a finding at the value under ptr.
func (c *collector) at(ptr string, sev Severity, rule, msg, hint string) {
	c.ruled(ptr)
	c.semantic = append(c.semantic, Finding{Pos: c.doc.Pos(ptr), Severity: sev, Rule: rule, Message: msg, Hint: hint})
}

// atKey reports a finding at the key of the value under ptr.
func (c *collector) atKey(ptr string, sev Severity, rule, msg, hint string) {
	c.ruled(ptr)
	c.semantic = append(c.semantic, Finding{Pos: c.doc.KeyPos(ptr), Severity: sev, Rule: rule, Message: msg, Hint: hint})
}

// merge takes over another collector's semantic findings for the same document.
func (c *collector) merge(o *collector) {
	for ptr := range o.fromRule {
		c.ruled(ptr)
	}
	c.semantic = append(c.semantic, o.semantic...)
}

func (c *collector) findings() Findings {
	out := append(Findings(nil), c.semantic...)
	for _, s := range c.schemaFs {
		if !c.fromRule[s.ptr] {
			out = append(out, s.f)
		}
	}
	return out
}

var quotedNames = regexp.MustCompile(`'([^']*)'`)

// schemaGroup is what schema validation found at one instance location: the keyword of its first
// leaf error and the distinct messages, in the order the validator reported them.
type schemaGroup struct {
	ptr, keyword string
	msgs         []string
	meant        []string // pointers of the fields the unknown keys here were probably meant to be
}

// schema validates the document's values and records each leaf error at its instance location.
func (c *collector) schema(s *jsonschema.Schema) {
	if c.doc.Root == nil {
		return
	}
	groups, ok := validationCache.get(s, c.doc.digest)
	if !ok {
		groups = schemaGroups(c.doc, s.Validate(c.doc.Values()))
		validationCache.put(s, c.doc.digest, groups)
	}
	for _, g := range groups {
		for _, m := range g.meant {
			if c.meant == nil {
				c.meant = map[string]bool{}
			}
			c.meant[m] = true
		}
		where := strings.TrimPrefix(g.ptr, "/")
		if where == "" {
			where = "frontmatter"
		}
		msg := where + ": " + strings.Join(g.msgs, "; ")
		pos := c.doc.Pos(g.ptr)
		if g.keyword == "additionalProperties" || g.keyword == "required" {
			pos = c.doc.KeyPos(g.ptr)
		}
		c.schemaFs = append(c.schemaFs, pointed{ptr: g.ptr, f: Finding{Pos: pos, Severity: SeverityError,
			Rule: "schema-" + kebab(g.keyword), Message: msg, Hint: schemaHint(g.keyword)}})
	}
}

// schemaGroups groups the leaf errors of a validation result by instance location.
func schemaGroups(doc *Document, err error) []schemaGroup {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	index := map[string]int{}
	var groups []schemaGroup
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, cause := range e.Causes {
				walk(cause)
			}
			return
		}
		kw := e.KeywordLocation[strings.LastIndexByte(e.KeywordLocation, '/')+1:]
		ptr, msg := e.InstanceLocation, e.Message
		var meant []string
		if kw == "additionalProperties" {
			// point at the first unexpected key itself
			order := keyOrder(doc, ptr)
			if names := unknownFields(order, e.Message); len(names) > 0 {
				allowed := schemas.PropertiesAt(strings.TrimSuffix(e.AbsoluteKeywordLocation, "/additionalProperties"))
				var suggestions []string
				for _, n := range names {
					if s := nearest(n, allowed); s != "" && !hasKey(order, s) {
						meant = append(meant, JoinPointer(ptr, s))
						suggestions = append(suggestions, fmt.Sprintf("'%s' for '%s'", s, n))
					}
				}
				ptr, msg = JoinPointer(ptr, names[0]), unknownFieldsMessage(names)
				if len(suggestions) == 1 && len(names) == 1 {
					msg += didYouMean(allowedName(meant[0]))
				} else if len(suggestions) > 0 {
					msg += "; did you mean " + strings.Join(suggestions, ", ") + "?"
				}
			}
		}
		i, ok := index[ptr]
		if !ok {
			i = len(groups)
			index[ptr] = i
			groups = append(groups, schemaGroup{ptr: ptr, keyword: kw})
		}
		groups[i].meant = append(groups[i].meant, meant...)
		if !slices.Contains(groups[i].msgs, msg) {
			groups[i].msgs = append(groups[i].msgs, msg)
		}
	}
	walk(ve)
	return dropMisspeltRequired(groups)
}

// allowedName is the last token of a pointer.
func allowedName(ptr string) string { return ptr[strings.LastIndexByte(ptr, '/')+1:] }

// dropMisspeltRequired removes the "missing properties" groups whose every missing field is one
// that an unknown key beside it was probably meant to be: `input:` is reported once, as an unknown
// field with its suggestion, not again as inputs missing.
func dropMisspeltRequired(groups []schemaGroup) []schemaGroup {
	meant := map[string]bool{}
	for _, g := range groups {
		for _, m := range g.meant {
			meant[m] = true
		}
	}
	if len(meant) == 0 {
		return groups
	}
	return slices.DeleteFunc(groups, func(g schemaGroup) bool {
		if g.keyword != "required" || len(g.msgs) != 1 {
			return false
		}
		missing := quotedNames.FindAllStringSubmatch(g.msgs[0], -1)
		for _, m := range missing {
			if !meant[JoinPointer(g.ptr, m[1])] {
				return false
			}
		}
		return len(missing) > 0
	})
}

// validationCache holds what validating a frontmatter against one of the embedded schemas found,
// by the schema and the SHA-256 of the frontmatter's text. The frontmatter's values are a function
// of its text and validation a function of the schema and the values, so an unchanged file is not
// validated again on a reload; any change to the text is a different key. Positions are not
// cached: they are looked up in the document each time. The cache is dropped whole when it
// reaches validationCacheSize entries; a result larger than maxCachedGroups is not cached.
var validationCache groupCache

const validationCacheSize = 1 << 14

type groupKey struct {
	schema *jsonschema.Schema
	digest [sha256.Size]byte
}

type groupCache struct {
	sync.Mutex
	m map[groupKey][]schemaGroup
}

func (gc *groupCache) get(s *jsonschema.Schema, digest [sha256.Size]byte) ([]schemaGroup, bool) {
	gc.Lock()
	defer gc.Unlock()
	g, ok := gc.m[groupKey{s, digest}]
	return g, ok
}

// maxCachedGroups bounds the size of one cached validation result (groupsSize): a longer one, which
// a hostile frontmatter can make megabytes long (a group per wrong item of a long list), is found
// again at each load rather than held.
const maxCachedGroups = 16 << 10

// groupsSize estimates the bytes groups holds: each group's fields and their text.
func groupsSize(groups []schemaGroup) int {
	size := 0
	for _, g := range groups {
		size += int(unsafe.Sizeof(g)) + len(g.ptr) + len(g.keyword)
		for _, m := range g.msgs {
			size += int(unsafe.Sizeof(m)) + len(m)
		}
		for _, m := range g.meant {
			size += int(unsafe.Sizeof(m)) + len(m)
		}
	}
	return size
}

func (gc *groupCache) put(s *jsonschema.Schema, digest [sha256.Size]byte, g []schemaGroup) {
	if groupsSize(g) > maxCachedGroups {
		return
	}
	gc.Lock()
	defer gc.Unlock()
	if gc.m == nil || len(gc.m) >= validationCacheSize {
		gc.m = map[groupKey][]schemaGroup{}
	}
	gc.m[groupKey{s, digest}] = g
}

func (gc *groupCache) reset() {
	gc.Lock()
	gc.m = nil
	gc.Unlock()
}

func schemaHint(keyword string) string {
	switch keyword {
	case "required":
		return "add the missing field; docs/authoring.md lists every field"
	case "additionalProperties":
		return "remove the field or fix its spelling; docs/authoring.md lists the allowed fields"
	case "type":
		return "change the value to the expected type (quote strings that YAML reads as numbers or booleans)"
	case "enum", "const":
		return "use one of the allowed values"
	case "pattern":
		return "change the value to match the pattern"
	case "minItems", "minLength", "minProperties":
		return "the value must not be empty"
	case "not":
		return "declare only one of actions and intents (the same list of INTENT.md refs)"
	}
	return "see docs/authoring.md"
}

func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// keyOrder maps the keys of the mapping at ptr to their place in the document (nil when ptr is
// no mapping): one walk of the node, however many keys it has.
func keyOrder(doc *Document, ptr string) map[string]int {
	_, n := doc.lookup(ptr)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	order := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if _, dup := order[n.Content[i].Value]; !dup {
			order[n.Content[i].Value] = i
		}
	}
	return order
}

func hasKey(order map[string]int, k string) bool {
	_, ok := order[k]
	return ok
}

// unknownFields returns the names an "additionalProperties 'a', 'b' not allowed" error lists, in
// the order they are written in the document (order, from keyOrder). The validator lists them in
// Go's random map order, which would make the finding's position change from one run to the next.
func unknownFields(order map[string]int, msg string) []string {
	var names []string
	for _, m := range quotedNames.FindAllStringSubmatch(msg, -1) {
		names = append(names, m[1])
	}
	slices.SortStableFunc(names, func(a, b string) int { return order[a] - order[b] })
	return names
}

// unknownFieldsMessage says briefly which fields are unknown.
func unknownFieldsMessage(names []string) string {
	quoted := make([]string, 0, min(len(names), 3))
	for _, n := range names[:min(len(names), 3)] {
		quoted = append(quoted, "'"+n+"'")
	}
	more := ""
	if len(names) > 3 {
		more = fmt.Sprintf(" and %d more", len(names)-3)
	}
	word := "field"
	if len(names) > 1 {
		word = "fields"
	}
	return fmt.Sprintf("unknown %s %s%s", word, strings.Join(quoted, ", "), more)
}
