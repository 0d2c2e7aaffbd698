package acli

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

var (
	catalogOnce sync.Once
	catalog     *registry.Registry
	catalogErr  error
)

// shipped returns a bundle of the embedded catalog (gh, git, …).
func shipped(t testing.TB, name string) *manifest.Bundle {
	t.Helper()
	catalogOnce.Do(func() { catalog, catalogErr = registry.Load(registry.EmbeddedSource()) })
	if catalogErr != nil {
		t.Fatal(catalogErr)
	}
	b, err := catalog.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const kitCLI = `---
name: Kit
id: kit
description: A bundle with one input of every kind.
version: 2.3.4
bin: kit
install:
  - { method: apt, package: kit }
version_check: { cmd: "kit --version", parse: 'kit (\S+)', range: ">=1" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [HOME] }
commands:
  run: ./tools/run/TOOL.md
  files:
    copy: ./tools/copy/TOOL.md
    cat: ./tools/cat/TOOL.md
  grp:
    sub:
      deep: ./tools/deep/TOOL.md
    two: ./tools/two/TOOL.md
  broken: ./tools/broken/TOOL.md
---
`

var kitTools = map[string]string{
	"run": `inputs:
  type: object
  additionalProperties: false
  properties:
    name: { type: string, description: "A name." }
    count: { type: integer, x-short: n, default: 1 }
    ratio: { type: number }
    verbose: { type: boolean, x-short: v }
    force: { type: boolean, x-short: "-f" }
    dry_run: { type: boolean }
    cache: { type: boolean }
    no_cache: { type: boolean }
    tags: { type: array, items: { type: string } }
    ids: { type: array, items: { type: integer } }
    pairs: { type: array, items: { type: object } }
    level: { type: string, enum: [debug, info, warn] }
    since: { type: string, format: date-time }
    day: { type: string, format: date }
    meta: { type: object }
    mode: { enum: [1, 2, 3] }
    label: { type: string, x-short: l }
    opt_in: { type: [boolean, "null"] }
    toggle: { enum: [true, false] }
    nums: { items: { type: integer } }
    obj: { properties: { a: { type: string } } }
    x_y-z: { type: string }
    anything: true
  required: []
examples:
  - { name: all, input: { name: "it's a test", count: -5, ratio: 0.5, verbose: true, dry_run: false, tags: [a, b], level: info, meta: { k: [1, "x,y"] } } }
  - { name: dash, input: { name: "--weird", label: "-h" } }
  - { name: comma, input: { tags: ["a,b"] } }
  - { name: empty, input: { tags: [], name: "" } }
  - { name: unknown, input: { nope: 1 } }`,
	"copy": `inputs:
  type: object
  properties:
    src: { type: string, format: path }
    dst: { type: string, format: path }
    also: { type: array, items: { type: string, format: path } }
    recursive: { type: boolean }
  required: [src, dst]`,
	"cat": `inputs:
  type: object
  properties:
    files: { type: array, items: { type: string, format: path } }
    number: { type: boolean }
    help: { type: string }
    h: { type: boolean, x-short: h }
  required: [files]`,
	"deep": `inputs:
  type: object
  properties:
    a: { type: integer }
    b: { type: string }
    first: { type: array, items: { type: string } }
  required: [a, b, first]`,
	"two": `inputs:
  type: object
  properties:
    x: { type: array, items: { type: string } }
    y: { type: array, items: { type: string } }
  required: []`,
}

// kit writes the kit bundle into a temporary directory and loads it.
func kit(t testing.TB) *manifest.Bundle {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("CLI.md", kitCLI)
	for name, inputs := range kitTools {
		write("tools/"+name+"/TOOL.md", "---\nname: Kit "+name+"\nid: kit."+name+"\ndescription: The "+name+" tool.\nversion: 1.0.0\n"+
			inputs+"\noutputs: { type: string }\nrunner: { cli: ../../CLI.md, argv: ["+name+"] }\n---\n")
	}
	write("tools/broken/TOOL.md", "---\nname: [unclosed\n---\n")
	return manifest.LoadBundle(os.DirFS(dir), "CLI.md", manifest.LoadOptions{})
}

func TestKitLoads(t *testing.T) {
	for _, e := range kit(t).Tools {
		if (e.Tool == nil) != (e.CommandPath() == "broken") {
			t.Errorf("%s: loaded = %v", e.CommandPath(), e.Tool != nil)
		}
	}
}
