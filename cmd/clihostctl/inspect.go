package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/sandbox"
)

type inspectOptions struct {
	*globalOptions
	bundle string
	json   bool
}

func newInspectCmd(g *globalOptions) *cobra.Command {
	o := &inspectOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "inspect BUNDLE",
		Short: "Show a bundle's resolved model",
		Long: `Inspect shows what clihost understood of a bundle: identity, install paths, version check,
auth, output conventions, and every tool with its command path, MCP name, annotations, effective
sandbox (the bundle's narrowed by the tool's) and, with --json, the concrete policy a call in the
current directory would get (absolute rules, masks, executables, the baseline runtime set).
BUNDLE is an id, id@major, or the path of a bundle folder or CLI.md.`,
		Example: "  clihostctl inspect gh --json\n  clihostctl inspect ./.cli/mytool",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.bundle = args[0]
			return runInspect(o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the model as JSON")
	return cmd
}

// inspectedTool is a tool as inspect shows it.
type inspectedTool struct {
	Path             []string             `json:"path"`
	MCPName          string               `json:"mcp_name"`
	File             string               `json:"file"`
	Annotations      manifest.Annotations `json:"annotations"`
	EffectiveSandbox manifest.Sandbox     `json:"effective_sandbox"`
	// Policy is the concrete sandbox a call in this workspace would get (absolute rules, masks,
	// executables, the baseline runtime set); absent when the binary is not installed here.
	Policy      *sandbox.Policy `json:"policy,omitempty"`
	PolicyError string          `json:"policy_error,omitempty"`
	Tool        *manifest.Tool  `json:"tool"`
}

type inspected struct {
	Key      string            `json:"key"`
	File     string            `json:"file"`
	CLI      *manifest.CLI     `json:"cli"`
	Tools    []inspectedTool   `json:"tools"`
	Findings manifest.Findings `json:"findings"`
}

func runInspect(o *inspectOptions) error {
	b, err := resolveBundle(o.globalOptions, o.bundle)
	if err != nil {
		return err
	}
	if b.CLI == nil {
		for _, f := range b.Findings {
			fmt.Fprintln(o.io.ErrOut, f)
		}
		return fmt.Errorf("%s did not parse; run clihostctl lint %s", b.File, b.Dir)
	}
	out := inspected{Key: b.Key(), File: b.File, CLI: b.CLI, Findings: b.Findings}
	if out.Findings == nil {
		out.Findings = manifest.Findings{}
	}
	binary, lookErr := exec.LookPath(b.CLI.Bin)
	bundles := []*manifest.Bundle{b}
	if reg, err := o.globalOptions.registry(); err == nil {
		bundles = append(bundles, reg.Bundles()...)
	}
	ws, _ := os.Getwd()
	home, _ := os.UserHomeDir()
	for _, t := range b.Tools {
		it := inspectedTool{Path: t.Path, MCPName: manifest.MCPName(t.Path), File: t.File, Tool: t.Tool}
		if t.Tool != nil {
			it.Annotations = t.Tool.Annotations()
			it.EffectiveSandbox = manifest.EffectiveSandbox(b.CLI.Sandbox, t.Tool.Sandbox)
			if lookErr != nil {
				it.PolicyError = fmt.Sprintf("%s is not installed here: %v", b.CLI.Bin, lookErr)
			} else if p, err := sandbox.Compile(sandbox.Input{Bundle: b, Tool: t, Binary: binary, Workspace: ws, Home: home,
				PATH: os.Getenv("PATH"), LookupEnv: os.LookupEnv, Protect: host.ProtectedPaths(bundles, binary)}); err != nil {
				it.PolicyError = err.Error()
			} else {
				it.Policy = p
			}
		}
		out.Tools = append(out.Tools, it)
	}
	if o.json {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	c := b.CLI
	w := o.io.Out
	fmt.Fprintf(w, "%s  %s (%s)\n", out.Key, c.Name, b.File)
	fmt.Fprintf(w, "  bin:      %s %s\n", c.Bin, strings.Join(c.BinArgs, " "))
	fmt.Fprintf(w, "  version:  %s  (parse %q, range %q)\n", c.VersionCheck.Cmd, c.VersionCheck.Parse, c.VersionCheck.Range)
	var methods []string
	for _, m := range c.Install {
		methods = append(methods, m.Method)
	}
	fmt.Fprintf(w, "  install:  %s\n", strings.Join(methods, ", "))
	if c.Auth != nil && c.Auth.Login != nil {
		fmt.Fprintf(w, "  login:    %s\n", c.Auth.Login.Cmd)
	}
	if n := c.Sandbox.Network; n != nil {
		fmt.Fprintf(w, "  egress:   %s\n", listOrNone(n.Egress))
	}
	if f := c.Sandbox.FS; f != nil {
		fmt.Fprintf(w, "  fs.read:  %s\n  fs.write: %s\n", listOrNone(f.Read), listOrNone(f.Write))
	}
	fmt.Fprintf(w, "  exec:     %v %s\n", c.Sandbox.Exec.Allowed(), strings.Join(spawnList(c.Sandbox.Exec), " "))
	printReferencedBlocks(w, b)
	fmt.Fprintf(w, "  tools:\n")
	for _, t := range out.Tools {
		desc := ""
		if t.Tool != nil {
			desc = t.Tool.Name
		}
		fmt.Fprintf(w, "    %-28s %-24s %s\n", strings.Join(t.Path, " "), t.MCPName, desc)
	}
	if e, wn := b.Findings.Count(); e+wn > 0 {
		fmt.Fprintf(w, "  findings: %d error(s), %d warning(s); run clihostctl lint %s\n", e, wn, b.Dir)
	}
	return nil
}

// printReferencedBlocks prints the AIP blocks CLI.md refers to, as clihost read them: the
// runner (AIP-17), the SECRETS.md inventory's variables (AIP-19) and the intents (AIP-28).
func printReferencedBlocks(w io.Writer, b *manifest.Bundle) {
	if r := b.CLI.Runner; r != nil && r.Block != nil {
		line := "engine " + r.Engine()
		if r.Ref != "" {
			line += " (" + r.Ref + ")"
		}
		if img := r.Image(); img != "" {
			line += "; image " + img
		}
		if l := r.Block.Limits; l != nil {
			var parts []string
			for _, f := range []struct {
				name string
				v    int64
			}{{"memory_mb", l.MemoryMB}, {"cpu_ms", l.CPUMS}, {"timeout_ms", l.TimeoutMS}} {
				if f.v > 0 {
					parts = append(parts, fmt.Sprintf("%s %d", f.name, f.v))
				}
			}
			line += "; limits " + strings.Join(parts, ", ")
		}
		if n := r.Needs(); n != nil && len(n.Native) > 0 {
			line += "; needs.native " + strings.Join(n.Native, " ")
		}
		fmt.Fprintf(w, "  runner:   %s\n", line)
	}
	if len(b.Secrets) > 0 {
		var vars []string
		for _, s := range b.Secrets {
			req := "optional"
			if s.Required {
				req = "required"
			}
			for _, e := range s.Env {
				vars = append(vars, e.Name+" ("+req+")")
			}
		}
		fmt.Fprintf(w, "  secrets:  %s\n", strings.Join(vars, ", "))
	}
	if len(b.Intents) > 0 {
		ids := make([]string, 0, len(b.Intents))
		for _, it := range b.Intents {
			ids = append(ids, it.ID)
		}
		what := "MCP prompt"
		if len(ids) > 1 {
			what += "s"
		}
		fmt.Fprintf(w, "  intents:  %s (%s)\n", strings.Join(ids, ", "), what)
	}
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return strings.Join(l, ", ")
}

func spawnList(e *manifest.Exec) []string {
	if e == nil {
		return nil
	}
	return e.Spawn
}
