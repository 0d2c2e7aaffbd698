package cobra

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/clihost/clihost/manifest"
)

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

// toolDirs names each tool's folder after its key path (remote-add; the program's name for the
// program itself), unique.
func (b *Bundle) toolDirs() map[*Tool]string {
	out := map[*Tool]string{}
	used := map[string]bool{}
	for _, t := range b.Tools {
		base := strings.Trim(idCleaner.ReplaceAllString(strings.ToLower(strings.Join(b.keyPath(t), "-")), "-"), "-")
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
	desc := b.Description
	if desc == "" {
		desc = fmt.Sprintf("The %s command-line program.", b.Root)
	}
	desc = clip(desc+fmt.Sprintf(" (Imported from %s %s by clihostctl import cobra: one tool per runnable command.)", b.Root, b.Version), 2000)
	o := b.opts
	doc := &manifest.CLI{
		Name: clip(b.Name, 80), ID: b.ID, Description: desc, Version: "1.0.0", Bin: b.Bin, Install: b.installMethods(),
		VersionCheck: manifest.VersionCheck{Cmd: b.VersionCmd, Parse: b.VersionParse, Range: "^" + padVersion(b.Version), TimeoutMS: 5000},
		Sandbox:      b.sandbox(),
		Output: &manifest.Output{DefaultFormat: "text", Stream: "stdout", ErrorStream: "stderr",
			JSONFlag: b.JSONFlag, JSONFlagArgs: b.JSONFlagArgs},
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

func (b *Bundle) installMethods() []manifest.InstallMethod {
	install := make([]manifest.InstallMethod, 0, len(b.Install))
	for _, in := range b.Install {
		install = append(install, manifest.InstallMethod{Method: in.Method, Package: in.Package})
	}
	return install
}

// sandbox is the strict policy the options loosen: the workspace read-only unless
// --write-workspace, no network, no other programs, no host variables but those passed (clihost
// sets HOME to the home ~ stands for), and PATH when another program may be started.
func (b *Bundle) sandbox() manifest.Sandbox {
	o := b.opts
	write := []string{}
	if o.WriteWorkspace {
		write = []string{"./**"}
	}
	write = append(write, o.Write...)
	pass := append([]string{}, o.EnvPass...)
	if len(o.Spawn) > 0 && !slices.Contains(pass, "PATH") {
		pass = append(pass, "PATH")
	}
	exec := &manifest.Exec{Allow: new(len(o.Spawn) > 0)}
	if len(o.Spawn) > 0 {
		exec.Spawn = o.Spawn
	}
	return manifest.Sandbox{
		Network: &manifest.Network{Egress: append([]string{}, o.Egress...)},
		FS:      &manifest.FS{Read: append([]string{"./**"}, o.Read...), Write: write},
		Exec:    exec,
		Env:     &manifest.Env{Pass: pass, Set: b.envSet()},
	}
}

// envSet is sandbox.env.set: clihost's defaults for a program without a terminal, with the
// --env-set values over them.
func (b *Bundle) envSet() map[string]string {
	set := map[string]string{"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat"}
	for k, v := range b.opts.EnvSet {
		set[k] = v
	}
	return set
}

// commandTree is the commands block: every tool's key path, sorted, each leaf its TOOL.md.
func (b *Bundle) commandTree(dirs map[*Tool]string) manifest.CommandTree {
	var root manifest.CommandTree
	tools := append([]*Tool(nil), b.Tools...)
	sort.SliceStable(tools, func(i, j int) bool {
		return strings.Join(b.keyPath(tools[i]), "\x00") < strings.Join(b.keyPath(tools[j]), "\x00")
	})
	for _, t := range tools {
		level := &root
		path := b.keyPath(t)
		for i, word := range path {
			var child *manifest.Command
			for _, c := range *level {
				if c.Name == word {
					child = c
				}
			}
			if child == nil {
				child = &manifest.Command{Name: word}
				if i == len(path)-1 {
					child.Ref = "./tools/" + dirs[t] + "/TOOL.md"
				} else {
					child.Children = []*manifest.Command{}
				}
				*level = append(*level, child)
			}
			level = (*manifest.CommandTree)(&child.Children)
		}
	}
	return root
}

func (b *Bundle) toolMD(t *Tool) ([]byte, error) {
	cmd := strings.TrimSpace(b.Root + " " + strings.Join(t.Path, " "))
	inputs, argv := b.inputs(t, cmd)
	desc := t.Description
	if desc == "" {
		desc = "Runs " + cmd + "."
	}
	desc = clip(cmd+": "+desc, 2000)
	rk := b.risk(t)
	outputs := &jsonschema.Schema{Type: "string"}
	format := "text"
	if t.JSON {
		outputs = &jsonschema.Schema{Description: "the JSON the command prints with " + strings.Join(append([]string{b.JSONFlag}, b.JSONFlagArgs...), " ")}
		format = "json"
	}
	doc := &manifest.Tool{
		Name: clip(cmd, 80), ID: b.toolID(t), Description: desc, Version: "1.0.0",
		Idempotent: rk.idempotent, RiskLevel: rk.level, TimeoutMS: 60000, Tags: []string{"imported"},
		Mutates: rk.mutates, Approval: rk.approval,
		Runner: &manifest.ToolRunner{CLI: "../../CLI.md", Argv: argv, Output: &manifest.ToolOutput{Format: format}},
	}
	if rk.review != "" {
		doc.Metadata = map[string]any{manifest.ReviewKey: rk.review}
	}
	var err error
	if doc.Inputs, err = manifest.SchemaValue(inputs); err != nil {
		return nil, fmt.Errorf("%s inputs: %w", cmd, err)
	}
	if doc.Outputs, err = manifest.SchemaValue(outputs); err != nil {
		return nil, fmt.Errorf("%s outputs: %w", cmd, err)
	}
	body := fmt.Sprintf("Usage: `%s`\n\nImported from `%s --help` (%s %s). Input properties are named after the long\nflags and the usage line's arguments.\n", t.Usage, cmd, b.Root, b.Version)
	if rk.review != "" {
		body += "\n## Review\n\n" + rk.review + "\nDelete metadata." + manifest.ReviewKey + " once the risk level, approval and the bundle's sandbox are right.\n"
	}
	return manifest.RenderFile(doc, body)
}

// inputs is a tool's inputs schema, one property per flag and positional, and the argv template
// that puts them back on the command line (positionals after the flags, "--" before the first
// that follows it in the usage line).
func (b *Bundle) inputs(t *Tool, cmd string) (*jsonschema.Schema, []string) {
	s := &jsonschema.Schema{Type: "object", AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
		Properties: map[string]*jsonschema.Schema{}}
	argv := append([]string(nil), t.Path...)
	add := func(name string, p Property, required bool) {
		s.Properties[name] = p.Schema
		argv = append(argv, p.Argv)
		if required {
			s.Required = append(s.Required, name)
		}
	}
	for _, f := range t.Flags {
		add(f.Name, FlagProperty(f), f.Required)
	}
	dash := false
	for _, a := range t.Args {
		if a.AfterDash && !dash {
			argv = append(argv, "--")
			dash = true
		}
		add(a.Name, ArgProperty(a, cmd), a.Required)
	}
	return s, argv
}

var (
	readVerbs    = map[string]bool{"get": true, "list": true, "ls": true, "view": true, "show": true, "describe": true, "status": true, "version": true, "info": true, "search": true, "explain": true, "logs": true, "log": true, "top": true, "diff": true, "print": true, "cat": true, "history": true, "events": true, "whoami": true, "check": true, "inspect": true, "current-context": true, "api-resources": true, "api-versions": true, "cluster-info": true, "help": true}
	destroyVerbs = map[string]bool{"delete": true, "remove": true, "rm": true, "destroy": true, "purge": true, "prune": true, "drain": true, "uninstall": true, "reset": true, "wipe": true, "kill": true}
)

var (
	remoteVerbs = map[string]bool{"deploy": true, "publish": true, "push": true, "release": true, "upload": true, "sync": true, "apply": true, "send": true, "submit": true, "promote": true, "rollout": true}
	serverVerbs = map[string]bool{"server": true, "serve": true, "daemon": true, "watch": true, "listen": true, "proxy": true, "tunnel": true, "port-forward": true, "forward": true, "attach": true}
)

// riskGuess is what the importer writes of a tool's side-effect profile, and why it wants a person
// to look (review, "" for none).
type riskGuess struct {
	level      int
	idempotent bool
	mutates    []string
	approval   string
	review     string
}

// risk guesses a tool's side effects from its last command word: read verbs (get, list, view, …)
// are risk 0 and idempotent; destroying verbs (delete, remove, …) risk 3 with approval always;
// verbs that change something elsewhere (deploy, publish, push, …) risk 2, mutating the network,
// with approval on-mutate; servers and watchers (server, serve, watch, …), which run until stopped,
// risk 2 with approval always; anything else 1. The last three are flagged for review: what they
// reach, and whether the bundle's sandbox lets them, is for a person to decide.
func (b *Bundle) risk(t *Tool) riskGuess {
	if len(t.Path) == 0 {
		return riskGuess{level: 1}
	}
	cmd := strings.Join(append([]string{b.Root}, t.Path...), " ")
	w := strings.ToLower(t.Path[len(t.Path)-1])
	verb, _, _ := strings.Cut(w, "-")
	egress := "the bundle's sandbox has no network: add the hosts it must reach with --egress"
	if len(b.opts.Egress) > 0 {
		egress = "the bundle's sandbox reaches only " + strings.Join(b.opts.Egress, ", ") + ": check that its targets are among them"
	}
	switch {
	case readVerbs[w] || readVerbs[verb]:
		return riskGuess{level: 0, idempotent: true}
	case destroyVerbs[w] || destroyVerbs[verb]:
		return riskGuess{level: 3, approval: "always",
			review: fmt.Sprintf("`%s` deletes or destroys something: imported at risk_level 3 with approval always. Check what it can reach; narrow the tool's sandbox or leave the tool out.", cmd)}
	case remoteVerbs[w] || remoteVerbs[verb]:
		return riskGuess{level: 2, mutates: []string{"network:*"}, approval: "on-mutate",
			review: fmt.Sprintf("`%s` changes something outside the workspace: imported at risk_level 2, mutating network:*, with approval on-mutate; %s.", cmd, egress)}
	case serverVerbs[w] || serverVerbs[verb]:
		return riskGuess{level: 2, approval: "always",
			review: fmt.Sprintf("`%s` runs until it is stopped (a server or a watcher): a call ends at timeout_ms and the sandbox gives it no inbound network. Imported at risk_level 2 with approval always; leave it out unless a bounded run is useful.", cmd)}
	}
	return riskGuess{level: 1}
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
