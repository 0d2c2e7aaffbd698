package host

import (
	"context"
	"os/exec"
	"testing"
)

const trueBundle = `---
name: "True"
id: "true"
description: Does nothing, successfully.
version: 1.0.0
bin: "true"
install: [{ method: apt, package: coreutils }]
version_check: { cmd: "true --version", parse: 'true \(GNU coreutils\) (\d+\.\d+)', range: ">=8" }
sandbox:
  network: { egress: [] }
  fs: { read: [], write: [] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  run: ./tools/run/TOOL.md
---
`

const trueTool = `---
name: Run
id: true.run
description: Runs true.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { label: { type: string } } }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: ["${input.label | optional('--label')}"] }
---
`

// BenchmarkCall is host.Call of a trivial tool (validate, expand, spawn /usr/bin/true, parse, audit
// to nowhere); BenchmarkPlainExec, its baseline, is os/exec running the same binary.
func BenchmarkCall(b *testing.B) {
	h, _ := writeBundle(b, map[string]string{"true/CLI.md": trueBundle, "true/tools/run/TOOL.md": trueTool}, Options{})
	bd, err := h.Bundle("true")
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
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
	ws := b.TempDir()
	for b.Loop() {
		cmd := exec.Command(path)
		cmd.Dir = ws
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
