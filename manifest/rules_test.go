package manifest

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
)

// baseCLI and baseTool form a bundle that lints clean; each case below changes it to trigger one
// rule and names the line the finding must point at.
const baseCLI = `---
name: Demo CLI
id: demo
description: A demo CLI used by the lint tests.
version: 1.2.0
bin: demo
install:
  - { method: apt, package: demo }
  - { method: download, url: "https://example.com/demo.tar.gz", extract_bin: demo, verify_sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" }
version_check:
  cmd: "demo --version"
  parse: 'demo (\d+\.\d+\.\d+)'
  range: ">=1.0 <2"
setup:
  - id: token
    kind: prompt
    type: secret
    prompt: "API token"
    persist: { secret_slug: demo/token }
auth:
  login:
    cmd: "demo login"
    interactive: true
    completes_when: { cmd: "demo whoami", exit_code: 0 }
  refresh: { cmd: "demo refresh", every: "PT24H" }
  expiry: { detect: "exit_code:4" }
sandbox:
  network: { egress: [api.example.com, "*.cdn.example.com"] }
  fs:
    read: ["./**", "~/.config/demo/**"]
    write: ["~/.config/demo/**", "./out/**"]
    deny: ["~/.ssh/**", "**/.env"]
  exec: { allow: false }
  env: { pass: [HOME, DEMO_TOKEN], set: { DEMO_COLOR: "0" } }
output:
  default_format: text
  json_flag: "--json"
  exit_codes: { 0: ok, 1: error, 4: auth_required }
commands:
  item:
    list: ./tools/item-list/TOOL.md
---
# Demo
`

const baseTool = `---
name: List items
id: demo.item.list
description: List items.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties:
    state: { type: string, enum: [open, closed] }
    limit: { type: integer, minimum: 1 }
    query: { type: string }
  required: [query]
outputs: { type: array }
risk_level: 0
examples:
  - { name: open items, input: { state: open, query: x } }
runner:
  cli: ../../CLI.md
  argv: [item, list, "${input.state | optional('--state')}", "${input.limit | optional('--limit')}", "--", "${input.query}"]
  output: { format: json }
sandbox:
  fs: { write: [] }
---
Lists items.
`

const (
	cliFile  = "demo/CLI.md"
	toolFile = "demo/tools/item-list/TOOL.md"
)

type edit struct {
	file     string // cliFile or toolFile
	old, new string
}

func buildBundle(t testing.TB, edits []edit, extra map[string]string) fstest.MapFS {
	t.Helper()
	files := map[string]string{cliFile: baseCLI, toolFile: baseTool}
	for _, e := range edits {
		if !strings.Contains(files[e.file], e.old) {
			t.Fatalf("edit: %q not found in %s", e.old, e.file)
		}
		files[e.file] = strings.Replace(files[e.file], e.old, e.new, 1)
	}
	for k, v := range extra {
		files[k] = v
	}
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return m
}

func lineOf(t *testing.T, text, marker string) int {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("marker %q not in file", marker)
	}
	return strings.Count(text[:i], "\n") + 1
}

func TestBaseBundleIsClean(t *testing.T) {
	b := LoadBundle(buildBundle(t, nil, nil), cliFile, LoadOptions{})
	if len(b.Findings) != 0 {
		t.Fatalf("base bundle has findings:\n%s", findingsText(b.Findings))
	}
	if b.Key() != "demo@1" || len(b.Tools) != 1 || b.Tools[0].Tool.ID != "demo.item.list" {
		t.Fatalf("unexpected model: key %s, tools %d", b.Key(), len(b.Tools))
	}
}

func findingsText(fs Findings) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, "\n")
}

func TestRulePositions(t *testing.T) {
	cases := []struct {
		rule     string
		severity Severity
		edits    []edit
		extra    map[string]string
		file     string // where the finding must be
		marker   string // text on the line the finding must point at (in the edited file)
	}{
		{"cli-id", SeverityError, []edit{{cliFile, "id: demo\n", "id: Demo_X\n"}}, nil, cliFile, "id: Demo_X"},
		{"cli-id-folder", SeverityWarning, []edit{{cliFile, "id: demo\n", "id: demo-two\n"}}, nil, cliFile, "id: demo-two"},
		{"cli-version", SeverityError, []edit{{cliFile, "version: 1.2.0", `version: "1.2"`}}, nil, cliFile, `version: "1.2"`},
		{"cli-bin", SeverityError, []edit{{cliFile, "bin: demo", `bin: "demo --x"`}}, nil, cliFile, `bin: "demo --x"`},
		{"install-unknown-method", SeverityWarning, []edit{{cliFile, "  - { method: apt", "  - { method: nix, package: demo }\n  - { method: apt"}}, nil, cliFile, "method: nix"},
		{"install-experimental", SeverityWarning, []edit{{cliFile, "{ method: apt, package: demo }", "{ method: apt, package: demo, experimental: true }"}}, nil, cliFile, "experimental: true"},
		{"install-sha256", SeverityError, []edit{{cliFile, `"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`, `"abc123"`}}, nil, cliFile, `"abc123"`},
		{"install-no-checksum", SeverityWarning, []edit{{cliFile, `, verify_sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`, ""}}, nil, cliFile, "method: download"},
		{"install-vendored-missing", SeverityError, []edit{{cliFile, "  - { method: apt", "  - { method: vendored, path: ./bin/demo }\n  - { method: apt"}}, nil, cliFile, "path: ./bin/demo"},
		{"install-vendored-path", SeverityError, []edit{{cliFile, "  - { method: apt", "  - { method: vendored, path: ../bin/demo }\n  - { method: apt"}}, nil, cliFile, "path: ../bin/demo"},
		{"version-regex", SeverityError, []edit{{cliFile, `parse: 'demo (\d+\.\d+\.\d+)'`, `parse: 'demo ((\d+)'`}}, nil, cliFile, `parse: 'demo ((`},
		{"version-regex-group", SeverityError, []edit{{cliFile, `parse: 'demo (\d+\.\d+\.\d+)'`, `parse: 'demo \d+'`}}, nil, cliFile, `parse: 'demo \d+'`},
		{"version-range", SeverityError, []edit{{cliFile, `range: ">=1.0 <2"`, `range: ">=1.0, <2"`}}, nil, cliFile, `range: ">=1.0, <2"`},
		{"version-range", SeverityError, []edit{{cliFile, `range: ">=1.0 <2"`, `range: "newest"`}}, nil, cliFile, `range: "newest"`},
		{"version-cmd-bin", SeverityWarning, []edit{{cliFile, `cmd: "demo --version"`, `cmd: "other --version"`}}, nil, cliFile, `cmd: "other --version"`},
		{"setup-step-id-duplicate", SeverityError, []edit{{cliFile, "setup:\n", "setup:\n  - { id: token, kind: cmd, cmd: \"demo init\" }\n"}}, nil, cliFile, "  - id: token"},
		{"setup-persist", SeverityError, []edit{{cliFile, "persist: { secret_slug: demo/token }", "persist: { secret_slug: demo/token, env: DEMO_TOKEN }"}}, nil, cliFile, "    persist:"},
		{"setup-value-placement", SeverityError, []edit{{cliFile, "setup:\n", "setup:\n  - { id: init, kind: cmd, cmd: \"demo init ${value}\" }\n"}}, nil, cliFile, "demo init ${value}"},
		{"setup-oauth-flow", SeverityWarning, []edit{{cliFile, "setup:\n", "setup:\n  - { id: gh, kind: oauth, secret_slug: demo/gh }\n"}}, nil, cliFile, "id: gh, kind: oauth"},
		{"setup-oauth-flow", SeverityError, []edit{{cliFile, "setup:\n", "setup:\n  - { id: gh, kind: oauth, secret_slug: demo/gh, oauth: { client_id: c, authorization_url: \"https://a.example/auth\", token_url: \"http://auth.example.com/token\" } }\n"}}, nil, cliFile, "id: gh, kind: oauth"},
		{"setup-oauth-flow", SeverityError, []edit{{cliFile, "setup:\n", "setup:\n  - { id: gh, kind: oauth, secret_slug: demo/gh, oauth: { client_id: c, authorization_url: \"https://a.example/auth?redirect_uri=https://evil.example/\", token_url: \"https://a.example/token\" } }\n"}}, nil, cliFile, "id: gh, kind: oauth"},
		{"auth-every", SeverityError, []edit{{cliFile, `every: "PT24H"`, `every: "PT"`}}, nil, cliFile, `every: "PT"`},
		{"auth-every", SeverityError, []edit{{cliFile, `every: "PT24H"`, `every: "24h"`}}, nil, cliFile, `every: "24h"`},
		{"auth-expiry-detect", SeverityError, []edit{{cliFile, `detect: "exit_code:4"`, `detect: "exit 4"`}}, nil, cliFile, `detect: "exit 4"`},
		{"output-exit-code-key", SeverityError, []edit{{cliFile, "{ 0: ok, 1: error, 4: auth_required }", "{ 0: ok, one: error }"}}, nil, cliFile, "one: error"},
		{"output-exit-code-name", SeverityError, []edit{{cliFile, "{ 0: ok, 1: error, 4: auth_required }", "{ 0: ok, 1: Bad-Thing }"}}, nil, cliFile, "1: Bad-Thing"},
		{"sandbox-glob", SeverityError, []edit{{cliFile, `deny: ["~/.ssh/**", "**/.env"]`, `deny: ["~/.ssh/**", "~bob/.env"]`}}, nil, cliFile, `"~bob/.env"`},
		{"sandbox-glob", SeverityError, []edit{{cliFile, `read: ["./**", "~/.config/demo/**"]`, `read: ["./**", "../up/**"]`}}, nil, cliFile, `"../up/**"`},
		{"sandbox-glob-unenforceable", SeverityError, []edit{{cliFile, `read: ["./**", "~/.config/demo/**"]`, `read: ["**/.git/**"]`}}, nil, cliFile, `read: ["**/.git/**"]`},
		{"sandbox-glob-unenforceable", SeverityError, []edit{{cliFile, `write: ["~/.config/demo/**", "./out/**"]`, `write: ["~/.config/*/cache"]`}}, nil, cliFile, `write: ["~/.config/*/cache"]`},
		{"sandbox-egress", SeverityError, []edit{{cliFile, "egress: [api.example.com,", `egress: ["https://api.example.com",`}}, nil, cliFile, "egress: "},
		{"sandbox-egress", SeverityError, []edit{{cliFile, "egress: [api.example.com,", `egress: ["10.0.0.1",`}}, nil, cliFile, "egress: "},
		{"commands-ref-missing", SeverityError, []edit{{cliFile, "list: ./tools/item-list/TOOL.md", "list: ./tools/nope/TOOL.md"}}, nil, cliFile, "list: ./tools/nope/TOOL.md"},
		{"commands-ref-escapes", SeverityError, []edit{{cliFile, "list: ./tools/item-list/TOOL.md", "list: ../elsewhere/TOOL.md"}}, nil, cliFile, "list: ../elsewhere/TOOL.md"},
		{"cli-actions-alias", SeverityError, []edit{{cliFile, "commands:\n", "actions: [{ ref: ./a/INTENT.md }]\nintents: [{ ref: ./a/INTENT.md }]\ncommands:\n"}}, nil, cliFile, "intents:"},
		{"runner-file", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: ./RUNNER.md\n"}}, nil, cliFile, "runner: ./RUNNER.md"},
		{"runner-file", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: { file: ../RUNNER.md }\n"}}, nil, cliFile, "runner: { file: ../RUNNER.md }"},
		{"schema-enum", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: ./RUNNER.md\n"}}, map[string]string{"demo/RUNNER.md": "---\nlimits: { memory_mb: 64 }\nengine: docker\n---\n"}, "demo/RUNNER.md", "engine: docker"},
		{"schema-additional-properties", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: ./RUNNER.md\n"}}, map[string]string{"demo/RUNNER.md": "---\nengine: subprocess\nshell: bash\n---\n"}, "demo/RUNNER.md", "shell: bash"},
		{"frontmatter-missing", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: ./RUNNER.md\n"}}, map[string]string{"demo/RUNNER.md": "engine: subprocess\n"}, "demo/RUNNER.md", "engine: subprocess"},
		{"runner-engine-in-process", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: ./RUNNER.md\n"}}, map[string]string{"demo/RUNNER.md": "---\nlimits: { memory_mb: 64 }\nengine: in-process\n---\n"}, "demo/RUNNER.md", "engine: in-process"},
		{"runner-engine-in-process", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: { engine: in-process }\n"}}, nil, cliFile, "runner: { engine: in-process }"},
		{"runner-engine-in-process", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner:\n  inline:\n    engine: in-process\n"}}, nil, cliFile, "    engine: in-process"},
		{"runner-registry-ref", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: { ref: \"@agentik/runners/python-3.12\" }\n"}}, nil, cliFile, "runner: { ref:"},
		{"runner-sandbox-image", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner:\n  engine: sandbox\n"}}, nil, cliFile, "  engine: sandbox"},
		{"runner-sandbox-image", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner:\n  engine: sandbox\n  image: \"containers-storage:[vfs@/tmp/s+/tmp/r]localhost/demo\"\n"}}, nil, cliFile, "  image: \"containers-storage:"},
		{"runner-sandbox-egress", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: { engine: sandbox, image: localhost/demo }\n"}}, nil, cliFile, "egress: [api.example.com,"},
		{"runner-image-ignored", SeverityWarning, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner:\n  image: localhost/demo\n"}}, nil, cliFile, "  image: localhost/demo"},
		{"runner-sandbox-steps", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: { engine: sandbox, image: localhost/demo }\n"}, {toolFile, "  argv: [item, list,", "  steps:\n    - argv: [item, list]\n  x_argv: [item, list,"}}, nil, toolFile, "  steps:"},
		{"runner-needs-name", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner:\n  needs:\n    native: [libcairo2, \"--allow-unauthenticated\"]\n"}}, nil, cliFile, "    native: [libcairo2"},
		{"runner-needs-image", SeverityWarning, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner:\n  engine: sandbox\n  image: localhost/demo\n  needs: { native: [weasyprint] }\n"}}, nil, cliFile, "  needs: { native"},
		{"tool-limits-widen", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: ./RUNNER.md\n"}, {toolFile, "  output: { format: json }\n", "  output: { format: json }\n  limits: { memory_mb: 1024, cpu_ms: 1000 }\n"}},
			map[string]string{"demo/RUNNER.md": "---\nlimits: { memory_mb: 512, cpu_ms: 2000 }\n---\n"}, toolFile, "limits: { memory_mb: 1024"},
		{"tool-limits-widen", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nrunner: { limits: { memory_mb: 512, cpu_ms: 2000 } }\n"}, {toolFile, "  output: { format: json }\n", "  output: { format: json }\n  limits: { memory_mb: 1024, cpu_ms: 1000 }\n"}}, nil, toolFile, "limits: { memory_mb: 1024"},
		{"tool-runner-cli", SeverityError, []edit{{toolFile, "cli: ../../CLI.md", "cli: ../CLI.md"}}, nil, toolFile, "cli: ../CLI.md"},
		{"tool-runner-missing", SeverityError, []edit{{toolFile, "runner:\n  cli: ../../CLI.md\n", "metadata:\n  cli: ../../CLI.md\n"}, {toolFile, "  argv: [item", "  argv2: [item"}, {toolFile, "  output: { format: json }\n", ""}}, nil, toolFile, "name: List items"},
		{"tool-inputs-schema", SeverityError, []edit{{toolFile, "inputs:\n  type: object", "inputs:\n  type: array"}}, nil, toolFile, "inputs:"},
		{"tool-inputs-schema", SeverityError, []edit{{toolFile, "limit: { type: integer, minimum: 1 }", `limit: { type: integer, minimum: "one" }`}}, nil, toolFile, "  type: object"},
		{"tool-outputs-schema", SeverityError, []edit{{toolFile, "outputs: { type: array }", "outputs: { type: list }"}}, nil, toolFile, "outputs: { type: list }"},
		{"argv-syntax", SeverityError, []edit{{toolFile, `"${input.limit | optional('--limit')}"`, `"${input.limit | optional('--limit')"`}}, nil, toolFile, "  argv:"},
		{"argv-syntax", SeverityError, []edit{{toolFile, `"${input.limit | optional('--limit')}"`, `"--limit=${input.limit | optional('--limit')}"`}}, nil, toolFile, "  argv:"},
		{"argv-unknown-filter", SeverityError, []edit{{toolFile, `"${input.limit | optional('--limit')}"`, `"${input.limit | upper()}"`}}, nil, toolFile, "  argv:"},
		{"argv-undeclared-input", SeverityError, []edit{{toolFile, `"${input.limit | optional('--limit')}"`, `"${input.nope | optional('--nope')}"`}}, nil, toolFile, "  argv:"},
		{"argv-bare-optional", SeverityWarning, []edit{{toolFile, `"${input.state | optional('--state')}"`, `--state, "${input.state}"`}}, nil, toolFile, "  argv:"},
		{"argv-command-path", SeverityWarning, []edit{{toolFile, "argv: [item, list,", "argv: [items, list,"}, {cliFile, "    list: ./tools/item-list/TOOL.md", "    list: ./tools/item-list/TOOL.md\n    all: ./tools/item-all/TOOL.md"}},
			map[string]string{"demo/tools/item-all/TOOL.md": strings.NewReplacer("argv: [item, list,", "argv: [item, all,", "id: demo.item.list", "id: demo.item.all").Replace(baseTool)}, toolFile, "  argv:"},
		{"tool-sandbox-widens", SeverityError, []edit{{toolFile, "fs: { write: [] }", "fs: { write: [\"/etc/**\"] }"}}, nil, toolFile, "fs: { write:"},
		{"tool-sandbox-widens", SeverityError, []edit{{toolFile, "  fs: { write: [] }\n", "  fs: { write: [] }\n  exec: { allow: true }\n"}}, nil, toolFile, "exec: { allow: true }"},
		{"tool-sandbox-widens", SeverityError, []edit{{toolFile, "  fs: { write: [] }\n", "  fs: { write: [] }\n  network: { egress: [evil.example.org] }\n"}}, nil, toolFile, "network: { egress: [evil"},
		{"tool-sandbox-widens", SeverityError, []edit{{toolFile, "  fs: { write: [] }\n", "  fs: { write: [] }\n  env: { pass: [AWS_SECRET_ACCESS_KEY] }\n"}}, nil, toolFile, "env: { pass:"},
		{"tool-mutates-approval", SeverityError, []edit{{toolFile, "risk_level: 0\n", "risk_level: 2\nmutates: [\"external:example.com\"]\n"}}, nil, toolFile, "mutates:"},
		{"tool-example-invalid", SeverityError, []edit{{toolFile, "input: { state: open, query: x }", "input: { state: bogus, query: x }"}}, nil, toolFile, "input: { state: bogus"},
		{"tool-mcp-name", SeverityWarning, []edit{{cliFile, "  item:\n    list:", "  item:\n    " + strings.Repeat("l", 70) + ":"}}, nil, toolFile, "id: demo.item.list"},
		{"tool-id-duplicate", SeverityError, []edit{{cliFile, "    list: ./tools/item-list/TOOL.md", "    list: ./tools/item-list/TOOL.md\n    all: ./tools/item-all/TOOL.md"}},
			map[string]string{"demo/tools/item-all/TOOL.md": strings.Replace(baseTool, "argv: [item, list,", "argv: [item, all,", 1)}, "demo/tools/item-all/TOOL.md", "id: demo.item.list"},
		{"yaml-syntax", SeverityError, []edit{{cliFile, "bin: demo", "bin: [demo"}}, nil, cliFile, "bin: [demo"},
		{"yaml-syntax", SeverityError, []edit{{cliFile, "    interactive: true\n", "    interactive: true\n   bad: 1\n"}}, nil, cliFile, "  login:"},
		{"yaml-syntax", SeverityError, []edit{{toolFile, "risk_level: 0", "risk_level: : 0"}}, nil, toolFile, "risk_level: : 0"},
		{"yaml-duplicate-key", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nbin: demo2\n"}}, nil, cliFile, "bin: demo2"},
		{"frontmatter-missing", SeverityError, []edit{{toolFile, "---\nname: List items", "name: List items"}}, nil, toolFile, "name: List items"},
		{"frontmatter-unterminated", SeverityError, []edit{{toolFile, "---\nLists items.", "Lists items."}}, nil, toolFile, "---"},
		{"schema-additional-properties", SeverityError, []edit{{cliFile, "bin: demo\n", "bin: demo\nshell: bash\n"}}, nil, cliFile, "shell: bash"},
		{"schema-required", SeverityError, []edit{{cliFile, "  range: \">=1.0 <2\"\n", ""}}, nil, cliFile, "version_check:"},
		{"schema-min-items", SeverityError, []edit{{cliFile, "install:\n  - { method: apt, package: demo }\n", "install: []\nx_install:\n  - { method: apt, package: demo }\n"}, {cliFile, "x_install:\n  - { method: apt, package: demo }\n  - { method: download", "x_install:\n  - { method: download"}}, nil, cliFile, "install: []"},
		{"schema-required", SeverityError, []edit{{cliFile, "{ method: apt, package: demo }", "{ method: apt }"}}, nil, cliFile, "{ method: apt }"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			fsys := buildBundle(t, tc.edits, tc.extra)
			b := LoadBundle(fsys, cliFile, LoadOptions{})
			want := lineOf(t, string(fsys[tc.file].Data), tc.marker)
			var got []string
			for _, f := range b.Findings {
				if f.Rule == tc.rule {
					got = append(got, fmt.Sprintf("%s:%d", f.Pos.File, f.Pos.Line))
					if f.Pos.File == tc.file && f.Pos.Line == want {
						if f.Severity != tc.severity {
							t.Fatalf("%s: severity %s, want %s", f, f.Severity, tc.severity)
						}
						if f.Hint == "" && !strings.HasPrefix(tc.rule, "yaml") {
							t.Errorf("%s: no hint", f)
						}
						return
					}
				}
			}
			t.Fatalf("want %s at %s:%d, got %v; all findings:\n%s", tc.rule, tc.file, want, got, findingsText(b.Findings))
		})
	}
}

func TestVendoredPresentAndECMAScriptRegex(t *testing.T) {
	fsys := buildBundle(t, []edit{
		{cliFile, "  - { method: apt", "  - { method: vendored, path: ./bin/demo }\n  - { method: apt"},
		{cliFile, `parse: 'demo (\d+\.\d+\.\d+)'`, `parse: '(?<=demo )(\S+)'`},
	}, map[string]string{"demo/bin/demo": "#!/bin/sh\n"})
	b := LoadBundle(fsys, cliFile, LoadOptions{})
	if len(b.Findings) != 0 {
		t.Fatalf("unexpected findings:\n%s", findingsText(b.Findings))
	}
	p, err := CompileVersionPattern(b.CLI.VersionCheck.Parse)
	if err != nil || p.Engine != "ecmascript" {
		t.Fatalf("engine %v, err %v", p, err)
	}
	if v, ok := p.Find("demo 1.4.2\n"); !ok || v != "1.4.2" {
		t.Fatalf("Find = %q %v", v, ok)
	}
}

func TestFlatCLIArgvNeedsNoCommandPath(t *testing.T) {
	fsys := buildBundle(t, []edit{{toolFile, "argv: [item, list, ", "argv: [empty, "}}, nil)
	if b := LoadBundle(fsys, cliFile, LoadOptions{}); len(b.Findings) != 0 {
		t.Fatalf("argv starting with an option was flagged:\n%s", findingsText(b.Findings))
	}
}

func TestExitCodesNormalised(t *testing.T) {
	b := LoadBundle(buildBundle(t, nil, nil), cliFile, LoadOptions{})
	if got := b.CLI.Output.ExitCodes["4"]; got != "auth_required" {
		t.Fatalf("exit code 4 = %q", got)
	}
}

func TestDocumentLevelRules(t *testing.T) {
	deep := "---\na: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "\n---\n"
	cases := []struct {
		rule, text string
		line       int
	}{
		{"frontmatter-empty", "---\n---\nbody\n", 1},
		{"frontmatter-not-mapping", "---\n\n- a\n- b\n---\n", 3},
		{"yaml-structure", deep, 2},
		{"file-too-large", "---\nname: x\n---\n" + strings.Repeat("x", MaxFileSize), 1},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			b := LoadBundle(fstest.MapFS{cliFile: {Data: []byte(c.text)}}, cliFile, LoadOptions{})
			if len(b.Findings) != 1 || b.Findings[0].Rule != c.rule || b.Findings[0].Pos.Line != c.line || b.Findings[0].Pos.File != cliFile {
				t.Fatalf("want %s at %s:%d, got %v", c.rule, cliFile, c.line, b.Findings)
			}
		})
	}
	b := LoadBundle(fstest.MapFS{}, cliFile, LoadOptions{})
	if len(b.Findings) != 1 || b.Findings[0].Rule != "file-unreadable" || b.Findings[0].Pos.File != cliFile {
		t.Fatalf("missing file: %v", b.Findings)
	}
}

// TestEffectiveLimits checks that a tool's runner.limits only narrow the bundle's.
func TestEffectiveLimits(t *testing.T) {
	bundle := &RunnerRef{Limits: &RunnerLimits{MemoryMB: 512, TimeoutMS: 10000}}
	tool := &ToolRunner{Limits: &RunnerLimits{MemoryMB: 1024, TimeoutMS: 5000, CPUMS: 300}}
	got := EffectiveLimits(bundle, tool)
	if want := (RunnerLimits{MemoryMB: 512, TimeoutMS: 5000, CPUMS: 300}); got != want {
		t.Fatalf("EffectiveLimits = %+v, want %+v", got, want)
	}
	if got := EffectiveLimits(nil, nil); got != (RunnerLimits{}) {
		t.Fatalf("EffectiveLimits(nil, nil) = %+v, want none", got)
	}
}
