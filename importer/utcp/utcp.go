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

	"gopkg.in/yaml.v3"

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
	Inputs       map[string]any  `json:"inputs"`
	Outputs      map[string]any  `json:"outputs"`
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

// stepOut is one runner.steps entry as written.
type stepOut struct {
	Bin    string            `yaml:"bin,omitempty"`
	Argv   []string          `yaml:"argv"`
	Dir    string            `yaml:"dir,omitempty"`
	Env    map[string]string `yaml:"env,omitempty"`
	Append *bool             `yaml:"append_to_final_output,omitempty"`
}

// converted is one tool ready to write.
type converted struct {
	src      utcpTool
	key      string // the commands key and folder name
	steps    []stepOut
	programs []string // per step
	pass     []string // env.pass for this tool
	inputs   map[string]bool
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
		s := stepOut{Argv: cm.argv, Dir: dir, Append: cmd.Append}
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

	commands := map[string]string{}
	for _, t := range tools {
		commands[t.key] = "./tools/" + t.key + "/TOOL.md"
		doc, err := toolDoc(t, b.ID, passAll)
		if err != nil {
			return err
		}
		b.Files["tools/"+t.key+"/TOOL.md"] = doc
	}
	name := cmp.Or(o.Name, o.ID)
	egress := o.Egress
	if egress == nil {
		egress = []string{}
	}
	exec := map[string]any{"allow": len(spawn) > 0}
	if len(spawn) > 0 {
		exec["spawn"] = spawn
	}
	fm := &frontMatter{Kind: yaml.MappingNode}
	fm.add("name", name)
	fm.add("id", o.ID)
	fm.add("description", fmt.Sprintf("Tools imported from a UTCP manual (%d CLI tools), run by clihost without a shell: %s.", len(tools), strings.Join(b.Tools, ", ")))
	fm.add("version", "1.0.0")
	fm.add("bin", bin)
	fm.add("install", []map[string]string{{"method": "apt", "package": path.Base(bin)}})
	fm.add("version_check", map[string]string{"cmd": path.Base(bin) + " --version", "parse": `(\d+(?:\.\d+)+)`, "range": ""})
	fm.add("sandbox", map[string]any{
		"network": map[string]any{"egress": egress},
		"fs":      map[string]any{"read": []string{"./**"}, "write": []string{"./**"}},
		"exec":    exec,
		"env":     map[string]any{"pass": passAll},
	})
	fm.add("output", map[string]string{"default_format": "text"})
	fm.add("commands", commands)
	fm.add("tags", []string{"utcp"})
	fm.add("metadata", map[string]any{"utcp": map[string]string{"utcp_version": m.UTCPVersion, "manual_version": m.ManualVersion}})
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
	doc, err := manifest.RenderFile((*yaml.Node)(fm), body)
	if err != nil {
		return err
	}
	b.Files["CLI.md"] = doc
	return nil
}

// toolDoc renders one TOOL.md.
func toolDoc(t *converted, id string, bundlePass []string) ([]byte, error) {
	inputs := t.src.Inputs
	if inputs == nil {
		inputs = map[string]any{}
	}
	inputs = cloneMap(inputs)
	if _, ok := inputs["type"]; !ok {
		inputs["type"] = "object"
	}
	props, _ := inputs["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	var required []string
	if req, ok := inputs["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required = append(required, s)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.inputs)) {
		if _, ok := props[name]; !ok {
			props[name] = map[string]any{"type": "string", "description": "UTCP placeholder UTCP_ARG_" + name + "_UTCP_END (not declared in the manual's inputs)"}
		}
		required = append(required, name)
	}
	for name, raw := range props {
		if ps, ok := raw.(map[string]any); ok {
			pathinput.Mark(ps, name)
		}
	}
	inputs["properties"] = props
	slices.Sort(required)
	if required = slices.Compact(required); len(required) > 0 {
		inputs["required"] = required
	}
	desc := strings.TrimSpace(t.src.Description)
	if desc == "" {
		desc = "UTCP tool " + t.src.Name + "."
	}
	fm := &frontMatter{Kind: yaml.MappingNode}
	fm.add("name", t.src.Name)
	fm.add("id", id+"."+strings.ToLower(strings.ReplaceAll(t.key, "_", "-")))
	fm.add("description", desc)
	fm.add("version", "1.0.0")
	fm.add("inputs", inputs)
	outputs := t.src.Outputs
	if outputs == nil {
		outputs = map[string]any{} // any value
	}
	fm.add("outputs", outputs)
	fm.add("risk_level", 1) // UTCP says nothing about effects; the steps may write the workspace
	if len(t.src.Tags) > 0 {
		fm.add("tags", t.src.Tags)
	}
	fm.add("runner", map[string]any{"cli": "../../CLI.md", "steps": t.steps})
	if !slices.Equal(t.pass, bundlePass) {
		pass := t.pass
		if pass == nil {
			pass = []string{}
		}
		fm.add("sandbox", map[string]any{"env": map[string]any{"pass": pass}})
	}
	return manifest.RenderFile((*yaml.Node)(fm), "Imported from UTCP: "+t.src.Name+".\n")
}

func cloneMap(m map[string]any) map[string]any {
	raw, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

// frontMatter is a YAML mapping whose keys keep the order they are added in.
type frontMatter yaml.Node

func (m *frontMatter) add(k string, v any) {
	var n yaml.Node
	_ = n.Encode(v)
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &n)
}
