package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

// maxHelpBytes bounds the --help text a scaffold quotes.
const maxHelpBytes = 8 << 10

var (
	bundleIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	versionPattern  = regexp.MustCompile(`\d+\.\d+(?:\.\d+)?`)
)

type newOptions struct {
	*globalOptions
	id, bin, dir string
}

// newNewCmd is clihostctl new.
func newNewCmd(g *globalOptions) *cobra.Command {
	o := &newOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "new ID",
		Short: "Scaffold a bundle (CLI.md, one TOOL.md with an example) for a CLI, from its --version and --help",
		Long: `New writes a bundle folder for the CLI named by --bin (default: ID): a CLI.md with the common blocks
(install, version_check, a strict sandbox, output), one TOOL.md (the version tool) with an example, and
the CLI's --help quoted in CLI.md's body as the reference to write the next tools from.
The CLI's --version and --help run in clihost's kernel sandbox (no network, no file access but what
it needs to start, as a CLI's version check runs), never on the host unconfined. What they print
only reaches YAML through the one renderer of manifests, so it cannot add keys.
Then: clihostctl lint DIR, clihostctl call --bundles DIR ID TOOL --dry-run, clihostctl test DIR.`,
		Example: `  clihostctl new sqlite3
  clihostctl new rg --bin rg --dir ./bundles/ripgrep`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.id = args[0]
			return runNew(o)
		},
	}
	cmd.Flags().StringVar(&o.bin, "bin", "", "the program (a name on PATH or an absolute path; default: ID)")
	cmd.Flags().StringVar(&o.dir, "dir", "", "the folder to write (default: ./ID); it must not exist")
	return cmd
}

// probed is what the CLI's own commands said about it.
type probed struct {
	path, version, versionLine, help string
	versionOut                       string // all --version printed
	notes                            []string
}

func runNew(o *newOptions) error {
	if !bundleIDPattern.MatchString(o.id) {
		return usageError{fmt.Errorf("bundle id %q: use lowercase letters, digits and -", o.id)}
	}
	if o.bin == "" {
		o.bin = o.id
	}
	if o.dir == "" {
		o.dir = o.id
	}
	if _, err := os.Lstat(o.dir); err == nil {
		return usageError{fmt.Errorf("%s exists; name a new folder with --dir", o.dir)}
	}
	p, err := probe(context.Background(), o.id, o.bin)
	if err != nil {
		return err
	}
	if err := writeScaffold(o, p); err != nil {
		return err
	}
	fmt.Fprintf(o.io.ErrOut, "wrote %s (%s %s)\n", o.dir, o.bin, p.version)
	for _, n := range p.notes {
		fmt.Fprintf(o.io.ErrOut, "note: %s\n", n)
	}
	fmt.Fprintf(o.io.ErrOut, "next: clihostctl lint %s && clihostctl call --bundles %s %s version --dry-run && clihostctl test %s\n", o.dir, o.dir, o.id, o.dir)
	return nil
}

// probe runs bin --version and bin --help through a provisional bundle, in clihost's sandbox, as
// a call runs (host.Call: the version check, then the tool).
func probe(ctx context.Context, id, bin string) (*probed, error) {
	tmp, err := os.MkdirTemp("", "clihost-new-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	dir, ws := filepath.Join(tmp, id), filepath.Join(tmp, "ws")
	if err := writeProvisional(dir, id, bin); err != nil {
		return nil, err
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		return nil, err
	}
	if err := reachableFixture(tmp, ws); err != nil {
		return nil, err
	}
	src, err := registry.DirSource(dir)
	if err != nil {
		return nil, err
	}
	reg, err := registry.Load(src)
	if err != nil {
		return nil, err
	}
	state, _ := control.DefaultStateDir()
	h := host.New(reg, host.Options{Sandbox: host.SandboxOptions{ExtraDeny: clihostPaths(), StateDir: state}})
	b, err := h.Bundle(id)
	if err != nil {
		return nil, err
	}
	c := host.Caller{Workspace: ws, User: currentUser()}
	p := &probed{}
	path, _, verr := h.Verify(ctx, b, ws)
	if verr != nil {
		return nil, fmt.Errorf("%s: %s (%s)", bin, verr.Message, verr.Hint)
	}
	p.path = path
	for _, tool := range []string{"version", "help"} {
		env := h.Call(ctx, b, tool, map[string]any{}, c, host.CallOptions{Via: approval.ViaCLI, Debug: true})
		text, _ := env.Value.(string)
		if env.Error != nil && env.Error.Debug != nil { // some CLIs print their help on stderr, or exit 1 after it
			text = env.Error.Debug.Stdout + env.Error.Debug.Stderr
		}
		if tool == "version" {
			p.versionLine, p.version = versionLine(text)
			if env.OK {
				p.versionOut = text
			}
		} else {
			p.help = cleanHelp(text)
		}
	}
	if p.version == "" {
		p.notes = append(p.notes, bin+" --version printed no version: fix version_check in CLI.md")
	}
	if p.help == "" {
		p.notes = append(p.notes, bin+" --help printed nothing: the reference section is empty")
	}
	return p, nil
}

// reachableFixture makes the provisional bundle readable and ws the workspace of nobody when
// clihostctl runs as root (a root host runs a CLI as the workspace's owner, never as root).
func reachableFixture(tmp, ws string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Chown(ws, fixtureUID, fixtureUID)
}

// writeProvisional writes the bundle the probe runs: bin with a strict sandbox and two tools,
// version and help.
func writeProvisional(dir, id, bin string) error {
	cli := scaffoldCLI(id, bin, "", "")
	cli.VersionCheck = manifest.VersionCheck{Cmd: bin + " --version", Parse: `(\d+\.\d+(?:\.\d+)?)`, TimeoutMS: 5000}
	cli.Commands = manifest.CommandTree{{Name: "version", Ref: "./tools/version/TOOL.md"}, {Name: "help", Ref: "./tools/help/TOOL.md"}}
	files := map[string]any{"CLI.md": cli, "tools/version/TOOL.md": scaffoldTool(id, "version", "--version", nil),
		"tools/help/TOOL.md": scaffoldTool(id, "help", "--help", nil)}
	for name, front := range files {
		data, err := manifest.RenderFile(front, "")
		if err != nil {
			return err
		}
		full := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// scaffoldCLI is the CLI.md of bundle id for bin, with a version_check built from what --version
// printed (line, version) when it printed one.
func scaffoldCLI(id, bin, line, version string) *manifest.CLI {
	vc := manifest.VersionCheck{Cmd: bin + " --version", Parse: `(\d+\.\d+(?:\.\d+)?)`, TimeoutMS: 5000}
	if version != "" {
		prefix := line[:strings.Index(line, version)]
		if len(prefix) > 40 {
			prefix = ""
		}
		vc.Parse = regexp.QuoteMeta(prefix) + `(\d+\.\d+(?:\.\d+)?)`
		if major, err := strconv.Atoi(strings.Split(version, ".")[0]); err == nil {
			vc.Range = fmt.Sprintf(">=%s <%d", version, major+1)
		}
	}
	return &manifest.CLI{
		Name: bin, ID: id, Version: "0.1.0", Bin: bin,
		Description:  fmt.Sprintf("%s: say what it does, when an agent should use it and what it returns (scaffolded by clihostctl new; edit me).", bin),
		Install:      []manifest.InstallMethod{{Method: manifest.MethodApt, Package: bin}},
		VersionCheck: vc,
		Sandbox: manifest.Sandbox{
			Network: &manifest.Network{Egress: []string{}},
			FS:      &manifest.FS{Read: []string{"./**"}, Write: []string{}},
			Exec:    &manifest.Exec{Allow: new(false)},
			Env:     &manifest.Env{Pass: []string{}, Set: map[string]string{"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat"}},
		},
		Output:   &manifest.Output{DefaultFormat: "text", Stream: "stdout", ErrorStream: "stderr"},
		Commands: manifest.CommandTree{{Name: "version", Ref: "./tools/version/TOOL.md"}},
	}
}

// scaffoldTool is a TOOL.md of bundle id named name that runs bin with one argument, with one
// example (its output when known).
func scaffoldTool(id, name, arg string, output any) *manifest.Tool {
	t := &manifest.Tool{
		Name: name, ID: id + "." + name, Version: "0.1.0",
		Description: fmt.Sprintf("Runs %s and returns what it prints, as text.", arg),
		Inputs:      map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}},
		Outputs:     map[string]any{"type": "string"},
		Idempotent:  true, Mutates: []string{}, Approval: "auto", TimeoutMS: 10000,
		Examples: []manifest.ToolExample{{Name: "prints it", Input: map[string]any{}, Output: output}},
		Runner:   &manifest.ToolRunner{CLI: "../../CLI.md", Argv: []string{arg}},
	}
	return t
}

// writeScaffold writes the bundle folder o.dir from what the probe found.
func writeScaffold(o *newOptions, p *probed) error {
	cli := scaffoldCLI(o.id, o.bin, p.versionLine, p.version)
	var output any
	if p.versionOut != "" {
		output = p.versionOut
	}
	body := fmt.Sprintf("## When to reach for this CLI\n\nSay when an agent should use %s, and when not.\n\n## Gotchas\n\n"+
		"- Scaffolded by `clihostctl new` from `%s --version` and `%s --help` (%s): review the sandbox, add tools\n"+
		"  (one TOOL.md per command an agent needs, under tools/), and examples with their fixtures (tools/<tool>/testdata/).\n\n"+
		"## Reference\n\n%s\n", o.bin, o.bin, o.bin, p.version, fence(p.help))
	files := []struct {
		name  string
		front any
		body  string
	}{
		{"CLI.md", cli, body},
		{"tools/version/TOOL.md", scaffoldTool(o.id, "version", "--version", output), ""},
	}
	if err := os.MkdirAll(filepath.Join(o.dir, "tools", "version"), 0o755); err != nil {
		return err
	}
	for _, f := range files {
		data, err := manifest.RenderFile(f.front, f.body)
		if err != nil {
			return err
		}
		file, err := os.OpenFile(filepath.Join(o.dir, f.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = file.Write(data)
		if err = errors.Join(err, file.Close()); err != nil {
			return err
		}
	}
	return nil
}

// versionLine is the first line of out holding a version, and that version.
func versionLine(out string) (line, version string) {
	for l := range strings.Lines(out) {
		l = strings.TrimSpace(l)
		if v := versionPattern.FindString(l); v != "" && len(l) <= 200 {
			return l, v
		}
	}
	return "", ""
}

// cleanHelp is a help text without control characters (but newlines and tabs), cut at
// maxHelpBytes.
func cleanHelp(s string) string {
	if len(s) > maxHelpBytes {
		s = strings.ToValidUTF8(s[:maxHelpBytes], "") + "\n…"
	}
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return -1
	}, s)
	return strings.TrimSpace(s)
}

// fence quotes text as a Markdown code block whose fence is longer than any backtick run in it.
func fence(text string) string {
	if text == "" {
		return "(no --help output)"
	}
	f := "```"
	for strings.Contains(text, f) {
		f += "`"
	}
	return f + "text\n" + text + "\n" + f
}
