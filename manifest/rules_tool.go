package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/clihost/clihost/schemas"
)

// MaxMCPNameLength is the longest tool name MCP clients accept.
const MaxMCPNameLength = 64

var (
	mcpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_\-]+$`)
	optionToken    = regexp.MustCompile(`^--?[A-Za-z0-9][A-Za-z0-9\-]*$`)
)

// MCPName is the MCP tool name of a command path: its words joined with _.
func MCPName(path []string) string { return strings.Join(path, "_") }

// toolLoads is the TOOL.md work of one bundle: one job per distinct file, and the entries that
// refer to a file another entry already loads.
type toolLoads struct {
	jobs   []*toolLinter
	shared []struct{ entry, from *ToolEntry }
	leaves []Leaf
}

// loadTools loads the TOOL.md of every leaf of the commands tree and lints each, with also (when
// not nil) running alongside them on the same workers. The files are independent, so they are
// parsed concurrently (up to GOMAXPROCS at a time); results are combined in manifest order, so
// output does not depend on scheduling.
func (l *linter) loadTools(also func()) {
	tl := l.toolJobs()
	// A few long-lived workers rather than a goroutine per file: validation recurses deeply, and
	// every fresh goroutine would grow its stack again. also goes first: it is the longest job.
	work := make([]func(), 0, len(tl.jobs)+1)
	if also != nil {
		work = append(work, also)
	}
	for _, j := range tl.jobs {
		work = append(work, j.read)
	}
	runAll(work)
	l.finishTools(tl)
}

// runAll runs every function of work, on the calling goroutine and up to GOMAXPROCS-1 others,
// each taking the next function not yet taken: no channel hand-off per function, and one
// goroutine fewer to start and wake than a pool the caller only feeds.
func runAll(work []func()) {
	var next atomic.Int64
	run := func() {
		for i := next.Add(1) - 1; i < int64(len(work)); i = next.Add(1) - 1 {
			work[i]()
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(work)) - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
}

// read reads and loads the job's TOOL.md.
func (j *toolLinter) read() {
	data, err := readManifest(j.b.fsys, j.fsPath)
	if err != nil {
		j.readErr = err
		return
	}
	j.load(data)
}

// toolJobs lists the TOOL.md files to load, reporting refs that leave the bundle.
func (l *linter) toolJobs() toolLoads {
	bundleDir := path.Dir(l.b.fsPath)
	tl := toolLoads{leaves: l.cli.Commands.Leaves()}
	first := map[string]*ToolEntry{} // TOOL.md path → the entry that loads it
	for _, leaf := range tl.leaves {
		entry := &ToolEntry{Path: leaf.Path, Ref: leaf.Ref}
		full := path.Join(bundleDir, leaf.Ref)
		if path.IsAbs(leaf.Ref) || !within(bundleDir, full) {
			l.refs.at(leaf.Pointer, SeverityError, "commands-ref-escapes", fmt.Sprintf("command %q refers to %q, outside the bundle folder", strings.Join(leaf.Path, " "), leaf.Ref), "TOOL.md files live inside the bundle, e.g. ./tools/pr-list/TOOL.md")
			continue
		}
		entry.File = l.opts.display(full)
		if !l.outside(l.refs, leaf.Pointer, "TOOL.md", leaf.Ref) {
			continue // never read: its text would end up in findings and logs
		}
		if prev, ok := first[full]; ok {
			tl.shared = append(tl.shared, struct{ entry, from *ToolEntry }{entry, prev})
			l.b.Tools = append(l.b.Tools, entry)
			continue
		}
		first[full] = entry
		tl.jobs = append(tl.jobs, &toolLinter{linter: l, entry: entry, fsPath: full, leaf: leaf})
	}
	return tl
}

// finishTools runs the rules across tools and collects the loaded tools and their findings.
func (l *linter) finishTools(tl toolLoads) {
	commandPathRule(tl.jobs)
	ids := map[string]string{}
	for _, j := range tl.jobs {
		if j.readErr != nil {
			l.refs.at(j.leaf.Pointer, SeverityError, "commands-ref-missing", fmt.Sprintf("command %q refers to %q, which cannot be read: %v", strings.Join(j.leaf.Path, " "), j.leaf.Ref, unwrapPathError(j.readErr)), "create the TOOL.md or fix the path (relative to the bundle folder)")
			continue
		}
		l.b.Tools = append(l.b.Tools, j.entry)
		j.inventoryRefRules()
		if t := j.entry.Tool; t != nil && t.ID != "" {
			if other, dup := ids[t.ID]; dup {
				j.c.at("/id", SeverityError, "tool-id-duplicate", fmt.Sprintf("tool id %q is also used by %s", t.ID, other), "give every tool of a bundle its own id, e.g. <bundle>.<command path>")
			} else {
				ids[t.ID] = j.entry.File
			}
		}
		l.b.Findings = append(l.b.Findings, j.c.findings()...)
	}
	for _, s := range tl.shared {
		s.entry.Tool, s.entry.inputSchema, s.entry.outputSchema = s.from.Tool, s.from.inputSchema, s.from.outputSchema
	}
	sortTools(l.b.Tools, tl.leaves)
}

// sortTools puts the tool entries back in the commands tree's order.
func sortTools(tools []*ToolEntry, leaves []Leaf) {
	order := make(map[string]int, len(leaves))
	for i, lf := range leaves {
		order[strings.Join(lf.Path, "\x00")] = i
	}
	rank := make(map[*ToolEntry]int, len(tools)) // each path joined once, not at every comparison
	for _, t := range tools {
		rank[t] = order[strings.Join(t.Path, "\x00")]
	}
	sort.SliceStable(tools, func(i, j int) bool { return rank[tools[i]] < rank[tools[j]] })
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

type toolLinter struct {
	*linter
	entry   *ToolEntry
	fsPath  string
	leaf    Leaf
	c       *collector
	readErr error
	// set by runnerRules for commandPathRule
	argvParsed, startsWithPath bool
}

func (t *toolLinter) load(data []byte) {
	doc, problems := loadDocument(t.entry.File, data)
	t.c = newCollector(doc)
	t.c.semantic = problems
	if doc.Root == nil {
		return
	}
	schema, err := schemas.Tool()
	if err != nil {
		panic(err)
	}
	t.c.schema(schema)
	tool := &Tool{}
	doc.decode(tool)
	tool.Inputs, _ = doc.valueAt("inputs").(map[string]any)
	tool.Outputs, _ = doc.valueAt("outputs").(map[string]any)
	if ex, ok := doc.valueAt("examples").([]any); ok {
		for i := range tool.Examples {
			if i < len(ex) {
				if m, ok := ex[i].(map[string]any); ok {
					tool.Examples[i].Input, tool.Examples[i].Output = m["input"], m["output"]
				}
			}
		}
	}
	t.entry.Tool = tool
	t.rules(tool)
}

func (t *toolLinter) rules(tool *Tool) {
	c, doc := t.c, t.c.doc
	if doc.Has("/inputs") {
		t.entry.inputSchema = t.compileSchema("/inputs", tool.Inputs, "tool-inputs-schema", true)
		if t.entry.inputSchema != nil && t.keywordRules("/inputs") {
			// a typo'd keyword is one error: the rules that read the schema (argv references,
			// examples) would report what follows from it again
			t.entry.inputSchema = nil
		}
		t.allowDashRules(tool)
	}
	if doc.Has("/outputs") {
		t.entry.outputSchema = t.compileSchema("/outputs", tool.Outputs, "tool-outputs-schema", false)
		if t.entry.outputSchema != nil && t.keywordRules("/outputs") {
			t.entry.outputSchema = nil
		}
	}
	if len(tool.Mutates) > 0 && (tool.Approval == "" || tool.Approval == "auto") {
		c.atKey("/mutates", SeverityError, "tool-mutates-approval", "the tool mutates state but its approval is auto (the default)", "set approval: on-mutate (or always); AIP-14 allows auto only with mutates: []")
	}
	if name := MCPName(t.entry.Path); len(name) > MaxMCPNameLength || !mcpNamePattern.MatchString(name) {
		c.atKey("/id", SeverityWarning, "tool-mcp-name", fmt.Sprintf("the MCP tool name %q is longer than %d characters or has characters other than letters, digits, _ and -", name, MaxMCPNameLength), "shorten the command names in the commands tree")
	}
	if s := t.entry.inputSchema; s != nil {
		for i, ex := range tool.Examples {
			if problem := exampleProblem(s, doc.digest, i, ex.Input); problem != "" {
				c.at(JoinPointer("/examples", i, "input"), SeverityError, "tool-example-invalid", fmt.Sprintf("example %q does not satisfy inputs: %s", ex.Name, problem), "fix the example or the inputs schema")
			}
		}
	}
	if note, ok := tool.Metadata[ReviewKey].(string); ok && note != "" {
		c.atKey(JoinPointer("/metadata", ReviewKey), SeverityWarning, "tool-review", "flagged for review: "+note,
			"check the risk level, approval and sandbox, then delete metadata."+ReviewKey)
	}
	t.runnerRules(tool)
	if tool.Sandbox != nil {
		t.sandboxRules(c, "/sandbox", tool.Sandbox)
		t.narrowingRules(tool.Sandbox)
	}
}

// exampleProblem validates input, example i of the frontmatter whose text has the SHA-256 digest,
// against the compiled inputs schema s; it returns what is wrong, or "".
func exampleProblem(s *jsonschema.Schema, digest [sha256.Size]byte, i int, input any) string {
	key := exampleKey{s, digest, i}
	exampleResults.Lock()
	_, ok := exampleResults.m[key]
	exampleResults.Unlock()
	if ok {
		return ""
	}
	if err := s.Validate(input); err != nil {
		return schemaErrorText(err)
	}
	exampleResults.Lock()
	defer exampleResults.Unlock()
	if exampleResults.m == nil || len(exampleResults.m) >= validationCacheSize {
		exampleResults.m = map[exampleKey]struct{}{}
	}
	exampleResults.m[key] = struct{}{}
	return ""
}

// exampleResults holds the examples whose input satisfied the inputs schema, by the compiled
// schema, the SHA-256 of the frontmatter's text (which the example is a function of) and the
// example's index: a reload of an unchanged TOOL.md does not validate its examples again, and any
// change to its text is a different key. An example that fails is validated at every load: what
// it found is as long as the bundle makes it (a line per wrong item), too much to keep. The set is
// dropped whole when it reaches validationCacheSize entries.
var exampleResults struct {
	sync.Mutex
	m map[exampleKey]struct{}
}

type exampleKey struct {
	schema *jsonschema.Schema
	digest [sha256.Size]byte
	index  int
}

// compileSchema compiles a JSON Schema held in the manifest; remote references are refused.
// A schema already compiled for the same place in a frontmatter of the same text is reused without
// encoding it again.
func (t *toolLinter) compileSchema(ptr string, v map[string]any, rule string, mustBeObject bool) *jsonschema.Schema {
	at := docSchemaKey{t.c.doc.digest, ptr}
	s := schemaAt(at)
	if s == nil {
		raw, err := json.Marshal(v)
		if err != nil {
			t.c.at(ptr, SeverityError, rule, "the schema cannot be encoded as JSON: "+err.Error(), "")
			return nil
		}
		if s, err = compileEmbeddedSchema(at, raw); err != nil {
			t.c.at(ptr, SeverityError, rule, "the schema is not valid JSON Schema 2020-12: "+schemaErrorText(err), "fix it against https://json-schema.org/draft/2020-12")
			return nil
		}
	}
	if mustBeObject && v["type"] != "object" {
		t.c.atKey(ptr, SeverityError, rule, "inputs must be an object schema (type: object)", "tool inputs are named arguments: type: object with properties")
		return nil
	}
	return s
}

// schemaCache holds compiled manifest schemas by their JSON text. A compiled schema is immutable,
// so bundles that share a schema (many tools output {type: string}) and reloads of unchanged
// files compile it once. byDoc finds the same schemas by the frontmatter they were compiled from
// (the SHA-256 of its text, which the schema's value is a function of) and their place in it, so
// a reload of an unchanged file need not encode them. m is dropped whole (byDoc with it) when it
// reaches schemaCacheSize entries, byDoc alone when it reaches four times that.
var schemaCache struct {
	sync.Mutex
	m     map[string]*jsonschema.Schema
	byDoc map[docSchemaKey]*jsonschema.Schema
}

// docSchemaKey is a schema's place: the frontmatter's digest and the JSON pointer inside it.
type docSchemaKey struct {
	digest [sha256.Size]byte
	ptr    string
}

// schemaAt returns the schema compiled for at, or nil.
func schemaAt(at docSchemaKey) *jsonschema.Schema {
	schemaCache.Lock()
	defer schemaCache.Unlock()
	return schemaCache.byDoc[at]
}

const schemaCacheSize = 4096

// ResetSchemaCache empties the compiled-schema cache, the parsed files and the caches of what
// checking a frontmatter and its version_check found (for cold-start benchmarks).
func ResetSchemaCache() {
	resetParseCache()
	schemaCache.Lock()
	schemaCache.m, schemaCache.byDoc = nil, nil
	schemaCache.Unlock()
	validationCache.reset()
	exampleResults.Lock()
	exampleResults.m = nil
	exampleResults.Unlock()
	versionPatternErrors.reset()
	versionRangeErrors.reset()
}

// compileEmbeddedSchema compiles raw, or takes it from the cache, and records it for at.
func compileEmbeddedSchema(at docSchemaKey, raw []byte) (*jsonschema.Schema, error) {
	key := string(raw)
	schemaCache.Lock()
	s, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if !ok {
		var err error
		if s, err = compileSchemaText(raw); err != nil {
			return nil, err
		}
	}
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if schemaCache.m == nil || len(schemaCache.m) >= schemaCacheSize {
		schemaCache.m = map[string]*jsonschema.Schema{}
		schemaCache.byDoc = nil
	}
	if schemaCache.byDoc == nil || len(schemaCache.byDoc) >= 4*schemaCacheSize {
		schemaCache.byDoc = map[docSchemaKey]*jsonschema.Schema{}
	}
	schemaCache.m[key] = s
	schemaCache.byDoc[at] = s
	return s, nil
}

// compileSchemaText compiles one self-contained JSON Schema 2020-12.
func compileSchemaText(raw []byte) (*jsonschema.Schema, error) {
	comp := jsonschema.NewCompiler()
	comp.Draft = jsonschema.Draft2020
	comp.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("external $ref %q is not allowed; keep the schema self-contained ($defs)", u)
	}
	const url = "clihost:///schema.json"
	if err := comp.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	return comp.Compile(url)
}

// schemaErrorText flattens a jsonschema error to its innermost messages.
func schemaErrorText(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		if se, ok := err.(*jsonschema.SchemaError); ok && se.Err != nil {
			return schemaErrorText(se.Err)
		}
		return err.Error()
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			msgs = append(msgs, loc+": "+e.Message)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(msgs, "; ")
}

func (t *toolLinter) runnerRules(tool *Tool) {
	c, doc := t.c, t.c.doc
	r := tool.Runner
	if r == nil {
		if doc.Root != nil && !c.meant["/runner"] {
			c.at("", SeverityError, "tool-runner-missing", "the tool has no runner block binding it to its CLI", "add runner: {cli: ../../CLI.md, argv: [...]}")
		}
		return
	}
	if doc.Has("/runner/cli") {
		if got := path.Join(path.Dir(t.fsPath), r.CLI); got != t.b.fsPath {
			c.at("/runner/cli", SeverityError, "tool-runner-cli", fmt.Sprintf("runner.cli %q resolves to %s, not to the bundle's CLI.md", r.CLI, t.opts.display(got)), "point it back at the bundle, e.g. ../../CLI.md")
		} else {
			ref := t.leaf.Ref // as written: each of its folders is resolved on disk
			t.outside(c, "/runner/cli", "runner.cli", ref[:strings.LastIndexByte(ref, '/')+1]+r.CLI)
		}
	}
	if r.Output != nil {
		t.exitCodeRules(c, "/runner/output/exit_codes", r.Output.ExitCodes)
		if r.Output.File != "" {
			t.outputFileRules(tool)
		}
	}
	t.limitsRules(r.Limits)
	hasArgv, hasSteps := doc.Has("/runner/argv"), doc.Has("/runner/steps")
	if hasSteps && t.cli.Runner.Engine() == EngineSandbox {
		c.atKey("/runner/steps", SeverityError, "runner-sandbox-steps", "the bundle's runner is engine: sandbox, which runs one argv in a container; runner.steps are not run there",
			"use runner.argv, or engine: subprocess")
	}
	switch {
	case hasArgv && hasSteps:
		c.atKey("/runner/steps", SeverityError, "tool-runner-argv", "runner has both argv and steps", "a tool runs one argv or a list of steps: keep one")
		return
	case !hasArgv && !hasSteps:
		c.atKey("/runner", SeverityError, "tool-runner-argv", "runner has neither argv nor steps", "add runner.argv: [...] (one process) or runner.steps: [{argv: [...]}, ...]")
		return
	case hasSteps:
		if r.Stdin != nil {
			c.atKey("/runner/stdin", SeverityError, "runner-stdin-steps", "runner.stdin is for argv tools; a tool with steps gives each step its own stdin", "move it into the step that reads it: steps: [{argv: [...], stdin: ...}]")
		}
		t.stepsRules(tool)
		return
	}
	tokens, ok := t.argvRules("/runner/argv", r.Argv, -1, tool)
	if !ok {
		return
	}
	if r.Stdin != nil {
		r.ParsedStdin = t.textTemplate("/runner/stdin", *r.Stdin, -1, tool)
		if r.ParsedStdin == nil {
			return
		}
	}
	r.Parsed = tokens
	t.startsWithPath = len(t.entry.Path) > 0 && len(tokens) >= len(t.entry.Path)
	for i := 0; t.startsWithPath && i < len(t.entry.Path); i++ {
		lit, ok := tokens[i].Literal()
		t.startsWithPath = ok && lit == t.entry.Path[i]
	}
	t.argvParsed = true
}

// argvRules parses and checks one argv template at ptr. step is the index of the step it belongs
// to (its ${steps.N.output} must name an earlier step), or -1 for runner.argv (no step references).
func (t *toolLinter) argvRules(ptr string, raw []string, step int, tool *Tool) ([]TemplateToken, bool) {
	c := t.c
	tokens, bad, err := ParseArgv(raw)
	if err != nil {
		te, _ := err.(*TemplateError)
		at := ptr
		if bad >= 0 && bad < len(raw) {
			at = JoinPointer(ptr, bad)
		}
		rule, hint := "argv-syntax", ""
		if te != nil {
			hint = te.Hint
			if strings.HasPrefix(te.Msg, "unknown filter") {
				rule = "argv-unknown-filter"
			}
		}
		c.at(at, SeverityError, rule, fmt.Sprintf("argv entry %q: %v", entryText(raw, bad), err), hint)
		return nil, false
	}
	required := map[string]bool{}
	if req, ok := tool.Inputs["required"].([]any); ok {
		for _, v := range req {
			if s, ok := v.(string); ok {
				required[s] = true
			}
		}
	}
	t.optionValueRules(ptr, tokens, tool)
	ok := true
	for i, tok := range tokens {
		at := JoinPointer(ptr, i)
		ok = t.exprRules(at, tok, step, tool) && ok
		secretInArgvRule(t.c, at, tok)
		if i == 0 {
			continue
		}
		prev, isLit := tokens[i-1].Literal()
		e := tok.Whole()
		if isLit && optionToken.MatchString(prev) && e != nil && e.Source == "input" && e.Filter == "" && !required[e.Path[0]] {
			c.at(at, SeverityWarning, "argv-bare-optional", fmt.Sprintf("%q is followed by the optional input ${input.%s}: when it is absent the option is left dangling", prev, e.Name()),
				"replace both entries with "+gluedOptional(prev, e))
		}
	}
	return tokens, ok
}

// exprRules checks the references of one parsed template: inputs must be declared, and a step
// reference must name a step before step (none are allowed when step is -1). It reports whether
// the references are all valid.
func (t *toolLinter) exprRules(ptr string, tok TemplateToken, step int, tool *Tool) bool {
	props, _ := tool.Inputs["properties"].(map[string]any)
	ok := true
	for _, e := range tok.Exprs() {
		switch e.Source {
		case "input":
			if t.entry.inputSchema != nil && !declared(props, e.Path) {
				t.c.at(ptr, SeverityError, "argv-undeclared-input", fmt.Sprintf("${input.%s} is not declared in inputs.properties%s", e.Name(), didYouMean(nearestInput(props, e.Path))), "declare it under inputs.properties or fix the name")
			}
		case "steps":
			n, _ := e.Step()
			switch {
			case step < 0:
				t.c.at(ptr, SeverityError, "argv-step-ref", fmt.Sprintf("${steps.%d.output} is only meaningful inside runner.steps", n), "use runner.steps to run several processes, or remove the reference")
				ok = false
			case n >= step:
				t.c.at(ptr, SeverityError, "argv-step-ref", fmt.Sprintf("${steps.%d.output} in step %d: a step can only use the output of an earlier step", n, step), fmt.Sprintf("refer to a step from 0 to %d", step-1))
				ok = false
			}
		}
	}
	return ok
}

// textTemplate parses and checks a template that yields one string rather than argv entries
// (stdin, a step's dir and env values): optional() and flag() make no sense there.
func (t *toolLinter) textTemplate(ptr, raw string, step int, tool *Tool) *TemplateToken {
	tok, err := ParseTemplateToken(raw)
	if err != nil {
		hint := ""
		if te, ok := err.(*TemplateError); ok {
			hint = te.Hint
		}
		t.c.at(ptr, SeverityError, "argv-syntax", fmt.Sprintf("template %q: %v", raw, err), hint)
		return nil
	}
	for _, e := range tok.Exprs() {
		if e.Filter == FilterOptional || e.Filter == FilterFlag {
			t.c.at(ptr, SeverityError, "argv-syntax", fmt.Sprintf("template %q: %s() yields argv entries and cannot be used here", raw, e.Filter), "use the value itself, default('…'), json() or join('…')")
			return nil
		}
	}
	if !t.exprRules(ptr, tok, step, tool) {
		return nil
	}
	return &tok
}

// envNamePattern is what a step's env name must look like.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// stepsRules checks runner.steps: each step's templates, its program (the bundle's bin or an
// exec.spawn entry), its dir and its env names.
func (t *toolLinter) stepsRules(tool *Tool) {
	c, r := t.c, tool.Runner
	if len(r.Steps) == 0 {
		return // the schema reports an empty list
	}
	eff := EffectiveSandbox(t.cli.Sandbox, tool.Sandbox)
	ok := true
	for i := range r.Steps {
		s := &r.Steps[i]
		ptr := JoinPointer("/runner/steps", i)
		tokens, good := t.argvRules(JoinPointer(ptr, "argv"), s.Argv, i, tool)
		ok = ok && good
		s.Parsed = tokens
		if s.Bin != "" && s.Bin != t.cli.Bin {
			var spawn []string
			if eff.Exec != nil {
				spawn = eff.Exec.Spawn
			}
			switch {
			case !path.IsAbs(s.Bin) && strings.Contains(s.Bin, "/"):
				c.at(JoinPointer(ptr, "bin"), SeverityError, "step-bin", fmt.Sprintf("step %d runs %q: a program is a bare name or an absolute path", i, s.Bin), "write the name found on PATH (git) or an absolute path")
				ok = false
			case !slices.Contains(spawn, s.Bin) || !eff.Exec.Allowed():
				c.at(JoinPointer(ptr, "bin"), SeverityError, "step-bin", fmt.Sprintf("step %d runs %q, which the sandbox does not allow: it is neither the bundle's bin %q nor listed in exec.spawn with exec.allow: true", i, s.Bin, t.cli.Bin),
					fmt.Sprintf("add %q to CLI.md's sandbox.exec.spawn and set exec.allow: true", s.Bin))
				ok = false
			}
		}
		if s.Dir != "" {
			dptr := JoinPointer(ptr, "dir")
			if s.ParsedDir = t.textTemplate(dptr, s.Dir, i, tool); s.ParsedDir == nil {
				ok = false
			} else if lit, isLit := s.ParsedDir.Literal(); isLit && (path.IsAbs(lit) || !within(".", path.Clean(lit))) {
				c.at(dptr, SeverityError, "step-dir", fmt.Sprintf("step %d's dir %q is not inside the workspace", i, s.Dir), "dir is relative to the workspace and may not leave it (no leading /, no ..)")
				ok = false
			}
		}
		if len(s.Env) > 0 {
			s.ParsedEnv = map[string]TemplateToken{}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			eptr := JoinPointer(ptr, "env", k)
			if !envNamePattern.MatchString(k) {
				c.atKey(eptr, SeverityError, "step-env", fmt.Sprintf("step %d sets %q, which is not a variable name", i, k), "names are letters, digits and _, not starting with a digit")
				ok = false
				continue
			}
			if envFinding(c, eptr, true, fmt.Sprintf("step %d's env", i), k, SeverityError) {
				ok = false
				continue
			}
			tok := t.textTemplate(eptr, s.Env[k], i, tool)
			if tok == nil {
				ok = false
				continue
			}
			s.ParsedEnv[k] = *tok
		}
		if s.Stdin != nil {
			if s.ParsedStdin = t.textTemplate(JoinPointer(ptr, "stdin"), *s.Stdin, i, tool); s.ParsedStdin == nil {
				ok = false
			}
		}
	}
	r.StepsParsed = ok
}

// commandPathRule warns about tools whose argv does not start with their command path, in bundles
// whose CLI has subcommands: those where at least one tool's argv starts with its path. A CLI
// without subcommands (jq, rg, curl) names its tools freely and no tool matches; a tool named
// after the program itself (hugo's root command builds the site) runs no subcommand.
func commandPathRule(jobs []*toolLinter) {
	subcommands := false
	for _, j := range jobs {
		subcommands = subcommands || j.startsWithPath
	}
	if !subcommands {
		return
	}
	for _, j := range jobs {
		if j.argvParsed && !j.startsWithPath && !j.programTool() {
			j.c.at("/runner/argv", SeverityWarning, "argv-command-path", fmt.Sprintf("argv does not start with the command path %q, as the bundle's other tools do", strings.Join(j.entry.Path, " ")),
				"argv is the full list after bin_args; start it with the subcommand words, or rename the command in CLI.md's commands tree")
		}
	}
}

// outputFileRules checks runner.output.file: it names a declared input that is a string with
// format: path, in an argv tool without stdin (the standard output is the file; steps have their
// own outputs), and the output format is text or binary (nothing is parsed).
func (t *toolLinter) outputFileRules(tool *Tool) {
	const ptr = "/runner/output/file"
	o := tool.Runner.Output
	props, _ := tool.Inputs["properties"].(map[string]any)
	s, _ := props[o.File].(map[string]any)
	hint := "name an input declared as { type: string, format: path }, e.g. output: { file: dest }"
	switch {
	case t.entry.inputSchema == nil:
	case s == nil:
		t.c.at(ptr, SeverityError, "tool-output-file", fmt.Sprintf("runner.output.file names %q, which is not in inputs.properties", o.File), hint)
	case s["type"] != "string" || s["format"] != "path":
		t.c.at(ptr, SeverityError, "tool-output-file", fmt.Sprintf("the input %q that runner.output.file names is not a string with format: path", o.File), hint)
	case len(tool.Runner.Steps) > 0 || tool.Runner.Stdin != nil:
		t.c.at(ptr, SeverityError, "tool-output-file", "runner.output.file is for argv tools without stdin", "write the file from the last step's argv, or drop runner.stdin")
	case o.Format == "json" || o.Format == "yaml" || o.Empty != "":
		t.c.at(ptr, SeverityError, "tool-output-file", "runner.output.file sends the output to a file: it is not parsed as "+o.Format, "use format: text or binary (the result is {path, bytes})")
	}
}

// programTool reports whether the tool runs the program itself rather than a subcommand (hugo
// builds a site): its command path is the one word of the program's name or the bundle's id.
func (t *toolLinter) programTool() bool {
	if len(t.entry.Path) != 1 || t.b.CLI == nil {
		return false
	}
	p := t.entry.Path[0]
	return p == t.b.CLI.ID || (t.b.CLI.Bin != "" && p == path.Base(t.b.CLI.Bin))
}

func entryText(argv []string, i int) string {
	if i >= 0 && i < len(argv) {
		return argv[i]
	}
	return ""
}

// nearestInput suggests the declared input an undeclared ${input.a.b} probably meant: its first
// name's nearest sibling, with the rest of the path ("" when none is near).
func nearestInput(props map[string]any, p []string) string {
	if len(p) == 0 || props[p[0]] != nil {
		return "" // the first name is declared: a nested name is wrong, too deep to guess
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	if n := nearest(p[0], names); n != "" {
		return "${input." + strings.Join(append([]string{n}, p[1:]...), ".") + "}"
	}
	return ""
}

// declared reports whether the dotted input path is declared in the properties schema.
func declared(props map[string]any, p []string) bool {
	for i, name := range p {
		s, ok := props[name].(map[string]any)
		if !ok {
			return false
		}
		if i == len(p)-1 {
			return true
		}
		next, ok := s["properties"].(map[string]any)
		if !ok {
			return s["additionalProperties"] != false // an open object: nested names cannot be checked
		}
		props = next
	}
	return false
}

// narrowingRules reports every part of a tool's sandbox that grants more than its bundle's.
func (t *toolLinter) narrowingRules(ts *Sandbox) {
	bs := &t.cli.Sandbox
	widen := func(ptr, what, hint string) {
		t.c.at(ptr, SeverityError, "tool-sandbox-widens", what+" widens the bundle's sandbox; a tool may only narrow it", hint)
	}
	if ts.Network != nil {
		var bEgress, bIngress []string
		if bs.Network != nil {
			bEgress, bIngress = bs.Network.Egress, bs.Network.Ingress
		}
		for i, h := range ts.Network.Egress {
			if !anyCovers(bEgress, h, HostCovers) {
				widen(JoinPointer("/sandbox/network/egress", i), fmt.Sprintf("egress to %q", h), "list only hosts the bundle's network.egress allows")
			}
		}
		for i, u := range ts.Network.Ingress {
			if !slices.Contains(bIngress, u) {
				widen(JoinPointer("/sandbox/network/ingress", i), fmt.Sprintf("ingress %q", u), "list only the bundle's network.ingress entries")
			}
		}
	}
	if ts.FS != nil {
		var bRead, bWrite []string
		if bs.FS != nil {
			bRead, bWrite = bs.FS.Read, bs.FS.Write
		}
		for i, g := range ts.FS.Read {
			if !anyCovers(bRead, g, PatternCovers) && !anyCovers(bWrite, g, PatternCovers) {
				widen(JoinPointer("/sandbox/fs/read", i), fmt.Sprintf("fs.read %q", g), "read only what the bundle's fs.read or fs.write grants")
			}
		}
		for i, g := range ts.FS.Write {
			if !anyCovers(bWrite, g, PatternCovers) {
				widen(JoinPointer("/sandbox/fs/write", i), fmt.Sprintf("fs.write %q", g), "write only where the bundle's fs.write grants")
			}
		}
	}
	if ts.Exec != nil {
		if ts.Exec.Allowed() && !bs.Exec.Allowed() {
			widen("/sandbox/exec/allow", "exec.allow: true", "the bundle forbids exec, so its tools cannot allow it")
		}
		var bSpawn []string
		if bs.Exec != nil {
			bSpawn = bs.Exec.Spawn
		}
		for i, s := range ts.Exec.Spawn {
			if !slices.Contains(bSpawn, s) {
				widen(JoinPointer("/sandbox/exec/spawn", i), fmt.Sprintf("exec.spawn %q", s), "spawn only what the bundle's exec.spawn lists")
			}
		}
	}
	if ts.Env != nil {
		var bPass []string
		var bSet map[string]string
		if bs.Env != nil {
			bPass, bSet = bs.Env.Pass, bs.Env.Set
		}
		for i, v := range ts.Env.Pass {
			if !slices.Contains(bPass, v) {
				widen(JoinPointer("/sandbox/env/pass", i), fmt.Sprintf("env.pass %q", v), "pass only variables the bundle's env.pass lists")
			}
		}
		for _, k := range slices.Sorted(maps.Keys(ts.Env.Set)) {
			if _, ok := bSet[k]; !ok {
				widen(JoinPointer("/sandbox/env/set", k), fmt.Sprintf("env.set %q", k), "set only variables the bundle's env.set declares")
			}
		}
	}
}

func anyCovers(list []string, v string, covers func(b, t string) bool) bool {
	for _, b := range list {
		if covers(b, v) {
			return true
		}
	}
	return false
}

// within reports whether the clean slash path p lies inside dir.
func within(dir, p string) bool {
	if dir == "." {
		return p != ".." && !strings.HasPrefix(p, "../")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// limitsRules reports every runner.limits field of the tool that is larger than the bundle's
// (CLI.md runner.limits): a tool may only narrow them, and the bundle's would apply anyway.
func (t *toolLinter) limitsRules(tl *RunnerLimits) {
	if tl == nil || t.cli.Runner == nil || t.cli.Runner.Limits == nil {
		return
	}
	bl := t.cli.Runner.Limits
	for _, f := range []struct {
		name      string
		tool, cli int64
	}{{"memory_mb", tl.MemoryMB, bl.MemoryMB}, {"timeout_ms", tl.TimeoutMS, bl.TimeoutMS}, {"cpu_ms", tl.CPUMS, bl.CPUMS}} {
		if f.cli > 0 && f.tool > f.cli {
			t.c.at("/runner/limits/"+f.name, SeverityError, "tool-limits-widen",
				fmt.Sprintf("runner.limits.%s %d is larger than the bundle's %d; a tool may only narrow the bundle's limits", f.name, f.tool, f.cli),
				fmt.Sprintf("use at most %d, or leave it out to inherit the bundle's", f.cli))
		}
	}
}
