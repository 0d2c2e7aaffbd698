package host

import (
	"context"
	"os/exec"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// BenchmarkCall is host.Call of a trivial tool (validate, expand, spawn /usr/bin/true, parse, audit
// to nowhere); BenchmarkPlainExec, its baseline, is os/exec running the same binary.
func BenchmarkCall(b *testing.B) {
	h, _ := writeBundle(b, fixture.True(), Options{})
	bd, err := h.Bundle("true")
	if err != nil {
		b.Fatal(err)
	}
	ws := fixture.Workspace(b)
	if env := h.Call(context.Background(), bd, "run", nil, Caller{Workspace: ws}, CallOptions{}); !env.OK {
		b.Fatalf("%+v", env.Error)
	}
	for b.Loop() {
		if env := h.Call(context.Background(), bd, "run", map[string]any{}, Caller{Workspace: ws}, CallOptions{}); !env.OK {
			b.Fatalf("%+v", env.Error)
		}
	}
}

func BenchmarkPlainExec(b *testing.B) {
	path, err := exec.LookPath("true")
	if err != nil {
		b.Skip(err)
	}
	ws := fixture.Workspace(b)
	for b.Loop() {
		cmd := exec.Command(path)
		cmd.Dir = ws
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
