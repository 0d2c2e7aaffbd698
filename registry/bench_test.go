package registry

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// generateBundles writes n bundles of ten tools each under dir, in the layout of .cli/<id>/.
func generateBundles(tb testing.TB, dir string, n int) {
	tb.Helper()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("gen%04d", i)
		bdir := filepath.Join(dir, ".cli", id)
		var cmds strings.Builder
		for j := 0; j < 10; j++ {
			name := fmt.Sprintf("cmd%d", j)
			fmt.Fprintf(&cmds, "  %s: ./tools/%s/TOOL.md\n", name, name)
			tool := strings.NewReplacer(
				"id: mini.run", fmt.Sprintf("id: %s.%s", id, name),
				"argv: [run,", fmt.Sprintf("argv: [%s,", name),
				"arg: { type: string }", fmt.Sprintf("arg: { type: string }, opt%d: { type: boolean }", j),
			).Replace(miniTool)
			if err := os.MkdirAll(filepath.Join(bdir, "tools", name), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bdir, "tools", name, "TOOL.md"), []byte(tool), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		cli := strings.NewReplacer("%ID%", id, "%VER%", "1.0.0", "  run: ./tools/run/TOOL.md\n", cmds.String()).Replace(miniCLI)
		if err := os.WriteFile(filepath.Join(bdir, "CLI.md"), []byte(cli), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkLoad1000Bundles loads 1,000 generated bundles of ten tools each from disk and reports the
// live heap they occupy. BenchmarkYAMLFloor1000Bundles, the baseline, only reads the same files and
// parses their frontmatter into yaml.v3 nodes.
func BenchmarkLoad1000Bundles(b *testing.B) {
	dir := b.TempDir()
	generateBundles(b, dir, 1000)
	src, err := DirSource(dir)
	if err != nil {
		b.Fatal(err)
	}
	var heap uint64
	for b.Loop() {
		r, err := Load(src)
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Bundles()) != 1000 || r.AllFindings().HasErrors() {
			b.Fatalf("%d bundles, findings %v", len(r.Bundles()), r.AllFindings())
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapAlloc)
		runtime.KeepAlive(r)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heapMB")
}

func BenchmarkYAMLFloor1000Bundles(b *testing.B) {
	dir := b.TempDir()
	generateBundles(b, dir, 1000)
	for b.Loop() {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			parts := strings.SplitN(string(data), "---\n", 3)
			var n yaml.Node
			return yaml.Unmarshal([]byte(parts[1]), &n)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
