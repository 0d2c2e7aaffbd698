package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// bombCLI is a 775-byte-class CLI.md whose frontmatter is a billion laughs (9^9 strings once
// expanded).
func bombCLI() string {
	var b strings.Builder
	b.WriteString("---\nid: hello\nversion: 1.0.0\nl0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	for i := 1; i <= 8; i++ {
		p := "*l" + string(rune('0'+i-1))
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(p+",", 8) + p + "]\n")
	}
	b.WriteString("---\n")
	return b.String()
}

// asLimit is the address-space limit the bomb runs under: enough for a Go program, far too little
// for an expansion (the unbounded code reached 7 GB).
const asLimit = "--as=1073741824"

// TestLintYAMLBomb lints a bundle whose CLI.md is a billion laughs, under a 1 GiB address-space
// limit: a yaml-alias error and exit 1, not an out-of-memory death.
func TestLintYAMLBomb(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bomb", "CLI.md"), bombCLI())
	r := runBin(t, "/usr/bin/prlimit", "", asLimit, bin.ctl, "lint", "--format", "json", dir)
	var rep struct {
		Findings []struct{ Severity, Rule, File string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if r.code != 1 || len(rep.Findings) != 1 || rep.Findings[0].Rule != "yaml-alias" || rep.Findings[0].Severity != "error" {
		t.Fatalf("exit %d, findings %+v\n%s", r.code, rep.Findings, r.stderr)
	}
}

// TestDaemonRefusesYAMLBomb drops a billion laughs over a watched bundle's CLI.md while clihostd
// runs under a 1 GiB address-space limit: the daemon reloads, refuses the bundle (logging the file)
// and keeps serving.
func TestDaemonRefusesYAMLBomb(t *testing.T) {
	dir := helloBundle(t, "https://example.invalid/hello.tar.gz", strings.Repeat("a", 64))
	limit := func(c *exec.Cmd) {
		c.Args = append([]string{"prlimit", asLimit}, c.Args...)
		c.Path = "/usr/bin/prlimit"
	}
	d := startDaemonWith(t, t.TempDir(), fixture.Workspace(t), limit, "--bundles", dir)
	if st := d.status(t, "hello"); st.Install != "missing" {
		t.Fatalf("before the bomb: %+v", st)
	}
	cli := filepath.Join(dir, "hello", "CLI.md")
	writeFile(t, cli, bombCLI())
	d.waitFor(t, "reloading bundles (files changed)")
	if l := d.waitFor(t, "bundle refused"); !strings.Contains(l, cli) || !strings.Contains(l, "errors=1") {
		t.Fatalf("refusal %q", l)
	}
	// Its id is inside the refused frontmatter: the bundle is gone, and the daemon still answers.
	r := d.ctl(t, "status", "--json")
	var st struct{ Bundles []bundleStatus }
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || len(st.Bundles) == 0 {
		t.Fatalf("status: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	for _, b := range st.Bundles {
		if strings.HasPrefix(b.Key, "hello@") {
			t.Fatalf("the bomb is still listed: %+v", b)
		}
	}
}

// yamlCatBundle writes a bundle for cat(1) whose output is declared YAML: the YAML an agent gets
// is whatever the workspace file holds.
func yamlCatBundle(t *testing.T) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "yamlcat", "CLI.md"), `---
name: yamlcat
id: yamlcat
description: cat(1) over a workspace file whose content is YAML.
version: 1.0.0
bin: cat
install:
  - { method: apt, package: coreutils }
version_check:
  cmd: "cat --version"
  parse: 'cat \(GNU coreutils\) (\d+\.\d+)'
  range: ">=8"
  timeout_ms: 5000
sandbox:
  network: { egress: [] }
  fs: { read: ["./**"], write: [] }
  exec: { allow: false }
  env: { pass: [], set: {} }
output:
  default_format: yaml
  stream: stdout
  error_stream: stderr
commands:
  show: ./tools/show/TOOL.md
---
Prints a file.
`)
	writeFile(t, filepath.Join(dir, "yamlcat", "tools", "show", "TOOL.md"), `---
name: Show a YAML file
id: yamlcat.show
description: Print a workspace file, parsed as YAML.
version: 1.0.0
inputs:
  type: object
  additionalProperties: false
  properties:
    file: { type: string, minLength: 1, description: "Workspace-relative file." }
  required: [file]
outputs: { type: object }
idempotent: true
risk_level: 0
mutates: []
approval: auto
timeout_ms: 15000
runner:
  cli: ../../CLI.md
  argv: ["--", "${input.file}"]
---
Prints the file.
`)
	return dir
}

// TestCallYAMLOutputBomb calls a tool whose declared YAML output is a few nested aliases of a
// 64 KiB string (6.5 GB as JSON), through the built clihostctl under a 1 GiB address-space limit:
// output_parse_failed naming the aliases, not an out-of-memory death. A plain YAML file through
// the same tool is the positive control.
func TestCallYAMLOutputBomb(t *testing.T) {
	dir := yamlCatBundle(t)
	if r := runBin(t, bin.ctl, "", "lint", "--strict", dir); r.code != 0 {
		t.Fatalf("the bundle does not lint clean: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ws := fixture.Workspace(t)
	var bomb strings.Builder
	bomb.WriteString("pad: [" + strings.Repeat("0,", 5000) + "0]\nl0: &l0 \"" + strings.Repeat("x", 64<<10) + "\"\n")
	for i := 1; i <= 5; i++ {
		p := "*l" + string(rune('0'+i-1))
		bomb.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(p+",", 9) + p + "]\n")
	}
	writeFile(t, filepath.Join(ws, "bomb.yaml"), bomb.String())
	writeFile(t, filepath.Join(ws, "plain.yaml"), "a: 1\nb: [x, y]\n")
	call := func(file string) (result, envelope) {
		r := runBin(t, "/usr/bin/prlimit", "", asLimit, bin.ctl, "call", "--bundles", dir, "--workspace", ws, "--audit", os.DevNull,
			"yamlcat", "show", "--input", `{"file": "`+file+`"}`)
		return r, decodeEnvelope(t, r)
	}
	if r, e := call("plain.yaml"); r.code != 0 || !e.OK {
		t.Fatalf("plain YAML: exit %d %+v\n%s", r.code, e, r.stderr)
	}
	r, e := call("bomb.yaml")
	if r.code != 1 || e.OK || e.Error == nil || e.Error.Code != "output_parse_failed" || !strings.Contains(e.Error.Message, "aliases") {
		t.Fatalf("bomb: exit %d %+v\n%s", r.code, e, r.stderr)
	}
}
