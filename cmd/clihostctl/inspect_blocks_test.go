package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectShowsReferencedBlocks: inspect, which authoring.md calls "what clihost understood",
// shows the AIP blocks a CLI.md refers to: the runner (engine, image, limits, needs), the
// SECRETS.md inventory's variables and whether each is required, and the intents served as
// prompts.
func TestInspectShowsReferencedBlocks(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"kv/CLI.md": `---
name: KV
id: kv
description: A key-value CLI.
version: 1.0.0
bin: jq
install: [{ method: apt, package: jq }]
version_check: { cmd: "jq --version", parse: 'jq-(\d+\.\d+)', range: ">=1" }
runner: ./RUNNER.md
auth: { ref: ./SECRETS.md }
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [] }
commands:
  get: ./tools/get/TOOL.md
intents:
  - { ref: ./intents/read/INTENT.md }
---
`,
		"kv/RUNNER.md":  "---\nengine: subprocess\nneeds: { native: [jq] }\nlimits: { memory_mb: 64, cpu_ms: 1500, timeout_ms: 3000 }\n---\n",
		"kv/SECRETS.md": "---\nsecrets:\n  - { slug: kv-token, name: Token, description: The token. }\n  - { slug: kv-ns, name: NS, description: The namespace., metadata: { required: false } }\n---\n",
		"kv/tools/get/TOOL.md": `---
name: Get
id: kv.get
description: Get a key.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { key: { type: string } } }
outputs: {}
runner: { cli: ../../CLI.md, argv: ["-n", "--arg", "k", "${input.key}", "$k"] }
---
`,
		"kv/intents/read/INTENT.md": "---\nname: Read\nid: read-key\nlabel: Read\ndescription: Read a key.\nversion: 1.0.0\nintent: [read a key]\nsurfaces: [chat]\nimplements: [{ tool: kv.get }]\n---\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCtl(t, "inspect", "kv", "--bundles", dir)
	if code != 0 {
		t.Fatalf("inspect: exit %d %s", code, errOut)
	}
	for _, want := range []string{
		"runner:   engine subprocess (./RUNNER.md); limits memory_mb 64, cpu_ms 1500, timeout_ms 3000; needs.native jq",
		"secrets:  KV_TOKEN (required), KV_NS (optional)",
		"intents:  read-key (MCP prompt)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect does not show %q:\n%s", want, out)
		}
	}
}

// TestCallUnquotedCommandPath: `clihostctl call vault kv get` (a command path not quoted, as an
// author first types it) is a usage error whose message says how to write it.
func TestCallUnquotedCommandPath(t *testing.T) {
	code, _, errOut := runCtl(t, "call", "gh", "pr", "list")
	if code != 2 || !strings.Contains(errOut, `clihostctl call gh "pr list"`) || !strings.Contains(errOut, "pr.list") {
		t.Fatalf("exit %d, stderr %q: want a usage error showing the quoted and the dotted path", code, errOut)
	}
}
