package manifest

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"
)

// tenToolBundle is the base bundle with ten tools.
func tenToolBundle() fstest.MapFS {
	fsys := fstest.MapFS{}
	var cmds strings.Builder
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("cmd%d", i)
		fmt.Fprintf(&cmds, "    %s: ./tools/%s/TOOL.md\n", name, name)
		tool := strings.Replace(baseTool, "argv: [item, list,", "argv: [item, "+name+",", 1)
		tool = strings.Replace(tool, "id: demo.item.list", "id: demo.item."+name, 1)
		// every tool has its own inputs and outputs schema, as in a real bundle
		tool = strings.Replace(tool, "    query: { type: string }", fmt.Sprintf("    query: { type: string }\n    %s_opt: { type: boolean }", name), 1)
		tool = strings.Replace(tool, "outputs: { type: array }", fmt.Sprintf("outputs: { type: array, description: %s }", name), 1)
		fsys["demo/tools/"+name+"/TOOL.md"] = &fstest.MapFile{Data: []byte(tool)}
	}
	cli := strings.Replace(baseCLI, "    list: ./tools/item-list/TOOL.md\n", cmds.String(), 1)
	fsys[cliFile] = &fstest.MapFile{Data: []byte(cli)}
	return fsys
}

// BenchmarkLoadBundle10Tools parses, validates and lints one bundle of ten tools, each with its own
// inputs and outputs schema. "cold" empties every cache before every load (a first start); "warm"
// keeps them (a reload of unchanged files); "reparse" keeps all but the parsed files, so every
// load parses the YAML again (a reload after every file changed, schemas and validation unchanged).
func BenchmarkLoadBundle10Tools(b *testing.B) {
	fsys := tenToolBundle()
	if bd := LoadBundle(fsys, cliFile, LoadOptions{}); len(bd.Findings) != 0 || len(bd.Tools) != 10 {
		b.Fatalf("fixture: %d tools, findings:\n%s", len(bd.Tools), findingsText(bd.Findings))
	}
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			ResetSchemaCache()
			LoadBundle(fsys, cliFile, LoadOptions{})
		}
	})
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			LoadBundle(fsys, cliFile, LoadOptions{})
		}
	})
	b.Run("reparse", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			resetParseCache()
			LoadBundle(fsys, cliFile, LoadOptions{})
		}
	})
}

// reportCPU reports the process's CPU time (user and system, every thread, the garbage collector
// included) per operation as cpu-ns/op: on a shared machine it moves less with other processes'
// load than the wall time does. Call the function it returns when the loop is done.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkYAMLFloor10Tools is the baseline for BenchmarkLoadBundle10Tools: it only splits the same
// eleven files and parses their frontmatter into yaml.v3 nodes, with no validation or lint.
func BenchmarkYAMLFloor10Tools(b *testing.B) {
	fsys := tenToolBundle()
	var files [][]byte
	for _, f := range fsys {
		files = append(files, f.Data)
	}
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		for _, data := range files {
			front, _, ok := splitFrontmatter(data)
			if !ok {
				b.Fatal("no frontmatter")
			}
			var n yaml.Node
			if err := yaml.Unmarshal(front, &n); err != nil {
				b.Fatal(err)
			}
		}
	}
}
