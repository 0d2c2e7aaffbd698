package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
)

// vendTool is the tool of the vendored-binary bundle: it runs the binary with the argument "say".
const vendTool = `---
name: Say
id: vend.say
description: Says where it runs from.
version: 1.0.0
inputs: { type: object, properties: {} }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [say] }
---
`

// TestVendoredBinarySwappedAfterLoad: a bundle whose vendored binary (a script standing in for
// echo) passed the bundle-file-outside check at load, and is then replaced by a symlink to the
// system's echo, outside the bundle folder: the next call is refused (not_installed, "leads
// outside the folder") and echo never runs (it would print the tool's argument, "say"), with the
// sandbox on and off. (With the sandbox on, today's exec of the link path inside the sandbox
// fails anyway, the bundle folder being hidden there; with it off, echo ran.) Positive control:
// the vendored binary runs before the swap.
func TestVendoredBinarySwappedAfterLoad(t *testing.T) {
	fixture.Need(t, "sh", "echo")
	outside, err := exec.LookPath("echo")
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "sandbox on", true: "sandbox off"}[off], func(t *testing.T) {
			ws := fixture.Workspace(t)
			dir := filepath.Join(ws, "bundles")
			cli := strings.Replace(fixture.CLI("echo", "vend", "  say: ./tools/say/TOOL.md\n"),
				"install: [{ method: apt, package: coreutils }]", "install: [{ method: vendored, path: ./bin/vend }]", 1)
			vendored := filepath.Join(dir, "vend", "bin", "vend")
			for p, content := range map[string]string{
				filepath.Join(dir, "vend", "CLI.md"):                  cli,
				filepath.Join(dir, "vend", "tools", "say", "TOOL.md"): vendTool,
				vendored: "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'echo (GNU coreutils) 9.1'; exit 0; fi\necho INSIDE\n",
			} {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			reg := fixture.Load(t, dir)
			if f := reg.AllFindings(); len(f) != 0 {
				t.Fatalf("findings: %v", f)
			}
			h := host.New(reg, host.Options{Sandbox: host.SandboxOptions{Off: off}})
			b, err := h.Bundle("vend")
			if err != nil {
				t.Fatal(err)
			}
			call := func() (host.Envelope, string) {
				env := h.Call(context.Background(), b, "say", map[string]any{}, host.Caller{Workspace: ws}, host.CallOptions{})
				raw, _ := json.Marshal(env)
				return env, string(raw)
			}
			if env, raw := call(); !env.OK || !strings.Contains(raw, "INSIDE") {
				t.Fatalf("before the swap: %s", raw)
			}

			if err := os.Remove(vendored); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, vendored); err != nil {
				t.Fatal(err)
			}
			env, raw := call()
			if env.OK || strings.Contains(raw, `"say`) {
				t.Fatalf("%s, outside the bundle, ran: %s", outside, raw)
			}
			if env.Error == nil || env.Error.Code != "not_installed" || !strings.Contains(env.Error.Message, "leads outside the folder") {
				t.Fatalf("after the swap: %s; want not_installed saying it leads outside the folder", raw)
			}
		})
	}
}
