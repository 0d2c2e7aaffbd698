package manifest

import (
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/clihost/clihost/internal/beneath"
	"github.com/clihost/clihost/schemas"
)

// auth.ref (AIP-19): the SECRETS.md inventory a bundle's auth block points at. It is read relative
// to the bundle folder (never outside it: not by .., an absolute path or a symbolic link), its
// frontmatter validated against AIP-19's SECRETS.schema.json, and each secret it declares becomes a
// SecretSlot: the environment variables the CLI receives its value in, filled at call time from the
// host's encrypted store (the slot secret/<slug> of the call's scope, the one setup's
// persist.secret_slug writes).

// SecretSlot is one secret of a bundle's SECRETS.md inventory.
type SecretSlot struct {
	Slug        string      `json:"slug"`
	Name        string      `json:"name"`
	Description string      `json:"description,omitempty"`
	Kind        string      `json:"kind"` // opaque, oauth, keypair or json
	Env         []SecretEnv `json:"env"`
	// Required: a call of a tool the secret is bound to fails (setup_required) while it is unset.
	// metadata.required: false makes it optional.
	Required bool `json:"required"`
	// Tools are the tools access.bind grants it to (TOOL.md id, command path or dotted path);
	// Bound says whether access.bind limits it to them (an absent or empty bind: every tool).
	Tools []string `json:"tools,omitempty"`
	Bound bool     `json:"bound,omitempty"`
	// toolPtrs are the JSON pointers of Tools' grants in SECRETS.md, for findings.
	toolPtrs []string
}

// SecretEnv is one environment variable a secret's value reaches the CLI in. Field picks the
// field of a structured value (kinds other than opaque: a JSON object); an opaque value is whole.
type SecretEnv struct {
	Name  string `json:"name"`
	Field string `json:"field,omitempty"`
}

// BoundTo reports whether the slot is injected into calls of tool t.
func (s SecretSlot) BoundTo(t *ToolEntry) bool {
	return !s.Bound || slices.ContainsFunc(s.Tools, func(name string) bool { return grantNames(name, t) })
}

// grantNames reports whether a bind grant's tool name designates t: its TOOL.md id, its command
// path, dotted or not, or its MCP name (the names clihostctl call and intent routes take).
func grantNames(name string, t *ToolEntry) bool {
	return t.Tool != nil && t.Tool.ID == name || t.CommandPath() == name || strings.Join(t.Path, ".") == name || MCPName(t.Path) == name
}

// UngrantedSecret is a secret of b's inventory that t names in a template (${secrets.SLUG} in its
// argv, stdin, or a step's argv, dir, env or stdin) although access.bind does not grant it to t
// (false when there is none): such a call would hand t a credential the inventory keeps from it.
func (b *Bundle) UngrantedSecret(t *ToolEntry) (string, bool) {
	for _, pt := range toolTemplates(t.Tool.Runner) {
		for _, e := range pt.tok.Exprs() {
			if s, ok := b.inventorySecret(e); ok && !s.BoundTo(t) {
				return s.Slug, true
			}
		}
	}
	return "", false
}

// inventorySecret is the slot a ${secrets.SLUG} expression names, if SLUG is in the inventory.
func (b *Bundle) inventorySecret(e *TemplateExpr) (SecretSlot, bool) {
	if e.Source != "secrets" {
		return SecretSlot{}, false
	}
	for _, s := range b.Secrets {
		if s.Slug == e.Name() {
			return s, true
		}
	}
	return SecretSlot{}, false
}

// pointedToken is one template of a tool's runner and where it is in TOOL.md.
type pointedToken struct {
	ptr  string
	tok  TemplateToken
	argv bool // an argv entry
}

// toolTemplates lists every template of r: its argv and stdin, each step's argv, dir, env and stdin.
func toolTemplates(r *ToolRunner) []pointedToken {
	if r == nil {
		return nil
	}
	var out []pointedToken
	for i, tok := range r.Parsed {
		out = append(out, pointedToken{JoinPointer("/runner/argv", i), tok, true})
	}
	if r.ParsedStdin != nil {
		out = append(out, pointedToken{"/runner/stdin", *r.ParsedStdin, false})
	}
	for k, st := range r.Steps {
		ptr := JoinPointer("/runner/steps", k)
		for i, tok := range st.Parsed {
			out = append(out, pointedToken{JoinPointer(ptr, "argv", i), tok, true})
		}
		if st.ParsedDir != nil {
			out = append(out, pointedToken{ptr + "/dir", *st.ParsedDir, false})
		}
		for _, name := range slices.Sorted(maps.Keys(st.ParsedEnv)) {
			out = append(out, pointedToken{JoinPointer(ptr, "env", name), st.ParsedEnv[name], false})
		}
		if st.ParsedStdin != nil {
			out = append(out, pointedToken{ptr + "/stdin", *st.ParsedStdin, false})
		}
	}
	return out
}

// inventoryRefRules reports the tool's templates that name a secret of the bundle's inventory where
// clihost refuses the call at run time: in an argv entry (secrets-argv, an error where setup's
// secrets get the secret-in-argv warning, which it replaces), or in a tool access.bind does not
// grant it to (secrets-unbound). It runs once the CLI's and the tools' rules are done (the
// inventory and the tool are both loaded then).
func (j *toolLinter) inventoryRefRules() {
	if len(j.b.Secrets) == 0 || j.entry.Tool == nil {
		return
	}
	for _, pt := range toolTemplates(j.entry.Tool.Runner) {
		for _, e := range pt.tok.Exprs() {
			s, ok := j.b.inventorySecret(e)
			if !ok {
				continue
			}
			if !s.BoundTo(j.entry) {
				j.c.at(pt.ptr, SeverityError, "secrets-unbound", fmt.Sprintf("${secrets.%s} names a secret SECRETS.md's access.bind does not grant to this tool: clihost refuses the call", s.Slug),
					"grant the tool the secret in SECRETS.md (access: { bind: [{ tool: TOOL-ID }] }), or remove the reference")
			}
			if pt.argv {
				pos := j.c.doc.Pos(pt.ptr)
				j.c.semantic = slices.DeleteFunc(j.c.semantic, func(f Finding) bool { return f.Rule == "secret-in-argv" && f.Pos == pos })
				j.c.at(pt.ptr, SeverityError, "secrets-argv", fmt.Sprintf("${secrets.%s}, a secret of the SECRETS.md inventory, is on the command line, where every local user reads it while the CLI runs: clihost refuses the call", s.Slug),
					fmt.Sprintf("the CLI gets it in the variables SECRETS.md binds, or give it on standard input (runner.stdin: \"${secrets.%s}\")", s.Slug))
			}
		}
	}
}

// SecretSlotFor finds the slot a name designates: its slug or one of its environment variables.
func (b *Bundle) SecretSlotFor(name string) (SecretSlot, bool) {
	for _, s := range b.Secrets {
		if s.Slug == name || slices.ContainsFunc(s.Env, func(e SecretEnv) bool { return e.Name == name }) {
			return s, true
		}
	}
	return SecretSlot{}, false
}

// secretsFile is SECRETS.md's frontmatter as clihost reads it.
type secretsFile struct {
	Secrets []secretEntry `yaml:"secrets"`
}

type secretEntry struct {
	Slug        string `yaml:"slug"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Kind        string `yaml:"kind"`
	Backend     string `yaml:"backend"`
	Access      struct {
		Bind []map[string]any `yaml:"bind"`
	} `yaml:"access"`
	Exposures []struct {
		Kind  string `yaml:"kind"`
		Name  string `yaml:"name"`
		Field string `yaml:"field"`
	} `yaml:"exposures"`
	Metadata map[string]any `yaml:"metadata"`
}

// valueFields are the keys AIP-19 forbids in an inventory entry: anything that holds a value.
var valueFields = []string{"value", "plaintext", "ciphertext", "secret", "data", "key", "token"}

var secretEnvPattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// sandboxEnv are the variables the sandbox itself sets for every process (HOME, PATH, the egress
// proxy's): a secret bound to one would either be overwritten or break the sandbox's own wiring.
var sandboxEnv = []string{"HOME", "PATH", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "NODE_USE_ENV_PROXY"}

// ReservedSecretEnv says why a secret may not be bound to the variable name ("" when it may): a
// variable the sandbox sets itself, or one it never passes (RefusedEnv).
func ReservedSecretEnv(name string) string {
	for _, v := range sandboxEnv {
		if strings.EqualFold(v, name) {
			return "the sandbox sets " + v + " itself for every process"
		}
	}
	if why, _, refused := RefusedEnv(name); refused {
		return "clihost never passes it to a program: " + why
	}
	return ""
}

// secretsRules reads and checks the inventory auth.ref points at and fills Bundle.Secrets.
func (l *linter) secretsRules() {
	a := l.cli.Auth
	if a == nil || !l.c.doc.Has("/auth/ref") {
		return
	}
	ref := a.Ref
	switch {
	case strings.Contains(ref, "://"):
		l.c.at("/auth/ref", SeverityError, "secrets-ref-remote", fmt.Sprintf("auth.ref %q is a URL: clihost reads SECRETS.md only from the bundle folder, so none of its secrets would reach the CLI", ref),
			"ship the inventory in the bundle: auth: { ref: ./SECRETS.md }")
		return
	case l.c.fromRule["/auth/ref"]:
		return // bundle-file-outside said why it is not read
	case ref == "" || path.IsAbs(ref) || !fs.ValidPath(path.Clean(ref)):
		l.c.at("/auth/ref", SeverityError, "secrets-ref-escapes", fmt.Sprintf("auth.ref %q leaves the bundle folder", ref), "the inventory lives inside the bundle, e.g. auth: { ref: ./SECRETS.md }")
		return
	}
	rel := path.Clean(ref)
	data, err := l.readBundleFile(rel)
	if err != nil {
		l.c.at("/auth/ref", SeverityError, "secrets-ref-missing", fmt.Sprintf("auth.ref %q cannot be read: %v", ref, unwrapPathError(err)),
			"create the SECRETS.md inventory (AIP-19) next to CLI.md, or remove auth.ref")
		return
	}
	display := l.opts.display(path.Join(path.Dir(l.b.fsPath), rel))
	doc, problems := loadDocument(display, data)
	sc := newCollector(doc)
	sc.semantic = problems
	if doc.Root != nil {
		l.b.Secrets = inventoryRules(sc, l.cli)
	}
	// Its findings join the bundle's once the tools are loaded (secretBindRules).
	l.secrets = sc
}

// secretBindRules runs once the tools are loaded: a bind grant that names no tool of the bundle
// would inject the secret into no call, and never ask for it when it is required. It then hands
// the inventory's findings to the bundle.
func (l *linter) secretBindRules() {
	sc := l.secrets
	if sc == nil {
		return
	}
	for _, s := range l.b.Secrets {
		for i, name := range s.Tools {
			if !slices.ContainsFunc(l.b.Tools, func(t *ToolEntry) bool { return grantNames(name, t) }) {
				sc.at(s.toolPtrs[i], SeverityError, "secrets-bind-unknown", fmt.Sprintf("secret %q is bound to tool %q, which is not a tool of this bundle: no call would get it", s.Slug, name),
					"name a tool by its TOOL.md id (e.g. "+l.cli.ID+".pr.list), its command path (\"pr list\") or its MCP name (pr_list); clihostctl tools BUNDLE lists them")
			}
		}
	}
	l.b.Findings = append(l.b.Findings, sc.findings()...)
}

// readBundleFile reads rel (clean, relative to the bundle folder): on disk through a descriptor of
// the folder that no path resolution leaves (symbolic links out of it fail), else from the
// bundle's filesystem.
func (l *linter) readBundleFile(rel string) ([]byte, error) {
	if l.root == "" {
		return readManifest(l.b.fsys, path.Join(path.Dir(l.b.fsPath), rel))
	}
	fsys, err := beneath.Open(l.root)
	if err != nil {
		return nil, err
	}
	return readManifest(fsys, rel)
}

// inventoryRules validates an inventory's frontmatter and returns its slots (none when it has
// errors: a bundle with lint errors is not served anyway).
func inventoryRules(c *collector, cli *CLI) []SecretSlot {
	schema, err := schemas.Secrets()
	if err != nil {
		panic(err) // embedded; TestSecretsSchemaCompiles guarantees it compiles
	}
	var f secretsFile
	c.doc.decode(&f)
	for i := range f.Secrets {
		for _, k := range valueFields {
			if ptr := JoinPointer("/secrets", i, k); c.doc.Has(ptr) {
				c.atKey(ptr, SeverityError, "secrets-value", fmt.Sprintf("secret %q holds a %s: SECRETS.md declares secrets, it never holds their values (AIP-19)", f.Secrets[i].Slug, k),
					"remove it and set the value in the host's store: clihostctl secret set BUNDLE NAME")
			}
		}
	}
	c.schema(schema)
	// The schema's "not" (value fields) is reported by secrets-value, with the field's name.
	c.schemaFs = slices.DeleteFunc(c.schemaFs, func(p pointed) bool { return p.f.Rule == "schema-not" })
	slots := make([]SecretSlot, 0, len(f.Secrets))
	for i, e := range f.Secrets {
		slots = append(slots, slotRules(c, JoinPointer("/secrets", i), e))
	}
	envCollisions(c, cli, slots)
	oauthStepSlots(c, cli, f.Secrets)
	return slots
}

// oauthStepSlots checks the slots an oauth setup step fills: it stores the bare access token (the
// refresh token stays sealed), which a slot of kind oauth exposes as accessToken; a keypair or
// json slot, or another field of an oauth one, would refuse every call.
func oauthStepSlots(c *collector, cli *CLI, entries []secretEntry) {
	for i, e := range entries {
		if !slices.ContainsFunc(cli.Setup, func(st SetupStep) bool { return st.Kind == "oauth" && st.SecretSlug == e.Slug }) {
			continue
		}
		ptr := JoinPointer("/secrets", i)
		switch e.Kind {
		case "keypair", "json":
			c.at(ptr+"/kind", SeverityError, "secrets-oauth-step", fmt.Sprintf("secret %q is filled by an oauth setup step, which stores an access token, not a %s value", e.Slug, e.Kind),
				"declare it kind: oauth (exposed as field accessToken) or leave kind out (opaque)")
		case "oauth":
			for j, x := range e.Exposures {
				if x.Kind == "env" && x.Field != "" && x.Field != "accessToken" {
					c.at(JoinPointer(ptr, "exposures", j, "field"), SeverityError, "secrets-oauth-step", fmt.Sprintf("secret %q is filled by an oauth setup step, which hands the CLI its access token only, not %q", e.Slug, x.Field),
						"expose field: accessToken; the refresh token stays in clihost's store, which refreshes the access token itself")
				}
			}
		}
	}
}

// slotRules checks one entry and turns it into a slot.
func slotRules(c *collector, ptr string, e secretEntry) SecretSlot {
	s := SecretSlot{Slug: e.Slug, Name: e.Name, Description: e.Description, Kind: e.Kind, Required: true}
	if s.Kind == "" {
		s.Kind = "opaque"
	}
	if e.Backend != "" {
		c.at(ptr+"/backend", SeverityWarning, "secrets-backend-ignored", fmt.Sprintf("backend %q is not read: clihost resolves %q from its own encrypted store", e.Backend, e.Slug),
			"drop backend; the operator sets the value with clihostctl secret set")
	}
	if r, ok := e.Metadata["required"]; ok {
		b, isBool := r.(bool)
		if !isBool {
			c.at(ptr+"/metadata/required", SeverityError, "secrets-required", "metadata.required is not a boolean", "write required: false for a secret the CLI can do without")
		}
		s.Required = !isBool || b
	}
	for j, x := range e.Exposures {
		switch x.Kind {
		case "env":
			s.Env = append(s.Env, SecretEnv{Name: x.Name, Field: x.Field})
		default:
			c.at(JoinPointer(ptr, "exposures", j, "kind"), SeverityWarning, "secrets-exposure-unsupported",
				fmt.Sprintf("exposure kind %q is not honoured by clihost: only env exposures reach the CLI", x.Kind), "expose the secret as an environment variable: { kind: env, name: NAME, field: value }")
		}
	}
	if len(s.Env) == 0 {
		s.Env = metadataEnv(c, ptr, e)
	}
	for _, env := range s.Env {
		if !secretEnvPattern.MatchString(env.Name) {
			c.at(ptr, SeverityError, "secrets-env-name", fmt.Sprintf("secret %q is bound to %q, which is not an environment variable name", e.Slug, env.Name), "use upper-case letters, digits and _, e.g. GH_TOKEN")
		} else if why := ReservedSecretEnv(env.Name); why != "" {
			c.at(ptr, SeverityError, "secrets-env-reserved", fmt.Sprintf("secret %q is bound to %s, which it may not be: %s", e.Slug, env.Name, why), "bind the secret to the variable the CLI reads its credential from, e.g. GH_TOKEN")
		}
	}
	s.Bound, s.Tools, s.toolPtrs = bindGrants(c, ptr, e)
	accessIgnored(c, ptr, e)
	return s
}

// metadataEnv is the variables of AIP-19's env binding: metadata.bindings.env (one name or a
// list), else the
// convention (STRIPE_API_KEY for stripe-api-key; the part after a namespace's slash).
func metadataEnv(c *collector, ptr string, e secretEntry) []SecretEnv {
	if bindings, ok := e.Metadata["bindings"].(map[string]any); ok && bindings["env"] != nil {
		if name, ok := bindings["env"].(string); ok {
			return []SecretEnv{{Name: name}}
		}
		list, ok := bindings["env"].([]any)
		if !ok {
			c.at(JoinPointer(ptr, "metadata", "bindings", "env"), SeverityError, "secrets-env-name", "metadata.bindings.env is neither a variable name nor a list of them", "list variable names, e.g. [GH_TOKEN, GITHUB_TOKEN]")
			return nil
		}
		var out []SecretEnv
		for i, v := range list {
			name, isString := v.(string)
			if !isString {
				c.at(JoinPointer(ptr, "metadata", "bindings", "env", i), SeverityError, "secrets-env-name", "metadata.bindings.env lists a value that is not a string", "list variable names, e.g. [GH_TOKEN, GITHUB_TOKEN]")
				continue
			}
			out = append(out, SecretEnv{Name: name})
		}
		return out
	}
	base := e.Slug[strings.LastIndexByte(e.Slug, '/')+1:]
	return []SecretEnv{{Name: strings.ToUpper(strings.ReplaceAll(base, "-", "_"))}}
}

// bindGrants reads access.bind: the tool entries limit the secret to those tools; entries of
// other kinds (role, userId, cap, workflow) are ignored, as AIP-19 asks of hosts that do not
// support them, and grant nothing.
func bindGrants(c *collector, ptr string, e secretEntry) (bool, []string, []string) {
	if len(e.Access.Bind) == 0 {
		return false, nil, nil
	}
	var tools, ptrs []string
	for i, g := range e.Access.Bind {
		if t, ok := g["tool"].(string); ok {
			tools = append(tools, t)
			ptrs = append(ptrs, JoinPointer(ptr, "access", "bind", i, "tool"))
			continue
		}
		c.at(JoinPointer(ptr, "access", "bind", i), SeverityWarning, "secrets-access-unsupported",
			"this bind grant is not a tool: clihost ignores it, so it grants nothing", "grant the secret to the tools that need it: bind: [{ tool: TOOL-ID }]")
	}
	return true, tools, ptrs
}

// accessIgnored warns about AIP-19's reveal and rotate grants: clihost injects values by
// access.bind alone and has no reveal or rotate operation, so they grant and limit nothing; an
// author who meant reveal: [{ tool: X }] to keep the secret from other tools learns that without
// a bind list every tool gets it.
func accessIgnored(c *collector, ptr string, e secretEntry) {
	for _, op := range []string{"reveal", "rotate"} {
		p := JoinPointer(ptr, "access", op)
		if !c.doc.Has(p) {
			continue
		}
		hint := "grant the secret to the tools that need it: access: { bind: [{ tool: TOOL-ID }] }"
		if len(e.Access.Bind) == 0 {
			hint = "without access.bind every tool of the bundle gets this secret; " + hint
		}
		c.atKey(p, SeverityWarning, "secrets-access-unsupported", fmt.Sprintf("access.%s is not acted on: clihost injects a secret into calls by access.bind only", op), hint)
	}
}

// envCollisions reports a variable bound by two slots, or set by the sandbox's env.set or a setup
// step's persist.env as well: which value the CLI sees would depend on the order they are applied.
func envCollisions(c *collector, cli *CLI, slots []SecretSlot) {
	seenSlug := map[string]bool{}
	seenEnv := map[string]string{}
	for i, s := range slots {
		ptr := JoinPointer("/secrets", i)
		if seenSlug[s.Slug] {
			c.at(ptr+"/slug", SeverityError, "secrets-slug-duplicate", fmt.Sprintf("slug %q is declared twice", s.Slug), "slugs are unique within the inventory (AIP-19); merge the entries")
		}
		seenSlug[s.Slug] = true
		for _, e := range s.Env {
			if other, ok := seenEnv[e.Name]; ok && other != s.Slug {
				c.at(ptr, SeverityError, "secrets-env-duplicate", fmt.Sprintf("%s is bound to both %q and %q", e.Name, other, s.Slug), "bind each variable to one secret")
			}
			seenEnv[e.Name] = s.Slug
			if other := otherSetter(cli, e.Name); other != "" {
				c.at(ptr, SeverityError, "secrets-env-duplicate", fmt.Sprintf("%s is bound to %q and also set by %s", e.Name, s.Slug, other), "let one of them set the variable")
			}
		}
	}
}

// otherSetter names what else in CLI.md sets the variable name ("" when nothing does).
func otherSetter(cli *CLI, name string) string {
	if e := cli.Sandbox.Env; e != nil {
		if _, ok := e.Set[name]; ok {
			return "sandbox.env.set"
		}
	}
	for _, st := range cli.Setup {
		if st.Persist != nil && st.Persist.Env == name {
			return fmt.Sprintf("setup step %q (persist.env)", st.ID)
		}
	}
	return ""
}
