package host

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// catBundle runs GNU cat: one argv tool fed by runner.stdin and multi-step tools.
var catBundle = map[string]string{
	"cat/CLI.md": `---
name: cat
id: cat
description: Concatenates its stdin.
version: 1.0.0
bin: cat
install: [{ method: apt, package: coreutils }]
version_check: { cmd: "cat --version", parse: 'cat \(GNU coreutils\) (\d+\.\d+)', range: "" }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: true, spawn: [printf] }
  env: { pass: [] }
commands:
  read: ./tools/read/TOOL.md
  chain: ./tools/chain/TOOL.md
---
`,
	"cat/tools/read/TOOL.md": `---
name: Read
id: cat.read
description: Returns the text given on stdin.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { text: { type: string } } }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [], stdin: "${input.text}" }
---
`,
	"cat/tools/chain/TOOL.md": `---
name: Chain
id: cat.chain
description: printf, then cat of the first step's output on stdin, with an env and a JSON result.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { text: { type: string } }, required: [text] }
outputs: { type: object, required: [got] }
runner:
  cli: ../../CLI.md
  steps:
    - { bin: printf, argv: ["%s", "${input.text}"], append_to_final_output: false }
    - { argv: [], stdin: "{\"got\": \"${steps.0.output}\"}" }
---
`,
}

func TestStdinAndSteps(t *testing.T) {
	fixture.Need(t, "cat", "printf")
	h, _ := writeBundle(t, catBundle, Options{})
	b := bundle(t, h, "cat")
	ws := fixture.Workspace(t)
	call := func(tool string, input map[string]any) Envelope {
		return h.Call(context.Background(), b, tool, input, Caller{Workspace: ws}, CallOptions{})
	}
	if env := call("read", map[string]any{"text": "line 1\n$(id) | ;\n"}); !env.OK || env.Value != "line 1\n$(id) | ;\n" {
		t.Errorf("read: %+v", env)
	}
	if env := call("read", nil); !env.OK || env.Value != "" { // no input: stdin is /dev/null
		t.Errorf("read without input: %+v", env)
	}
	env := call("chain", map[string]any{"text": "a b"})
	if raw, _ := json.Marshal(env.Value); !env.OK || string(raw) != `{"got":"a b"}` {
		t.Errorf("chain: %+v", env)
	}
}
