package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var withRef = edit{cliFile, "auth:\n", "auth:\n  ref: ./SECRETS.md\n"}

const goodSecrets = `---
secrets:
  - slug: demo-api-key
    name: Demo API key
    description: The key the demo CLI calls its API with.
  - slug: demo/github
    name: GitHub token
    description: Read access to the demo's repositories.
    kind: oauth
    exposures:
      - { kind: env, name: GH_TOKEN, field: accessToken }
      - { kind: env, name: GITHUB_TOKEN, field: accessToken }
    access:
      bind:
        - tool: demo.item.list
    metadata: { required: false }
  - slug: demo-multi
    name: Two names
    description: One slug, two variables, through AIP-19's metadata binding.
    metadata: { bindings: { env: [MULTI_A, MULTI_B] } }
---
# Secrets
`

// TestSecretsInventoryLoads: a valid inventory lints clean and each entry becomes a slot with the
// variables AIP-19's three bindings give it (exposures, metadata.bindings.env, the convention).
func TestSecretsInventoryLoads(t *testing.T) {
	b := diskBundle(t, []edit{withRef}, map[string]string{"demo/SECRETS.md": goodSecrets}, nil)
	if len(b.Findings) != 0 {
		t.Fatalf("unexpected findings:\n%s", findingsText(b.Findings))
	}
	if len(b.Secrets) != 3 {
		t.Fatalf("want 3 slots, got %+v", b.Secrets)
	}
	key, gh, multi := b.Secrets[0], b.Secrets[1], b.Secrets[2]
	if key.Slug != "demo-api-key" || len(key.Env) != 1 || key.Env[0].Name != "DEMO_API_KEY" || !key.Required || key.Kind != "opaque" || key.Bound {
		t.Fatalf("convention slot: %+v", key)
	}
	if gh.Required || gh.Kind != "oauth" || len(gh.Env) != 2 || gh.Env[0] != (SecretEnv{"GH_TOKEN", "accessToken"}) || !gh.Bound || gh.Tools[0] != "demo.item.list" {
		t.Fatalf("exposure slot: %+v", gh)
	}
	if len(multi.Env) != 2 || multi.Env[1].Name != "MULTI_B" {
		t.Fatalf("metadata slot: %+v", multi)
	}
	if s, ok := b.SecretSlotFor("GITHUB_TOKEN"); !ok || s.Slug != "demo/github" {
		t.Fatalf("SecretSlotFor(GITHUB_TOKEN) = %+v, %v", s, ok)
	}
	if !gh.BoundTo(b.Tools[0]) {
		t.Fatal("the slot is granted to demo.item.list")
	}
}

// TestSecretsInventoryHostile: every way an inventory can be missing, escape the bundle, be too
// large, not parse or misdeclare its variables is a lint error at file:line:col with a rule and a
// hint, and leaves the bundle unservable.
func TestSecretsInventoryHostile(t *testing.T) {
	entry := func(extra string) string {
		return "---\nsecrets:\n  - slug: demo-key\n    name: Key\n    description: A key.\n" + extra + "---\n"
	}
	cases := []struct {
		name  string
		ref   string
		file  string // SECRETS.md content ("" for none)
		links func(t *testing.T) map[string]string
		rule  string
		where string // the file the finding is in (suffix)
		line  int
	}{
		{name: "missing file", ref: "./SECRETS.md", rule: "secrets-ref-missing", where: "CLI.md", line: -1},
		{name: "ref to /etc/shadow by ..", ref: "../../../../../../etc/shadow", rule: "bundle-file-outside", where: "CLI.md", line: -1},
		{name: "absolute ref", ref: "/etc/shadow", rule: "bundle-file-outside", where: "CLI.md", line: -1},
		{name: "URL ref", ref: "https://example.com/SECRETS.md", rule: "secrets-ref-remote", where: "CLI.md", line: -1},
		{name: "symlink to a file outside", ref: "./SECRETS.md", rule: "bundle-file-outside", where: "CLI.md", line: -1,
			links: func(t *testing.T) map[string]string {
				return map[string]string{"demo/SECRETS.md": outsideFile(t, "SECRETS.md", goodSecrets)}
			}},
		{name: "symlink to /etc/shadow", ref: "./SECRETS.md", rule: "bundle-file-outside", where: "CLI.md", line: -1,
			links: func(*testing.T) map[string]string { return map[string]string{"demo/SECRETS.md": "/etc/shadow"} }},
		{name: "a folder", ref: "./tools", rule: "secrets-ref-missing", where: "CLI.md", line: -1},
		{name: "huge file", ref: "./SECRETS.md", file: "---\nsecrets: []\n---\n" + strings.Repeat("x", MaxFileSize+10), rule: "file-too-large", where: "SECRETS.md", line: 1},
		{name: "malformed YAML", ref: "./SECRETS.md", file: "---\nsecrets:\n  - slug: [unclosed\n---\n", rule: "yaml-syntax", where: "SECRETS.md"},
		{name: "no frontmatter", ref: "./SECRETS.md", file: "# just prose\n", rule: "frontmatter-missing", where: "SECRETS.md", line: 1},
		{name: "alias bomb", ref: "./SECRETS.md", file: "---\na: &a [x, x]\nsecrets: *a\n---\n", rule: "yaml-alias", where: "SECRETS.md"},
		{name: "schema: missing description", ref: "./SECRETS.md", file: "---\nsecrets:\n  - slug: demo-key\n    name: Key\n---\n", rule: "schema-required", where: "SECRETS.md", line: 3},
		{name: "schema: bad slug", ref: "./SECRETS.md", file: "---\nsecrets:\n  - slug: Demo_Key\n    name: Key\n    description: d\n---\n", rule: "schema-pattern", where: "SECRETS.md", line: 3},
		{name: "a value in the inventory", ref: "./SECRETS.md", file: entry("    token: ghp_abcdef\n"), rule: "secrets-value", where: "SECRETS.md", line: 6},
		{name: "duplicate slug", ref: "./SECRETS.md", file: "---\nsecrets:\n  - { slug: demo-key, name: a, description: a }\n  - { slug: demo-key, name: b, description: b }\n---\n", rule: "secrets-slug-duplicate", where: "SECRETS.md", line: 4},
		{name: "duplicate variable", ref: "./SECRETS.md", file: "---\nsecrets:\n  - { slug: demo-key, name: a, description: a }\n  - { slug: other, name: b, description: b, metadata: { bindings: { env: [DEMO_KEY] } } }\n---\n", rule: "secrets-env-duplicate", where: "SECRETS.md", line: 4},
		{name: "variable env.set sets", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: [DEMO_COLOR] } }\n"), rule: "secrets-env-duplicate", where: "SECRETS.md", line: 3},
		{name: "reserved: PATH", ref: "./SECRETS.md", file: entry("    exposures: [{ kind: env, name: PATH, field: value }]\n"), rule: "secrets-env-reserved", where: "SECRETS.md", line: 3},
		{name: "reserved: HTTPS_PROXY", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: [HTTPS_PROXY] } }\n"), rule: "secrets-env-reserved", where: "SECRETS.md", line: 3},
		{name: "reserved: LD_PRELOAD", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: [LD_PRELOAD] } }\n"), rule: "secrets-env-reserved", where: "SECRETS.md", line: 3},
		{name: "reserved: NODE_OPTIONS", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: [NODE_OPTIONS] } }\n"), rule: "secrets-env-reserved", where: "SECRETS.md", line: 3},
		{name: "reserved variable written as one name", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: LD_PRELOAD } }\n"), rule: "secrets-env-reserved", where: "SECRETS.md", line: 3},
		{name: "bindings.env neither a name nor a list", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: { a: 1 } } }\n"), rule: "secrets-env-name", where: "SECRETS.md", line: 6},
		{name: "invalid variable name", ref: "./SECRETS.md", file: entry("    metadata: { bindings: { env: [\"A=B\"] } }\n"), rule: "secrets-env-name", where: "SECRETS.md", line: 3},
		{name: "invalid exposure name", ref: "./SECRETS.md", file: entry("    exposures: [{ kind: env, name: lower, field: value }]\n"), rule: "secrets-env-name", where: "SECRETS.md", line: 3},
		{name: "required not a boolean", ref: "./SECRETS.md", file: entry("    metadata: { required: \"no\" }\n"), rule: "secrets-required", where: "SECRETS.md", line: 6},
		// A bind grant naming no tool of the bundle would inject the secret into no call at all
		// (and, for a required secret, never ask for it): an error at the grant, not a silent no-op.
		{name: "bind to a tool the bundle lacks", ref: "./SECRETS.md", file: entry("    access:\n      bind:\n        - tool: demo.item.lsit\n"), rule: "secrets-bind-unknown", where: "SECRETS.md", line: 8},
		{name: "one bind grant of two unknown", ref: "./SECRETS.md", file: entry("    access:\n      bind:\n        - tool: demo.item.list\n        - tool: nosuch\n"), rule: "secrets-bind-unknown", where: "SECRETS.md", line: 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]string{}
			if tc.file != "" {
				extra["demo/SECRETS.md"] = tc.file
			}
			var links map[string]string
			if tc.links != nil {
				links = tc.links(t)
			}
			b := diskBundle(t, []edit{{cliFile, "auth:\n", "auth:\n  ref: \"" + tc.ref + "\"\n"}}, extra, links)
			if !b.Findings.HasErrors() {
				t.Fatalf("the bundle must not be servable; findings:\n%s", findingsText(b.Findings))
			}
			var got *Finding
			for i, f := range b.Findings {
				if f.Rule == tc.rule {
					got = &b.Findings[i]
					break
				}
			}
			if got == nil {
				t.Fatalf("no %s finding; got:\n%s", tc.rule, findingsText(b.Findings))
			}
			if tc.line == -1 { // the auth.ref line of CLI.md
				src, err := os.ReadFile(got.Pos.File)
				if err != nil {
					t.Fatal(err)
				}
				tc.line = lineOf(t, string(src), "ref: ")
			}
			if !strings.HasSuffix(got.Pos.File, tc.where) || tc.line != 0 && got.Pos.Line != tc.line || got.Pos.Col < 1 && got.Pos.Line > 0 {
				t.Fatalf("finding at %s, want %s line %d: %s", got.Pos, tc.where, tc.line, got)
			}
			if got.Hint == "" {
				t.Fatalf("finding without a hint: %s", got)
			}
			if strings.Contains(findingsText(b.Findings), "ghp_abcdef") {
				t.Fatal("a finding repeats the value the inventory held")
			}
		})
	}
}

// TestSecretsInventoryWarnings: what this host does not honour (a backend URI, file exposures,
// bind grants that are not tools) is reported as a warning, and the bundle stays servable.
func TestSecretsInventoryWarnings(t *testing.T) {
	inv := "---\nsecrets:\n  - slug: demo-key\n    name: Key\n    description: A key.\n    backend: vault://kv/demo\n" +
		"    exposures: [{ kind: file, path: ~/.demo/key }]\n    access: { bind: [{ role: admin }] }\n---\n"
	b := diskBundle(t, []edit{withRef}, map[string]string{"demo/SECRETS.md": inv}, nil)
	if b.Findings.HasErrors() {
		t.Fatalf("warnings only expected:\n%s", findingsText(b.Findings))
	}
	for _, rule := range []string{"secrets-backend-ignored", "secrets-exposure-unsupported", "secrets-access-unsupported"} {
		if !strings.Contains(findingsText(b.Findings), rule) {
			t.Errorf("no %s warning:\n%s", rule, findingsText(b.Findings))
		}
	}
	if len(b.Secrets) != 1 || !b.Secrets[0].Bound || len(b.Secrets[0].Tools) != 0 || b.Secrets[0].BoundTo(b.Tools[0]) {
		t.Fatalf("a bind list of grants clihost ignores grants no tool: %+v", b.Secrets)
	}
}

// TestSecretsBindForms: a bind grant may name a tool by its id, its command path, its dotted path
// or its MCP name (the names clihostctl call and intents take), and each form lints clean and
// binds the secret to that tool only.
func TestSecretsBindForms(t *testing.T) {
	for _, name := range []string{"demo.item.list", "item list", "item.list", "item_list"} {
		inv := "---\nsecrets:\n  - slug: demo-key\n    name: Key\n    description: A key.\n    access: { bind: [{ tool: \"" + name + "\" }] }\n---\n"
		b := diskBundle(t, []edit{withRef}, map[string]string{"demo/SECRETS.md": inv}, nil)
		if len(b.Findings) != 0 {
			t.Fatalf("%q: unexpected findings:\n%s", name, findingsText(b.Findings))
		}
		if !b.Secrets[0].BoundTo(b.Tool("demo.item.list")) {
			t.Fatalf("%q: the secret is not bound to the tool it names", name)
		}
	}
}

// TestSecretsRevealIgnoredWarns: clihost injects secrets by access.bind only; an access.reveal
// or access.rotate block (AIP-19's other operations) is not acted on, and without bind the secret
// reaches every tool, so the author who wrote reveal: [{ tool: X }] to limit it is told.
func TestSecretsRevealIgnoredWarns(t *testing.T) {
	inv := "---\nsecrets:\n  - slug: demo-key\n    name: Key\n    description: A key.\n    access:\n      reveal: [{ tool: demo.item.list }]\n      rotate: [{ role: admin }]\n---\n"
	b := diskBundle(t, []edit{withRef}, map[string]string{"demo/SECRETS.md": inv}, nil)
	if b.Findings.HasErrors() {
		t.Fatalf("warnings only expected:\n%s", findingsText(b.Findings))
	}
	lines := map[int]bool{}
	for _, f := range b.Findings {
		if f.Rule == "secrets-access-unsupported" && strings.HasSuffix(f.Pos.File, "SECRETS.md") && f.Hint != "" {
			lines[f.Pos.Line] = true
		}
	}
	if !lines[7] || !lines[8] {
		t.Fatalf("want secrets-access-unsupported warnings at lines 7 (reveal) and 8 (rotate):\n%s", findingsText(b.Findings))
	}
}

// TestSecretsInventoryReread: the inventory is read afresh on every load; an edit to it (a new
// variable) is what the next load sees, never a copy kept from an earlier one.
func TestSecretsInventoryReread(t *testing.T) {
	dir := t.TempDir()
	for name, f := range buildBundle(t, []edit{withRef}, map[string]string{"demo/SECRETS.md": goodSecrets}) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onDisk := func(p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	load := func() *Bundle {
		return LoadBundle(os.DirFS(dir), cliFile, LoadOptions{Display: onDisk, OSPath: onDisk})
	}
	if b := load(); len(b.Secrets) != 3 {
		t.Fatalf("first load: %+v", b.Secrets)
	}
	edited := strings.Replace(goodSecrets, "[MULTI_A, MULTI_B]", "[MULTI_C]", 1)
	if err := os.WriteFile(filepath.Join(dir, "demo", "SECRETS.md"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	b := load()
	if s, ok := b.SecretSlotFor("MULTI_C"); !ok || s.Slug != "demo-multi" {
		t.Fatalf("the edited inventory was not read: %+v", b.Secrets)
	}
	if _, ok := b.SecretSlotFor("MULTI_A"); ok {
		t.Fatal("a variable of the old inventory survived the edit")
	}
}

// TestSecretsInventoryInArgv: ${secrets.SLUG} of an inventory secret in an argv is an error
// (secrets-argv), not setup's secret-in-argv warning: clihost refuses such a call at run time, as a
// command line is world-readable; a setup secret there stays a warning.
func TestSecretsInventoryInArgv(t *testing.T) {
	argv := func(ref string) edit {
		return edit{toolFile, `"--", "${input.query}"]`, `"--", "${input.query}", "--token=${secrets.` + ref + `}"]`}
	}
	b := diskBundle(t, []edit{withRef, argv("demo-api-key")}, map[string]string{"demo/SECRETS.md": goodSecrets}, nil)
	var rules []string
	for _, f := range b.Findings {
		rules = append(rules, fmt.Sprintf("%s:%v", f.Rule, f.Severity))
	}
	if len(rules) != 1 || rules[0] != "secrets-argv:error" {
		t.Fatalf("an inventory secret in argv: %v\n%s", rules, findingsText(b.Findings))
	}
	b = diskBundle(t, []edit{withRef, argv("from-setup")}, map[string]string{"demo/SECRETS.md": goodSecrets}, nil)
	if len(b.Findings) != 1 || b.Findings[0].Rule != "secret-in-argv" || b.Findings[0].Severity != SeverityWarning {
		t.Fatalf("a setup secret in argv:\n%s", findingsText(b.Findings))
	}
}

// TestSecretsInventoryUnbound: a tool naming (in its stdin) an inventory secret that access.bind
// grants only to another tool is an error (secrets-unbound), and UngrantedSecret, the call's own
// check, names it.
func TestSecretsInventoryUnbound(t *testing.T) {
	inv := strings.Replace(goodSecrets, "    description: The key the demo CLI calls its API with.\n",
		"    description: The key the demo CLI calls its API with.\n    access: { bind: [{ tool: demo.other }] }\n", 1)
	stdin := edit{toolFile, "runner:\n", "runner:\n  stdin: \"${secrets.demo-api-key}\"\n"}
	b := diskBundle(t, []edit{withRef, stdin}, map[string]string{"demo/SECRETS.md": inv}, nil)
	// The fixture has one tool, so the grant to demo.other is also secrets-bind-unknown.
	if fs := findingsOf(b, "secrets-unbound"); len(fs) != 1 || fs[0].Severity != SeverityError || fs[0].Pos.Line == 0 || len(b.Findings) != 2 || len(findingsOf(b, "secrets-bind-unknown")) != 1 {
		t.Fatalf("an ungranted secret in stdin:\n%s", findingsText(b.Findings))
	}
	if slug, ok := b.UngrantedSecret(b.Tool("demo.item.list")); !ok || slug != "demo-api-key" {
		t.Fatalf("the call's own check: %q %v", slug, ok)
	}
	if slug, ok := b.UngrantedSecret(b.Tool("demo.item.list")); ok && slug == "demo/github" {
		t.Fatal("a secret granted to the tool is reported")
	}
}

// TestSecretsOAuthStepField: an oauth setup step stores a bare access token (its refresh token is
// sealed, never handed to the CLI); a slot it fills that exposes another field of an oauth value,
// or declares itself a keypair or json value, would fail every call: a lint error at the exposure
// or the kind.
func TestSecretsOAuthStepField(t *testing.T) {
	step := edit{cliFile, "auth:\n", "  - id: connect\n    kind: oauth\n    secret_slug: demo-key\n    oauth: { client_id: c, authorization_url: \"https://a.example/authorize\", token_url: \"https://a.example/token\" }\nauth:\n  ref: ./SECRETS.md\n"}
	entry := "---\nsecrets:\n  - slug: demo-key\n    name: Key\n    description: A key.\n"
	for name, tc := range map[string]struct {
		inv  string
		line int
		ok   bool
	}{
		"accessToken":  {inv: entry + "    kind: oauth\n    exposures: [{ kind: env, name: DEMO_KEY, field: accessToken }]\n---\n", ok: true},
		"opaque":       {inv: entry + "---\n", ok: true},
		"refreshToken": {inv: entry + "    kind: oauth\n    exposures:\n      - { kind: env, name: DEMO_KEY, field: refreshToken }\n---\n", line: 8},
		"keypair":      {inv: entry + "    kind: keypair\n    exposures: [{ kind: env, name: DEMO_KEY, field: private }]\n---\n", line: 6},
	} {
		t.Run(name, func(t *testing.T) {
			b := diskBundle(t, []edit{step}, map[string]string{"demo/SECRETS.md": tc.inv}, nil)
			fs := findingsOf(b, "secrets-oauth-step")
			if tc.ok {
				if b.Findings.HasErrors() {
					t.Fatalf("unexpected findings:\n%s", findingsText(b.Findings))
				}
				return
			}
			if len(fs) != 1 || fs[0].Severity != SeverityError || fs[0].Pos.Line != tc.line || fs[0].Hint == "" {
				t.Fatalf("want one secrets-oauth-step error at line %d, got:\n%s", tc.line, findingsText(b.Findings))
			}
		})
	}
}
