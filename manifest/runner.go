package manifest

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/clihost/clihost/container"
	"github.com/clihost/clihost/schemas"
)

// The engines of AIP-17's runner.engine.
const (
	// EngineSubprocess runs the CLI in clihost's kernel sandbox (the default).
	EngineSubprocess = "subprocess"
	// EngineSandbox runs the CLI in an OCI container through podman or docker.
	EngineSandbox = "sandbox"
	// EngineInProcess is refused for CLIs: a CLI is a separate program by nature.
	EngineInProcess = "in-process"
)

// Runner is the AIP-17 runner block: CLI.md's inline runner, or the frontmatter of a RUNNER.md.
type Runner struct {
	Engine string        `yaml:"engine,omitempty" json:"engine,omitempty"`
	Image  string        `yaml:"image,omitempty" json:"image,omitempty"`
	Needs  *RunnerNeeds  `yaml:"needs,omitempty" json:"needs,omitempty"`
	Limits *RunnerLimits `yaml:"limits,omitempty" json:"limits,omitempty"`
}

// RunnerNeeds is AIP-17's runner.needs: what the CLI needs besides itself.
type RunnerNeeds struct {
	Language string   `yaml:"language,omitempty" json:"language,omitempty"`
	Native   []string `yaml:"native,omitempty" json:"native,omitempty"`
	Npm      []string `yaml:"npm,omitempty" json:"npm,omitempty"`
	Pip      []string `yaml:"pip,omitempty" json:"pip,omitempty"`
}

// RunnerRef is the bundle-level AIP-17 runner: a path to a RUNNER.md (a string or {file: path}),
// a registry reference ({ref: id}, which clihost refuses: it has no runner registry), or the block
// inline (bare or as {inline: block}). Load resolves a RUNNER.md into Block.
type RunnerRef struct {
	Ref      string         `json:"ref,omitempty"`      // the RUNNER.md path, relative to the bundle folder
	Registry string         `json:"registry,omitempty"` // {ref: id}
	Inline   map[string]any `json:"inline,omitempty"`
	// Block is the runner block: decoded from the inline form, or from the RUNNER.md once loaded;
	// nil when the RUNNER.md could not be read.
	Block *Runner `json:"block,omitempty"`
	// Limits is Block's limits (nil without them; the schema checks their shape).
	Limits *RunnerLimits `json:"-"`
	// inlineWrapped is set for the {inline: block} form (findings point inside it).
	inlineWrapped bool
}

// UnmarshalYAML accepts a string ref, {file}, {ref}, {inline} or the block itself.
func (r *RunnerRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		r.Ref = n.Value
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return nil // the schema reports the shape
	}
	var forms struct {
		File   string    `yaml:"file"`
		Ref    string    `yaml:"ref"`
		Inline yaml.Node `yaml:"inline"`
	}
	_ = n.Decode(&forms)
	switch {
	case forms.File != "":
		r.Ref = forms.File
		return nil
	case forms.Ref != "":
		r.Registry = forms.Ref
		return nil
	case forms.Inline.Kind != 0:
		n, r.inlineWrapped = &forms.Inline, true
	}
	_ = n.Decode(&r.Inline)
	r.Block = &Runner{}
	_ = n.Decode(r.Block)
	r.Limits = r.Block.Limits
	return nil
}

// Engine returns the engine a bundle's CLI runs under: the runner block's, else subprocess.
func (r *RunnerRef) Engine() string {
	if r == nil || r.Block == nil || r.Block.Engine == "" {
		return EngineSubprocess
	}
	return r.Block.Engine
}

// Image returns the runner block's image ("" without one).
func (r *RunnerRef) Image() string {
	if r == nil || r.Block == nil {
		return ""
	}
	return r.Block.Image
}

// Needs returns the runner block's needs (nil without them).
func (r *RunnerRef) Needs() *RunnerNeeds {
	if r == nil || r.Block == nil {
		return nil
	}
	return r.Block.Needs
}

// debPackage is a Debian package name (Debian Policy 5.6.1), with an optional :arch qualifier. It
// never ends in "-": apt-get install reads a trailing hyphen as "remove this package".
var debPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.\-]*[a-z0-9+.](?::[a-z0-9]+(?:-[a-z0-9]+)*)?$`)

// NativeNeeds returns the needs.native packages an apt install entry of cli installs with its own
// package (AIP-17's names are Debian's): those of an engine: subprocess runner whose names are
// Debian package names (lint refuses others, runner-needs-name); none for engine: sandbox (its
// image holds them).
func NativeNeeds(cli *CLI) []string {
	if cli == nil || cli.Runner.Engine() != EngineSubprocess || cli.Runner.Needs() == nil {
		return nil
	}
	var out []string
	for _, p := range cli.Runner.Needs().Native {
		if debPackage.MatchString(p) {
			out = append(out, p)
		}
	}
	return out
}

// runnerFile is a RUNNER.md as the linter read it: its document, for positions, or its finding.
type runnerFile struct {
	c *collector // the RUNNER.md's findings; nil when it was not read
}

// loadRunnerFile reads and validates the RUNNER.md the bundle's runner refers to, and fills in
// the runner's Block and Limits from it. It runs before the tools load (their limits rules read
// the bundle's limits). Problems reading the file are findings at /runner of CLI.md; problems in
// it are findings of the RUNNER.md, with their positions.
func (l *linter) loadRunnerFile() *runnerFile {
	r := l.cli.Runner
	if r == nil || r.Ref == "" {
		return nil
	}
	ptr := "/runner"
	if l.c.doc.Has("/runner/file") {
		ptr = "/runner/file"
	}
	rel := r.Ref
	if strings.Contains(rel, "://") || path.IsAbs(rel) || !fs.ValidPath(path.Clean(path.Join(path.Dir(l.b.fsPath), rel))) {
		l.c.at(ptr, SeverityError, "runner-file", fmt.Sprintf("runner %q is not a path inside the bundle folder", rel), "write a relative path to a sibling file: runner: ./RUNNER.md")
		return nil
	}
	if !l.outside(l.c, ptr, "runner", rel) {
		return nil
	}
	name := path.Clean(path.Join(path.Dir(l.b.fsPath), rel))
	data, err := readManifest(l.b.fsys, name)
	if err != nil {
		l.c.at(ptr, SeverityError, "runner-file", fmt.Sprintf("runner %q cannot be read: %v", rel, unwrapPathError(err)), "create the RUNNER.md (frontmatter: engine, image, needs, limits) or write the block inline")
		return nil
	}
	doc, problems := loadDocument(l.opts.display(name), data)
	c := newCollector(doc)
	c.semantic = problems
	if doc.Root == nil {
		return &runnerFile{c: c}
	}
	schema, err := schemas.Runner()
	if err != nil {
		panic(err) // the embedded schema is part of the binary; tests guarantee it compiles
	}
	c.schema(schema)
	block := &Runner{}
	doc.decode(block)
	r.Block, r.Limits = block, block.Limits
	return &runnerFile{c: c}
}

// runnerRules checks the runner block: what clihost refuses (in-process, a registry ref, an engine:
// sandbox without an image, or with network egress) and what it ignores (an image without engine:
// sandbox). The findings point into the RUNNER.md when the block came from one.
func (l *linter) runnerRules(rf *runnerFile) {
	r := l.cli.Runner
	if r == nil {
		return
	}
	if r.Registry != "" {
		l.c.at("/runner/ref", SeverityError, "runner-registry-ref", fmt.Sprintf("runner refers to %q in a runner registry; clihost has none", r.Registry),
			"write the block inline (runner: {engine: subprocess, limits: {...}}) or in a sibling RUNNER.md (runner: ./RUNNER.md)")
		return
	}
	if r.Block == nil {
		return
	}
	c, base := l.c, "/runner"
	if rf != nil {
		c, base = rf.c, ""
	} else if r.inlineWrapped {
		base = "/runner/inline"
	}
	b := r.Block
	if c.doc.Has(base + "/image") {
		l.b.RunnerImagePos = c.doc.Pos(base + "/image")
	}
	if c.doc.Has(base + "/needs/native") {
		l.b.RunnerNeedsPos = c.doc.Pos(base + "/needs/native")
	}
	switch b.Engine {
	case EngineInProcess:
		c.at(base+"/engine", SeverityError, "runner-engine-in-process", "engine: in-process is refused for CLIs: a CLI is a program of its own, and clihost never runs a bundle's code inside its own process",
			"remove engine (the default, subprocess, runs the CLI in clihost's kernel sandbox) or use engine: sandbox with an image")
	case EngineSandbox:
		if b.Image == "" {
			c.at(base+"/engine", SeverityError, "runner-sandbox-image", "engine: sandbox needs an image: clihost has no template registry to pick one from needs",
				"name an OCI image present on the host, e.g. image: localhost/jq:1.7 (clihost never pulls it)")
		} else if err := container.ValidImage(b.Image); err != nil {
			c.at(base+"/image", SeverityError, "runner-sandbox-image", err.Error(),
				"name an image in the runtime's store by its reference, e.g. image: localhost/jq:1.7")
		}
		if n := l.cli.Sandbox.Network; n != nil && len(n.Egress) > 0 {
			l.c.at("/sandbox/network/egress", SeverityError, "runner-sandbox-egress", "engine: sandbox runs the container with no network, and clihost cannot filter a container's traffic by host name as network.egress asks",
				"use engine: subprocess (clihost's kernel sandbox filters egress by host) or drop network.egress")
		}
	default:
		if b.Image != "" {
			c.at(base+"/image", SeverityWarning, "runner-image-ignored", fmt.Sprintf("image %q is ignored: only engine: sandbox runs in an image", b.Image), "add engine: sandbox, or remove image")
		}
	}
	if n := b.Needs; n != nil {
		for i, p := range n.Native {
			if !debPackage.MatchString(p) {
				c.at(JoinPointer(base+"/needs/native", i), SeverityError, "runner-needs-name", fmt.Sprintf("needs.native %q is not a Debian package name", p),
					"name the Debian package (lowercase letters, digits, + - .), e.g. libcairo2")
			}
		}
	}
	if n := b.Needs; n != nil && b.Engine == EngineSandbox && (len(n.Native)+len(n.Npm)+len(n.Pip) > 0) {
		c.at(base+"/needs", SeverityWarning, "runner-needs-image", "clihost installs nothing into a container image: the image must already hold what needs lists",
			"build the image with these packages; clihost does not look inside images")
	}
}
