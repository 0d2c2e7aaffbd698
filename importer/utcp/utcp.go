// Package utcp imports a UTCP manual's CLI tools (call_template_type "cli") as a clihost bundle
// that runs without a shell.
//
// UTCP's reference plugins join a tool's command strings into one bash script. Here each command
// string is parsed with a real shell parser (mvdan.cc/sh/v3/syntax) and becomes one step of the
// TOOL.md extension runner.steps, with its own argv:
//
//   - UTCP_ARG_name_UTCP_END becomes ${input.name}, always inside one argument, never split or
//     globbed; every placeholder is added to the tool's required inputs, so a missing argument is
//     input_invalid (UTCP substitutes the text MISSING_ARG_name);
//   - $CMD_N_OUTPUT (or ${CMD_N_OUTPUT}, quoted or not) becomes ${steps.M.output}, M being the
//     step command N became: one argument, or part of one, never split into words;
//   - cd DIR changes the dir of the steps after it (relative to the workspace; an absolute literal
//     is refused); export NAME=value and NAME=value prefixes become step env;
//   - working_dir (relative only), env_vars (literal values, or ${NAME} of the same name, which
//     becomes an env.pass entry), inherit_env_vars and append_to_final_output keep their meaning.
//
// A command using what only a shell can do (pipes, redirections, &&, ||, ; or newline lists,
// command, arithmetic or other parameter substitutions, globs, brace or tilde expansion, compound
// commands, builtins without a program, or a shell program itself) makes its tool refused, with a
// Refusal naming the tool, the construct and its column; the other tools are imported.
//
// The bundle's bin is the program of the first step of the first imported tool; every other
// program is listed in sandbox.exec.spawn (with exec.allow: true) and named by the steps' bin.
package utcp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clihost/clihost/importer/pathinput"
	"github.com/clihost/clihost/manifest"
)

// DefaultPass is what UTCP passes from the host environment when a call template has no
// inherit_env_vars (its Unix allowlist without SHELL, since no shell runs, and TERM, which clihost
// sets to dumb).
var DefaultPass = []string{"HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "TZ", "USER"}

// Options adjust an import.
type Options struct {
	ID     string   // the bundle's id (2–64 of a-z 0-9 -); required
	Name   string   // its display name; default the id
	Egress []string // hosts the tools may reach (sandbox.network.egress); default none
}

// Refusal is a tool that cannot run without a shell, or cannot be expressed in a bundle.
type Refusal struct {
	Tool      string // the UTCP tool's name
	Command   int    // the index of the offending command string; -1 for the call template itself
	Text      string // the command string
	Line      int    // 1-based line in the command string (0: no position)
	Column    int    // 1-based byte column in that line (0: no position)
	Construct string // what cannot be honoured, e.g. "a pipe (|)"
	// Reason says why, when it is not that the construct needs a shell.
	Reason string
}

func (r *Refusal) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool %q refused: ", r.Tool)
	if r.Command >= 0 {
		fmt.Fprintf(&b, "command %d %q", r.Command, r.Text)
		switch {
		case r.Line > 1:
			fmt.Fprintf(&b, ", line %d column %d", r.Line, r.Column)
		case r.Column > 0:
			fmt.Fprintf(&b, ", column %d", r.Column)
		}
		b.WriteString(": ")
	}
	b.WriteString(r.Construct)
	switch {
	case r.Reason != "":
		b.WriteString(": " + r.Reason)
	case r.Command >= 0:
		b.WriteString(" needs a shell, and clihost runs commands without one")
	}
	return b.String()
}

// Bundle is an imported manual: the files to write and what happened to each tool.
type Bundle struct {
	ID      string
	Files   map[string][]byte // slash paths relative to the bundle folder → content
	Tools   []string          // the UTCP tools imported, in manual order
	Refused []*Refusal        // the CLI tools that were not
	Skipped []string          // tools whose call template is not "cli", as "name (type)"
}

// manual is the part of a UTCP manual the importer reads.
type manual struct {
	UTCPVersion   string     `json:"utcp_version"`
	ManualVersion string     `json:"manual_version"`
	Tools         []utcpTool `json:"tools"`
}

type utcpTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Inputs       json.RawMessage `json:"inputs"`
	Outputs      json.RawMessage `json:"outputs"`
	Tags         []string        `json:"tags"`
	CallTemplate json.RawMessage `json:"tool_call_template"`
	Provider     json.RawMessage `json:"tool_provider"` // the pre-1.0 name
}

type callTemplate struct {
	Type         string `json:"call_template_type"`
	ProviderType string `json:"provider_type"`
	Commands     []struct {
		Command string `json:"command"`
		Append  *bool  `json:"append_to_final_output"`
	} `json:"commands"`
	WorkingDir     *string           `json:"working_dir"`
	EnvVars        map[string]string `json:"env_vars"`
	InheritEnvVars *[]string         `json:"inherit_env_vars"`
}

// converted is one tool ready to write.
type converted struct {
	src      utcpTool
	key      string // the commands key and folder name
	steps    []manifest.ToolStep
	programs []string // per step
	pass     []string // env.pass for this tool
	inputs   map[string]bool
	// schemas are the manual's inputs and outputs (empty when it has none)
	inSchema, outSchema *jsonschema.Schema
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9\-]{1,63}$`)

// Convert imports the CLI tools of a UTCP manual (JSON).
func Convert(data []byte, o Options) (*Bundle, error) {
	if !idPattern.MatchString(o.ID) {
		return nil, fmt.Errorf("bundle id %q: use 2–64 of a-z 0-9 -, starting with a letter or digit", o.ID)
	}
	var m manual
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("the manual is not UTCP JSON: %w", err)
	}
	if len(m.Tools) == 0 {
		return nil, errors.New("the manual has no tools")
	}
	out := &Bundle{ID: o.ID, Files: map[string][]byte{}}
	var tools []*converted
	keys := map[string]bool{}
	for _, t := range m.Tools {
		raw := t.CallTemplate
		if len(raw) == 0 {
			raw = t.Provider
		}
		var ct callTemplate
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &ct); err != nil {
				return nil, fmt.Errorf("tool %q: its call template does not parse: %w", t.Name, err)
			}
		}
		kind := ct.Type
		if kind == "" {
			kind = ct.ProviderType
		}
		if kind != "cli" {
			out.Skipped = append(out.Skipped, fmt.Sprintf("%s (%s)", t.Name, cmp.Or(kind, "no call template")))
			continue
		}
		c, r := convertTool(t, ct)
		if r != nil {
			out.Refused = append(out.Refused, r)
			continue
		}
		c.key = uniqueKey(toolKey(t.Name), keys)
		tools = append(tools, c)
		out.Tools = append(out.Tools, t.Name)
	}
	if len(tools) == 0 {
		return out, errors.New("no tool of the manual could be imported")
	}
	if err := out.render(tools, m, o); err != nil {
		return nil, err
	}
	return out, nil
}

// convertTool translates one CLI tool's commands into steps.
func convertTool(t utcpTool, ct callTemplate) (*converted, *Refusal) {
	tplRefusal := func(what string) *Refusal { return &Refusal{Tool: t.Name, Command: -1, Construct: what} }
	outside := "steps run inside the caller's workspace"
	if len(ct.Commands) == 0 {
		return nil, tplRefusal("the call template has no commands")
	}
	c := &converted{src: t, inputs: map[string]bool{}}
	var err error
	if c.inSchema, err = parseSchema(t.Inputs); err != nil {
		return nil, tplRefusal("its inputs are not a JSON Schema: " + err.Error())
	}
	if c.outSchema, err = parseSchema(t.Outputs); err != nil {
		return nil, tplRefusal("its outputs are not a JSON Schema: " + err.Error())
	}
	dir := ""
	if ct.WorkingDir != nil && *ct.WorkingDir != "" {
		wd := path.Clean(*ct.WorkingDir)
		if path.IsAbs(wd) || wd == ".." || strings.HasPrefix(wd, "../") {
			return nil, tplRefusal(fmt.Sprintf("working_dir %q is outside the workspace, where clihost runs every step; make it relative to the workspace", *ct.WorkingDir))
		}
		if wd != "." {
			dir = strings.ReplaceAll(wd, "${", "$${")
		}
	}
	env := map[string]string{}
	pass := slices.Clone(DefaultPass)
	if ct.InheritEnvVars != nil {
		pass = slices.Clone(*ct.InheritEnvVars)
	}
	for _, k := range slices.Sorted(maps.Keys(ct.EnvVars)) {
		v := ct.EnvVars[k]
		if ref, ok := hostVariable(v); ok {
			if ref != k {
				return nil, tplRefusal(fmt.Sprintf("env_vars %s takes the value of the UTCP variable %s; clihost can only pass a host variable under its own name", k, ref))
			}
			pass = append(pass, k)
			continue
		}
		if strings.Contains(v, "${") || strings.Contains(v, "$") && hostVarLike.MatchString(v) {
			return nil, tplRefusal(fmt.Sprintf("env_vars %s mixes text with a UTCP variable (%s)", k, v))
		}
		env[k] = strings.ReplaceAll(v, "${", "$${")
	}
	slices.Sort(pass)
	c.pass = slices.Compact(pass)

	tr := &translator{tool: t.Name, inputs: c.inputs}
	exported := map[string]string{}
	for i, cmd := range ct.Commands {
		tr.index, tr.text = i, cmd.Command
		cm, r := tr.translate()
		if r != nil {
			return nil, r
		}
		switch {
		case cm.isCD:
			dir = joinDir(dir, cm.cd)
			if d := strings.ReplaceAll(dir, "$${", "${"); !strings.Contains(dir, "${") && (d == ".." || strings.HasPrefix(d, "../")) {
				return nil, &Refusal{Tool: t.Name, Command: i, Text: cmd.Command, Construct: fmt.Sprintf("cd to %s, outside the workspace", d), Reason: outside}
			}
			tr.stepOf = append(tr.stepOf, -1)
			continue
		case cm.export != nil:
			for k, v := range cm.export {
				exported[k] = v
			}
			tr.stepOf = append(tr.stepOf, -1)
			continue
		}
		s := manifest.ToolStep{Argv: cm.argv, Dir: dir, AppendToFinalOutput: cmd.Append}
		if s.Argv == nil {
			s.Argv = []string{}
		}
		if len(env)+len(exported)+len(cm.env) > 0 {
			s.Env = map[string]string{}
			for _, src := range []map[string]string{env, exported, cm.env} {
				for k, v := range src {
					s.Env[k] = v
				}
			}
		}
		tr.stepOf = append(tr.stepOf, len(c.steps))
		c.steps = append(c.steps, s)
		c.programs = append(c.programs, cm.program)
	}
	if len(c.steps) == 0 {
		return nil, tplRefusal("no command runs a program (only cd or export)")
	}
	// UTCP's default: only the last command appends. A trailing cd or export that UTCP would
	// have "appended" prints nothing, so the last step is left to its own default.
	return c, nil
}

// hostVarLike matches text that uses $NAME.
var hostVarLike = regexp.MustCompile(`\$[A-Za-z_]`)

// wholeVariable matches ${NAME} or $NAME alone.
var wholeVariable = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$|^\$([A-Za-z_][A-Za-z0-9_]*)$`)

// hostVariable reports whether an env_vars value is exactly ${NAME} or $NAME, and NAME.
func hostVariable(v string) (string, bool) {
	if m := wholeVariable.FindStringSubmatch(v); m != nil {
		return m[1] + m[2], true
	}
	return "", false
}

// joinDir appends a cd target (a template) to the current dir (a template, "" for the workspace).
func joinDir(cur, target string) string {
	if cur == "" || target == "" {
		return cmp.Or(target, cur)
	}
	if !strings.Contains(cur, "${") && !strings.Contains(target, "${") {
		return path.Clean(cur + "/" + target)
	}
	return cur + "/" + target
}

var keyChars = regexp.MustCompile(`[^A-Za-z0-9_\-]+`)

// toolKey makes a UTCP tool name a commands key: letters, digits, _ and -.
func toolKey(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 && i < len(name)-1 {
		name = name[i+1:] // "manual.tool" → "tool"
	}
	k := strings.Trim(keyChars.ReplaceAllString(name, "_"), "_-")
	if k == "" {
		k = "tool"
	}
	return k
}

func uniqueKey(k string, used map[string]bool) string {
	out := k
	for n := 2; used[out]; n++ {
		out = fmt.Sprintf("%s-%d", k, n)
	}
	used[out] = true
	return out
}

// Write writes the bundle's files under dir, creating it. Existing files are overwritten; nothing
// else in dir is touched.
func (b *Bundle) Write(dir string) error {
	for _, name := range slices.Sorted(maps.Keys(b.Files)) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b.Files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render writes CLI.md and the TOOL.md files.
func (b *Bundle) render(tools []*converted, m manual, o Options) error {
	bin := tools[0].programs[0]
	var spawn, passAll []string
	for _, t := range tools {
		for i, p := range t.programs {
			if p != bin {
				spawn = append(spawn, p)
				t.steps[i].Bin = p
			}
		}
		passAll = append(passAll, t.pass...)
	}
	slices.Sort(spawn)
	spawn = slices.Compact(spawn)
	slices.Sort(passAll)
	passAll = slices.Compact(passAll)

	var commands manifest.CommandTree
	for _, t := range slices.SortedFunc(slices.Values(tools), func(x, y *converted) int { return strings.Compare(x.key, y.key) }) {
		commands = append(commands, &manifest.Command{Name: t.key, Ref: "./tools/" + t.key + "/TOOL.md"})
	}
	for _, t := range tools {
		doc, err := toolDoc(t, b.ID, passAll)
		if err != nil {
			return err
		}
		b.Files["tools/"+t.key+"/TOOL.md"] = doc
	}
	name := cmp.Or(o.Name, o.ID)
	cli := &manifest.CLI{
		Name: name, ID: o.ID, Version: "1.0.0", Bin: bin,
		Description:  fmt.Sprintf("Tools imported from a UTCP manual (%d CLI tools), run by clihost without a shell: %s.", len(tools), strings.Join(b.Tools, ", ")),
		Install:      []manifest.InstallMethod{{Method: manifest.MethodApt, Package: path.Base(bin)}},
		VersionCheck: manifest.VersionCheck{Cmd: path.Base(bin) + " --version", Parse: `(\d+(?:\.\d+)+)`},
		Sandbox: manifest.Sandbox{
			Network: &manifest.Network{Egress: append([]string{}, o.Egress...)},
			FS:      &manifest.FS{Read: []string{"./**"}, Write: []string{"./**"}},
			Exec:    &manifest.Exec{Allow: new(len(spawn) > 0), Spawn: spawn},
			Env:     &manifest.Env{Pass: passAll},
		},
		Output:   &manifest.Output{DefaultFormat: "text"},
		Commands: commands,
		Tags:     []string{"utcp"},
		Metadata: map[string]any{"utcp": map[string]string{"utcp_version": m.UTCPVersion, "manual_version": m.ManualVersion}},
	}
	body := fmt.Sprintf(`## Imported from UTCP

Generated by `+"`clihostctl import utcp`"+`. Each UTCP command string is one step of the tool's
`+"`runner.steps`"+`, run without a shell. Review before use:

- `+"`install`"+` guesses the apt package from the bin (%s); correct it.
- `+"`version_check`"+` accepts any version %s prints for `+"`--version`"+`; narrow `+"`range`"+`.
- `+"`sandbox`"+`: the tools may read and write the workspace; list the hosts they need in
  `+"`network.egress`"+` (none are allowed now).
`, path.Base(bin), path.Base(bin))
	if len(b.Refused) > 0 {
		body += "\nTools of the manual that were not imported:\n\n"
		for _, r := range b.Refused {
			body += "- " + r.Error() + "\n"
		}
	}
	doc, err := manifest.RenderFile(cli, body)
	if err != nil {
		return err
	}
	b.Files["CLI.md"] = doc
	return nil
}

// toolDoc renders one TOOL.md.
func toolDoc(t *converted, id string, bundlePass []string) ([]byte, error) {
	inputs := *t.inSchema
	if inputs.Type == "" && inputs.Types == nil {
		inputs.Type = "object"
	}
	props := maps.Clone(inputs.Properties)
	if props == nil {
		props = map[string]*jsonschema.Schema{}
	}
	required := slices.Clone(inputs.Required)
	for _, name := range slices.Sorted(maps.Keys(t.inputs)) {
		if _, ok := props[name]; !ok {
			props[name] = &jsonschema.Schema{Type: "string", Description: "UTCP placeholder UTCP_ARG_" + name + "_UTCP_END (not declared in the manual's inputs)"}
		}
		required = append(required, name)
	}
	for name, ps := range props {
		pathinput.Mark(ps, name)
	}
	inputs.Properties = props
	slices.Sort(required)
	inputs.Required = slices.Compact(required)
	desc := strings.TrimSpace(t.src.Description)
	if desc == "" {
		desc = "UTCP tool " + t.src.Name + "."
	}
	tool := &manifest.Tool{
		Name: t.src.Name, ID: id + "." + strings.ToLower(strings.ReplaceAll(t.key, "_", "-")), Description: desc, Version: "1.0.0",
		RiskLevel: 1, // UTCP says nothing about effects; the steps may write the workspace
		Tags:      t.src.Tags,
		Runner:    &manifest.ToolRunner{CLI: "../../CLI.md", Steps: t.steps},
	}
	var err error
	if tool.Inputs, err = manifest.SchemaValue(&inputs); err != nil {
		return nil, fmt.Errorf("tool %q inputs: %w", t.src.Name, err)
	}
	if tool.Outputs, err = manifest.SchemaValue(t.outSchema); err != nil { // {} (any value) when the manual has none
		return nil, fmt.Errorf("tool %q outputs: %w", t.src.Name, err)
	}
	if !slices.Equal(t.pass, bundlePass) {
		tool.Sandbox = &manifest.Sandbox{Env: &manifest.Env{Pass: append([]string{}, t.pass...)}}
	}
	return manifest.RenderFile(tool, "Imported from UTCP: "+t.src.Name+".\n")
}

// parseSchema reads a JSON Schema of the manual; none (absent or null) is the empty schema.
func parseSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	s := &jsonschema.Schema{}
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return nil, err
	}
	return s, nil
}
