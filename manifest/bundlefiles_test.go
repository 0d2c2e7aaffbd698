package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// diskBundle writes the base bundle (with edits) into a new folder on disk, applies links
// (path inside the bundle → symlink target) and loads it as a registry directory source does.
func diskBundle(t *testing.T, edits []edit, extra map[string]string, links map[string]string) *Bundle {
	t.Helper()
	dir := t.TempDir()
	for name, f := range buildBundle(t, edits, extra) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.RemoveAll(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	onDisk := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	return LoadBundle(os.DirFS(dir), cliFile, LoadOptions{Display: onDisk, OSPath: onDisk})
}

// outsideFile writes a file outside any bundle and returns its path.
func outsideFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func outsideFindings(b *Bundle) Findings {
	var out Findings
	for _, f := range b.Findings {
		if f.Rule == "bundle-file-outside" {
			out = append(out, f)
		}
	}
	return out
}

// TestBundleFilesOutsideRefused: every file a bundle refers to must resolve inside the bundle
// folder; a symlink leading out is a lint error naming the reference and where it leads.
func TestBundleFilesOutsideRefused(t *testing.T) {
	vendored := edit{cliFile, "  - { method: apt", "  - { method: vendored, path: ./bin/demo }\n  - { method: apt"}
	cases := []struct {
		name   string
		edits  []edit
		extra  map[string]string
		links  func(t *testing.T) map[string]string
		line   string // marker of the line the finding points at, in the file named by file
		file   string
		target string // what the message must name
	}{
		{name: "vendored binary is a symlink to /bin/bash", edits: []edit{vendored},
			links: func(*testing.T) map[string]string { return map[string]string{"demo/bin/demo": "/bin/bash"} },
			file:  cliFile, line: "method: vendored", target: "/bin/bash"},
		{name: "TOOL.md is a symlink to a file outside", links: func(t *testing.T) map[string]string {
			return map[string]string{toolFile: outsideFile(t, "TOOL.md", baseTool)}
		}, file: cliFile, line: "list: ./tools/item-list/TOOL.md", target: "TOOL.md"},
		{name: "a folder on the TOOL.md's path is a symlink out", links: func(t *testing.T) map[string]string {
			d := filepath.Dir(outsideFile(t, "x", ""))
			_ = os.MkdirAll(filepath.Join(d, "item-list"), 0o755)
			_ = os.WriteFile(filepath.Join(d, "item-list", "TOOL.md"), []byte(baseTool), 0o644)
			return map[string]string{"demo/tools": d}
		}, file: cliFile, line: "list: ./tools/item-list/TOOL.md", target: "item-list/TOOL.md"},
		{name: "relative symlink climbing out", edits: []edit{vendored},
			links: func(*testing.T) map[string]string {
				return map[string]string{"demo/bin/demo": "../../../../../../../bin/sh"}
			},
			file: cliFile, line: "method: vendored", target: "/usr/bin/"},
		{name: "CLI.md itself is a symlink out", links: func(t *testing.T) map[string]string {
			return map[string]string{cliFile: outsideFile(t, "CLI.md", baseCLI)}
		}, file: cliFile, line: "", target: "CLI.md"},
		{name: "runner.cli leads out through a symlink", edits: []edit{{toolFile, "cli: ../../CLI.md", "cli: ./up/../../../CLI.md"}},
			links: func(t *testing.T) map[string]string {
				d := filepath.Join(t.TempDir(), "a", "b")
				_ = os.MkdirAll(d, 0o755)
				return map[string]string{"demo/tools/item-list/up": d}
			}, file: toolFile, line: "cli: ./up", target: "CLI.md"},
		{name: "auth.ref is a symlink out", edits: []edit{{cliFile, "auth:\n", "auth:\n  ref: ./SECRETS.md\n"}},
			links: func(t *testing.T) map[string]string {
				return map[string]string{"demo/SECRETS.md": outsideFile(t, "SECRETS.md", "x")}
			}, file: cliFile, line: "ref: ./SECRETS.md", target: "SECRETS.md"},
		{name: "an action ref is a symlink out", edits: []edit{{cliFile, "commands:\n", "actions:\n  - { ref: ./intents/x/INTENT.md }\ncommands:\n"}},
			links: func(t *testing.T) map[string]string {
				return map[string]string{"demo/intents/x/INTENT.md": outsideFile(t, "INTENT.md", "x")}
			}, file: cliFile, line: "ref: ./intents", target: "INTENT.md"},
		{name: "a local go package is a symlink out", edits: []edit{{cliFile, "  - { method: apt", "  - { method: go, package: ./cmd/demo }\n  - { method: apt"}},
			links: func(t *testing.T) map[string]string {
				return map[string]string{"demo/cmd/demo": t.TempDir()}
			}, file: cliFile, line: "package: ./cmd/demo", target: "/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := diskBundle(t, tc.edits, tc.extra, tc.links(t))
			fs := outsideFindings(b)
			if len(fs) != 1 || fs[0].Severity != SeverityError || !strings.Contains(fs[0].Message, tc.target) || !strings.Contains(fs[0].Message, "outside the bundle folder") {
				t.Fatalf("want one bundle-file-outside error naming %q, got:\n%s", tc.target, findingsText(b.Findings))
			}
			if !strings.HasSuffix(fs[0].Pos.File, filepath.FromSlash(tc.file)) {
				t.Fatalf("finding in %s, want %s", fs[0].Pos.File, tc.file)
			}
			if tc.line != "" {
				src := baseCLI
				if tc.file == toolFile {
					src = baseTool
				}
				for _, e := range tc.edits {
					if e.file == tc.file {
						src = strings.Replace(src, e.old, e.new, 1)
					}
				}
				if want := lineOf(t, src, tc.line); fs[0].Pos.Line != want {
					t.Fatalf("finding at line %d, want %d: %s", fs[0].Pos.Line, want, fs[0])
				}
			}
			if !b.Findings.HasErrors() {
				t.Fatal("the bundle must not be servable")
			}
		})
	}
}

// TestBundleFilesInsideSymlinksAccepted is the positive control: symlinks inside the bundle that
// point inside it (relative and absolute) load with no finding at all.
func TestBundleFilesInsideSymlinksAccepted(t *testing.T) {
	vendored := edit{cliFile, "  - { method: apt", "  - { method: vendored, path: ./bin/demo }\n  - { method: apt"}
	b := diskBundle(t, []edit{vendored}, map[string]string{
		"demo/libexec/demo":        "#!/bin/sh\n",
		"demo/shared/item-list.md": baseTool,
	}, map[string]string{
		"demo/bin/demo": "../libexec/demo",
		toolFile:        "../../shared/item-list.md",
	})
	if len(b.Findings) != 0 {
		t.Fatalf("in-bundle symlinks: unexpected findings:\n%s", findingsText(b.Findings))
	}
	if len(b.Tools) != 1 || b.Tools[0].Tool == nil || b.Tools[0].Tool.ID != "demo.item.list" {
		t.Fatalf("the tool did not load through its in-bundle symlink: %+v", b.Tools)
	}
}
