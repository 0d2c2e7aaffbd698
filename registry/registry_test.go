package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const miniCLI = `---
name: Mini
id: %ID%
description: A minimal bundle.
version: %VER%
bin: mini
install:
  - { method: apt, package: mini }
version_check: { cmd: "mini --version", parse: 'mini (\S+)', range: ">=1" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [HOME] }
commands:
  run: ./tools/run/TOOL.md
---
`

const miniTool = `---
name: Run
id: mini.run
description: Runs mini.
version: 1.0.0
inputs: { type: object, properties: { arg: { type: string } }, required: [arg], additionalProperties: false }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [run, "--", "${input.arg}"] }
---
`

// writeBundle writes a minimal bundle with the given id and version into dir.
func writeBundle(t *testing.T, dir, id, ver string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "tools", "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	cli := strings.NewReplacer("%ID%", id, "%VER%", ver).Replace(miniCLI)
	if err := os.WriteFile(filepath.Join(dir, "CLI.md"), []byte(cli), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools", "run", "TOOL.md"), []byte(miniTool), 0o644); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, dirs ...string) *Registry {
	t.Helper()
	var srcs []Source
	for _, d := range dirs {
		s, err := DirSource(d)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	r, err := Load(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDiscoverAtAnyDepth(t *testing.T) {
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, ".cli", "alpha"), "alpha", "1.0.0")
	writeBundle(t, filepath.Join(root, ".cli", "cloud", "deep", "beta"), "beta", "2.1.0")
	writeBundle(t, filepath.Join(root, "node_modules", "x", ".cli", "gamma"), "gamma", "1.0.0")
	writeBundle(t, filepath.Join(root, ".git", "delta"), "delta", "1.0.0")
	r := load(t, root)
	var keys []string
	for _, b := range r.Bundles() {
		keys = append(keys, b.Key())
		if len(b.Findings) != 0 {
			t.Errorf("%s: unexpected findings %v", b.File, b.Findings)
		}
	}
	if got := strings.Join(keys, " "); got != "alpha@1 beta@2" {
		t.Fatalf("bundles = %q, want alpha@1 beta@2", got)
	}
	if b, err := r.Get("beta"); err != nil || b.Key() != "beta@2" {
		t.Fatalf("Get(beta) = %v, %v", b, err)
	}
	if _, err := r.Get("beta@1"); err == nil || !strings.Contains(err.Error(), "alpha@1, beta@2") {
		t.Fatalf("Get(beta@1) error = %v, want it to list the loaded bundles", err)
	}
}

func TestBundleFolderAndFileSources(t *testing.T) {
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, "alpha"), "alpha", "1.0.0")
	for _, p := range []string{filepath.Join(root, "alpha"), filepath.Join(root, "alpha", "CLI.md")} {
		r := load(t, p)
		if len(r.Bundles()) != 1 || r.Bundles()[0].File != filepath.Join(root, "alpha", "CLI.md") {
			t.Fatalf("source %s: %d bundles, file %q", p, len(r.Bundles()), r.Bundles()[0].File)
		}
	}
	if _, err := DirSource(filepath.Join(root, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestDuplicateIDNamesBothPaths(t *testing.T) {
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, "a", "mini"), "mini", "1.0.0")
	writeBundle(t, filepath.Join(root, "b", "mini"), "mini", "1.4.0")
	writeBundle(t, filepath.Join(root, "c", "mini"), "mini", "2.0.0") // another major: distinct
	r := load(t, root)
	if len(r.Bundles()) != 2 {
		t.Fatalf("want mini@1 and mini@2, got %d bundles", len(r.Bundles()))
	}
	if len(r.Findings) != 1 {
		t.Fatalf("want one registry finding, got %v", r.Findings)
	}
	f := r.Findings[0]
	first, second := filepath.Join(root, "a", "mini", "CLI.md"), filepath.Join(root, "b", "mini", "CLI.md")
	if f.Rule != "registry-duplicate-id" || f.Pos.File != second || f.Pos.Line != 3 || !strings.Contains(f.Message, first) {
		t.Fatalf("finding = %v, want registry-duplicate-id at %s:3 naming %s", f, second, first)
	}
	if !r.AllFindings().HasErrors() {
		t.Fatal("AllFindings lost the registry finding")
	}
}

func TestDirectoryBundleShadowsEmbedded(t *testing.T) {
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, "jq"), "jq", "1.0.0")
	src, err := DirSource(root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Load(src, EmbeddedSource())
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Get("jq@1")
	if err != nil {
		t.Fatal(err)
	}
	if b.File != filepath.Join(root, "jq", "CLI.md") {
		t.Fatalf("jq@1 came from %s, want the directory bundle", b.File)
	}
	if len(r.Findings) != 0 {
		t.Fatalf("shadowing is not an error: %v", r.Findings)
	}
	if gh, err := r.Get("gh"); err != nil || !strings.HasPrefix(gh.File, "embedded:") {
		t.Fatalf("embedded gh missing: %v %v", gh, err)
	}
}

func TestDefaultSources(t *testing.T) {
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, "env1", "mini"), "mini", "1.0.0")
	writeBundle(t, filepath.Join(root, "work", ".cli", "local"), "local", "1.0.0")
	t.Chdir(filepath.Join(root, "work"))

	t.Setenv(EnvBundles, "")
	srcs, err := DefaultSources(nil)
	if err != nil || len(srcs) != 2 || srcs[0].Name != LocalDir || !srcs[1].Embedded {
		t.Fatalf("defaults = %+v, %v; want ./.cli then embedded", srcs, err)
	}
	// The relative ./.cli is shown as given, but its bundles' folders on disk are absolute (a
	// vendored binary is run by absolute path).
	reg, err := Load(srcs[0])
	if err != nil {
		t.Fatal(err)
	}
	local, err := reg.Get("local")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs(filepath.Join(LocalDir, "local")); local.OSDir != want {
		t.Errorf("OSDir = %q, want %q", local.OSDir, want)
	}
	if want := filepath.Join(LocalDir, "local", "CLI.md"); local.File != want {
		t.Errorf("File = %q, want %q (as given)", local.File, want)
	}
	t.Setenv(EnvBundles, filepath.Join(root, "env1")+string(os.PathListSeparator)+filepath.Join(root, "work", ".cli"))
	srcs, err = DefaultSources(nil)
	if err != nil || len(srcs) != 2 || srcs[0].Name != filepath.Join(root, "env1") {
		t.Fatalf("env sources = %+v, %v", srcs, err)
	}
	srcs, err = DefaultSources([]string{filepath.Join(root, "env1")})
	if err != nil || len(srcs) != 1 {
		t.Fatalf("flag sources = %+v, %v", srcs, err)
	}
}

func TestEmbeddedCatalogLoads(t *testing.T) {
	r, err := Load(EmbeddedSource())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Bundles()) < 10 {
		t.Fatalf("embedded catalog has %d bundles, want at least 10", len(r.Bundles()))
	}
	for _, f := range r.AllFindings() {
		t.Errorf("%s", f)
	}
}

// TestDaemonSources: a daemon's folders add to the built-in catalog (--no-catalog leaves it out),
// a missing folder is a warning naming it, not a failure, and an empty folder is named by
// EmptySources.
func TestDaemonSources(t *testing.T) {
	root := t.TempDir()
	writeBundle(t, filepath.Join(root, "ops", "mini"), "mini", "1.0.0")
	empty, missing := filepath.Join(root, "empty"), filepath.Join(root, "missing")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	t.Setenv(EnvBundles, "")

	srcs, warns, err := DaemonSources([]string{filepath.Join(root, "ops"), empty, missing}, true)
	if err != nil || len(srcs) != 3 || !srcs[2].Embedded {
		t.Fatalf("sources = %+v, %v; want ops, empty, then the catalog", srcs, err)
	}
	want := "bundle folder " + missing + " does not exist: no bundles loaded from it"
	if len(warns) != 1 || warns[0] != want {
		t.Fatalf("warnings = %q, want [%q]", warns, want)
	}
	reg, err := Load(srcs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Get("mini"); err != nil {
		t.Fatalf("the folder's bundle: %v", err)
	}
	if _, err := reg.Get("gh"); err != nil {
		t.Fatalf("the catalog's gh is not served beside the folder: %v", err)
	}
	if warns, got := EmptySources(reg, srcs); len(warns) != 0 || len(got) != 1 || got[0] != empty {
		t.Fatalf("EmptySources = %q, %q; want no warning and the empty folder %s", warns, got, empty)
	}
	// A folder with something in it but no bundle (a CLI.md one level too deep) is a warning.
	if err := os.MkdirAll(filepath.Join(empty, "nested", "gh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if warns, got := EmptySources(reg, srcs); len(warns) != 1 || warns[0] != "bundle folder "+empty+" holds no bundles (no CLI.md found)" || len(got) != 0 {
		t.Fatalf("EmptySources = %q, %q; want the folder without bundles as a warning", warns, got)
	}
	if got := SourceNames(srcs); len(got) != 3 || got[2] != "the built-in catalog" {
		t.Fatalf("SourceNames = %q", got)
	}

	srcs, _, err = DaemonSources([]string{empty}, false)
	if err != nil || len(srcs) != 1 || srcs[0].Embedded {
		t.Fatalf("--no-catalog sources = %+v, %v; want the folder only", srcs, err)
	}
	t.Setenv(EnvBundles, filepath.Join(root, "ops"))
	srcs, _, err = DaemonSources(nil, true)
	if err != nil || len(srcs) != 2 || srcs[0].Name != filepath.Join(root, "ops") || !srcs[1].Embedded {
		t.Fatalf("$CLIHOST_BUNDLES sources = %+v, %v; want its folder plus the catalog", srcs, err)
	}
}
