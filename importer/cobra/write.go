package cobra

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/clihost/clihost/manifest"
)

type cliDoc struct {
	Name         string              `yaml:"name"`
	ID           string              `yaml:"id"`
	Description  string              `yaml:"description"`
	Version      string              `yaml:"version"`
	Bin          string              `yaml:"bin"`
	Install      []map[string]string `yaml:"install"`
	VersionCheck map[string]any      `yaml:"version_check"`
	Sandbox      sandboxDoc          `yaml:"sandbox"`
	Output       map[string]any      `yaml:"output"`
	Commands     *yaml.Node          `yaml:"commands"`
	Tags         []string            `yaml:"tags"`
	Metadata     map[string]any      `yaml:"metadata"`
}

type sandboxDoc struct {
	Network map[string]any `yaml:"network"`
	FS      map[string]any `yaml:"fs"`
	Exec    map[string]any `yaml:"exec"`
	Env     map[string]any `yaml:"env"`
}

type toolDoc struct {
	Name        string         `yaml:"name"`
	ID          string         `yaml:"id"`
	Description string         `yaml:"description"`
	Version     string         `yaml:"version"`
	Inputs      map[string]any `yaml:"inputs"`
	Outputs     map[string]any `yaml:"outputs"`
	Idempotent  bool           `yaml:"idempotent"`
	RiskLevel   int            `yaml:"risk_level"`
	Mutates     []string       `yaml:"mutates"`
	TimeoutMS   int            `yaml:"timeout_ms"`
	Tags        []string       `yaml:"tags"`
	Runner      map[string]any `yaml:"runner"`
}

// Write writes the bundle into dir: dir/CLI.md and dir/tools/NAME/TOOL.md, one per tool. Existing
// files with those names are replaced; nothing else in dir is touched.
func (b *Bundle) Write(dir string) error {
	names := b.toolDirs()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cli, err := b.cliMD(names)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "CLI.md"), cli, 0o644); err != nil {
		return err
	}
	for _, t := range b.Tools {
		md, err := b.toolMD(t)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, "tools", names[t], "TOOL.md")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, md, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// toolDirs names each tool's folder after its command path (remote-add), unique.
func (b *Bundle) toolDirs() map[*Tool]string {
	out := map[*Tool]string{}
	used := map[string]bool{}
	for _, t := range b.Tools {
		base := strings.Trim(idCleaner.ReplaceAllString(strings.ToLower(strings.Join(t.Path, "-")), "-"), "-")
		if base == "" {
			base = b.ID
		}
		name := base
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		used[name] = true
		out[t] = name
	}
	return out
}

// keyPath is a tool's path in the commands tree: its command path, or the program's name for a
// program without subcommands.
func (b *Bundle) keyPath(t *Tool) []string {
	if len(t.Path) == 0 {
		return []string{b.Root}
	}
	return t.Path
}

var toolIDCleaner = regexp.MustCompile(`[^a-z0-9.-]+`)

func (b *Bundle) toolID(t *Tool) string {
	id := b.ID + "." + strings.Join(b.keyPath(t), ".")
	id = strings.Trim(toolIDCleaner.ReplaceAllString(strings.ToLower(id), "-"), "-.")
	if len(id) > 80 {
		id = strings.Trim(id[:80], "-.")
	}
	return id
}

func (b *Bundle) cliMD(dirs map[*Tool]string) ([]byte, error) {
	install := make([]map[string]string, 0, len(b.Install))
	for _, in := range b.Install {
		install = append(install, map[string]string{"method": in.Method, "package": in.Package})
	}
	desc := b.Description
	if desc == "" {
		desc = fmt.Sprintf("The %s command-line program.", b.Root)
	}
	desc = clip(desc+fmt.Sprintf(" (Imported from %s %s by clihostctl import cobra: one tool per runnable command.)", b.Root, b.Version), 2000)
	o := b.opts
	write := []string{}
	if o.WriteWorkspace {
		write = []string{"./**"}
	}
	write = append(write, o.Write...)
	read := append([]string{"./**"}, o.Read...)
	pass := append([]string{}, o.EnvPass...) // clihost sets HOME to the home ~ stands for
	if len(o.Spawn) > 0 && !slices.Contains(pass, "PATH") {
		pass = append(pass, "PATH")
	}
	exec := map[string]any{"allow": len(o.Spawn) > 0}
	if len(o.Spawn) > 0 {
		exec["spawn"] = o.Spawn
	}
	egress := o.Egress
	if egress == nil {
		egress = []string{}
	}
	output := map[string]any{"default_format": "text", "stream": "stdout", "error_stream": "stderr"}
	if b.JSONFlag != "" {
		output["json_flag"] = b.JSONFlag
		if len(b.JSONFlagArgs) > 0 {
			output["json_flag_args"] = b.JSONFlagArgs
		}
	}
	doc := cliDoc{
		Name: clip(b.Name, 80), ID: b.ID, Description: desc, Version: "1.0.0", Bin: b.Bin, Install: install,
		VersionCheck: map[string]any{"cmd": b.VersionCmd, "parse": b.VersionParse, "range": "^" + padVersion(b.Version), "timeout_ms": 5000},
		Sandbox: sandboxDoc{
			Network: map[string]any{"egress": egress},
			FS:      map[string]any{"read": read, "write": write},
			Exec:    exec,
			Env:     map[string]any{"pass": pass, "set": map[string]string{"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat"}},
		},
		Output:   output,
		Commands: b.commandTree(dirs),
		Tags:     []string{"imported", "cobra"},
		Metadata: map[string]any{"clihost.import": map[string]any{"from": "cobra", "program": b.Root, "version": b.Version}},
	}
	var body strings.Builder
	fmt.Fprintf(&body, "## When to reach for this CLI\n\n%s\n\n", desc)
	fmt.Fprintf(&body, "## Gotchas\n\n")
	fmt.Fprintf(&body, "- This bundle was generated from `%s --help` and `%s __complete` (%s %s). Review the\n"+
		"  risk levels, the sandbox and the descriptions before you serve it.\n", b.Root, b.Root, b.Root, b.Version)
	fmt.Fprintf(&body, "- Sandbox: the workspace is read-only")
	if o.WriteWorkspace {
		fmt.Fprintf(&body, " (writable: --write-workspace)")
	}
	if len(o.Read)+len(o.Write) > 0 {
		fmt.Fprintf(&body, ", it may also read %v and write %v", o.Read, o.Write)
	}
	if len(o.Egress) == 0 {
		fmt.Fprintf(&body, ", there is no network")
	} else {
		fmt.Fprintf(&body, ", the network reaches %s", strings.Join(o.Egress, ", "))
	}
	if len(o.Spawn) == 0 {
		fmt.Fprintf(&body, " and the program may start no other program.\n")
	} else {
		fmt.Fprintf(&body, " and the program may start %s.\n", strings.Join(o.Spawn, ", "))
	}
	fmt.Fprintf(&body, "- Defaults are told in each input's description, not declared: clihost would pass a declared\n  default on every call.\n")
	for _, n := range b.Notes {
		fmt.Fprintf(&body, "- %s\n", n)
	}
	fmt.Fprintf(&body, "\n## Reference\n\n")
	for _, t := range b.Tools {
		fmt.Fprintf(&body, "- `%s`: %s\n", t.Usage, t.Short)
	}
	return manifest.RenderFile(doc, body.String())
}

func (b *Bundle) commandTree(dirs map[*Tool]string) *yaml.Node {
	root := &yaml.Node{Kind: yaml.MappingNode}
	tools := append([]*Tool(nil), b.Tools...)
	sort.SliceStable(tools, func(i, j int) bool {
		return strings.Join(b.keyPath(tools[i]), "\x00") < strings.Join(b.keyPath(tools[j]), "\x00")
	})
	for _, t := range tools {
		node := root
		path := b.keyPath(t)
		for i, word := range path {
			var child *yaml.Node
			for k := 0; k+1 < len(node.Content); k += 2 {
				if node.Content[k].Value == word {
					child = node.Content[k+1]
				}
			}
			last := i == len(path)-1
			if child == nil {
				child = &yaml.Node{Kind: yaml.MappingNode}
				if last {
					child = &yaml.Node{Kind: yaml.ScalarNode, Value: "./tools/" + dirs[t] + "/TOOL.md"}
				}
				node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: word}, child)
			}
			node = child
		}
	}
	return root
}

func (b *Bundle) toolMD(t *Tool) ([]byte, error) {
	cmd := strings.TrimSpace(b.Root + " " + strings.Join(t.Path, " "))
	props := map[string]any{}
	var required []string
	argv := append([]string(nil), t.Path...)
	for _, f := range t.Flags {
		p := FlagProperty(f)
		props[f.Name] = p.Schema
		argv = append(argv, p.Argv)
		if f.Required {
			required = append(required, f.Name)
		}
	}
	dash := false
	for _, a := range t.Args {
		if a.AfterDash && !dash {
			argv = append(argv, "--")
			dash = true
		}
		p := ArgProperty(a, cmd)
		props[a.Name] = p.Schema
		argv = append(argv, p.Argv)
		if a.Required {
			required = append(required, a.Name)
		}
	}
	if required == nil {
		required = []string{}
	}
	desc := t.Description
	if desc == "" {
		desc = "Runs " + cmd + "."
	}
	desc = clip(cmd+": "+desc, 2000)
	risk, idem := risk(t.Path)
	outputs := map[string]any{"type": "string"}
	format := "text"
	if t.JSON {
		outputs = map[string]any{"description": "the JSON the command prints with " + strings.Join(append([]string{b.JSONFlag}, b.JSONFlagArgs...), " ")}
		format = "json"
	}
	doc := toolDoc{
		Name: clip(cmd, 80), ID: b.toolID(t), Description: desc, Version: "1.0.0",
		Inputs:     map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": required},
		Outputs:    outputs,
		Idempotent: idem, RiskLevel: risk, Mutates: []string{}, TimeoutMS: 60000, Tags: []string{"imported"},
		Runner: map[string]any{"cli": "../../CLI.md", "argv": argv, "output": map[string]any{"format": format}},
	}
	body := fmt.Sprintf("Usage: `%s`\n\nImported from `%s --help` (%s %s). Input properties are named after the long\nflags and the usage line's arguments.\n", t.Usage, cmd, b.Root, b.Version)
	return manifest.RenderFile(doc, body)
}

var (
	readVerbs    = map[string]bool{"get": true, "list": true, "ls": true, "view": true, "show": true, "describe": true, "status": true, "version": true, "info": true, "search": true, "explain": true, "logs": true, "log": true, "top": true, "diff": true, "print": true, "cat": true, "history": true, "events": true, "whoami": true, "check": true, "inspect": true, "current-context": true, "api-resources": true, "api-versions": true, "cluster-info": true, "help": true}
	destroyVerbs = map[string]bool{"delete": true, "remove": true, "rm": true, "destroy": true, "purge": true, "prune": true, "drain": true, "uninstall": true, "reset": true, "wipe": true, "kill": true}
)

// risk guesses a tool's risk_level and idempotence from its last command word: read verbs (get,
// list, view, …) are 0 and idempotent, destroying verbs (delete, remove, …) 3, anything else 1.
func risk(path []string) (int, bool) {
	if len(path) == 0 {
		return 1, false
	}
	w := strings.ToLower(path[len(path)-1])
	verb, _, _ := strings.Cut(w, "-")
	switch {
	case readVerbs[w] || readVerbs[verb]:
		return 0, true
	case destroyVerbs[w] || destroyVerbs[verb]:
		return 3, false
	}
	return 1, false
}

// padVersion makes "1.6" "1.6.0" for the caret range.
func padVersion(v string) string {
	if strings.Count(v, ".") == 1 {
		return v + ".0"
	}
	return v
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}
