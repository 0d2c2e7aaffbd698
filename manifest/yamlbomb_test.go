package manifest

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

// bombYAML is the classic billion laughs: nine levels of nine aliases, 9^9 copies of "lol" once
// expanded, from well under a kilobyte of YAML.
func bombYAML() string {
	var b strings.Builder
	b.WriteString("l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i <= 8; i++ {
		p := "*l" + string(rune('0'+i-1))
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(p+",", 8) + p + "]\n")
	}
	return b.String()
}

// allocatedBy reports the bytes allocated while f runs.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxBombAlloc is far above what parsing a kilobyte of YAML takes and far below an expansion.
const maxBombAlloc = 16 << 20

// TestYAMLBombCLIRefused loads a bundle whose CLI.md is a billion laughs: one yaml-alias error at
// the first anchor, and parsing stays within a few megabytes.
func TestYAMLBombCLIRefused(t *testing.T) {
	cli := "---\nid: bomb\nversion: 1.0.0\n" + bombYAML() + "---\nBody.\n"
	fsys := fstest.MapFS{cliFile: &fstest.MapFile{Data: []byte(cli)}}
	var b *Bundle
	if n := allocatedBy(func() { b = LoadBundle(fsys, cliFile, LoadOptions{}) }); n > maxBombAlloc {
		t.Fatalf("loading the bomb allocated %d bytes", n)
	}
	assertAliasRefused(t, b.Findings, cliFile, 4)
	if b.CLI != nil {
		t.Fatalf("the bomb decoded into %+v", b.CLI)
	}
}

// TestYAMLBombToolRefused loads a valid CLI.md whose one TOOL.md is a billion laughs.
func TestYAMLBombToolRefused(t *testing.T) {
	fsys := buildBundle(t, nil, nil)
	var toolFile string
	for k := range fsys {
		if strings.HasSuffix(k, "TOOL.md") {
			toolFile = k
			break
		}
	}
	fsys[toolFile] = &fstest.MapFile{Data: []byte("---\nid: bomb\n" + bombYAML() + "---\n")}
	var b *Bundle
	if n := allocatedBy(func() { b = LoadBundle(fsys, cliFile, LoadOptions{}) }); n > maxBombAlloc {
		t.Fatalf("loading the bomb allocated %d bytes", n)
	}
	var own Findings
	for _, f := range b.Findings {
		if f.Pos.File == toolFile {
			own = append(own, f)
		}
	}
	assertAliasRefused(t, own, toolFile, 3)
}

func assertAliasRefused(t *testing.T, fs Findings, file string, line int) {
	t.Helper()
	if len(fs) != 1 || fs[0].Rule != "yaml-alias" || fs[0].Severity != SeverityError || fs[0].Pos.File != file || fs[0].Pos.Line != line {
		t.Fatalf("findings %+v, want one yaml-alias error at %s:%d", fs, file, line)
	}
	if !strings.Contains(fs[0].Message, "&l0") {
		t.Fatalf("message %q does not name the anchor", fs[0].Message)
	}
}

// TestYAMLAliasForms refuses every way YAML shares a node, one alone at a time: an anchor with no
// alias, a merge key, an alias of a scalar. A document with none loads (the positive control).
func TestYAMLAliasForms(t *testing.T) {
	for name, c := range map[string]struct {
		yaml string
		line int
	}{
		"anchor only": {"x: &a 1\n", 2},
		"merge key":   {"x: &a {k: 1}\ny:\n  <<: *a\n", 2},
		"alias":       {"x: !!str &a v\ny: *a\n", 2},
	} {
		doc, fs := ParseDocument("CLI.md", []byte("---\n"+c.yaml+"---\n"))
		if doc.Root != nil || len(fs) == 0 || fs[0].Rule != "yaml-alias" || fs[0].Pos.Line != c.line {
			t.Errorf("%s: root %v, findings %+v", name, doc.Root != nil, fs)
		}
	}
	if doc, fs := ParseDocument("CLI.md", []byte("---\nx: '&a *b'\ny: \"*a\"\n---\n")); doc.Root == nil || len(fs) != 0 {
		t.Fatalf("quoted & and * refused: %+v", fs)
	}
}

// TestOversizedFileNotRead hands LoadBundle a CLI.md far larger than MaxFileSize: it is refused
// after reading at most MaxFileSize+1 bytes.
func TestOversizedFileNotRead(t *testing.T) {
	data := []byte("---\nid: big\n---\n" + strings.Repeat("x", 64<<20))
	fsys := fstest.MapFS{cliFile: &fstest.MapFile{Data: data}}
	var b *Bundle
	// Reading the whole file would allocate at least its 64 MiB; the bound leaves room for what
	// other goroutines of the test binary allocate meanwhile (TotalAlloc is process-wide).
	if n := allocatedBy(func() { b = LoadBundle(fsys, cliFile, LoadOptions{}) }); n > 16*MaxFileSize {
		t.Fatalf("refusing a %d-byte file allocated %d bytes", len(data), n)
	}
	if len(b.Findings) != 1 || b.Findings[0].Rule != "file-too-large" {
		t.Fatalf("findings %+v", b.Findings)
	}
}

// TestFIFOManifestNotOpened makes a bundle's TOOL.md a FIFO nobody writes to: lint reports it as
// unreadable instead of waiting in open(2) forever.
func TestFIFOManifestNotOpened(t *testing.T) {
	dir := t.TempDir()
	for name, f := range buildBundle(t, nil, nil) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "TOOL.md") {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan *Bundle, 1)
	go func() { done <- LoadBundle(os.DirFS(dir), cliFile, LoadOptions{}) }()
	select {
	case b := <-done:
		if len(b.Findings) == 0 || b.Findings[0].Rule != "commands-ref-missing" || !strings.Contains(b.Findings[0].Message, "not a regular file") {
			t.Fatalf("findings %+v", b.Findings)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("LoadBundle still blocked on the FIFO after 30s")
	}
}
