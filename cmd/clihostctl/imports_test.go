package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestStartsNoSandboxItself: clihostctl starts sandboxed processes only through runner.Run (issue
// 13 §2): none of its files imports sandbox/nsinit or sandbox/egress; only nsinit/entry, which
// makes this executable the sandbox's init.
func TestStartsNoSandboxItself(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]bool{
		"github.com/clihost/clihost/sandbox/nsinit": true,
		"github.com/clihost/clihost/sandbox/egress": true,
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); forbidden[p] {
				t.Errorf("%s imports %s: start the process with runner.Run", f, p)
			}
		}
	}
}
