// Command embed is the smallest program embedding clihost (built and run by TestEmbeddedProgram):
// importing github.com/clihost/clihost is all it takes to be the sandbox's init as well, so it
// needs no clihost-sandbox helper beside it. It calls jq from the built-in catalog in the
// sandbox, then bundles defined in code: touch makes a file in the workspace (its owner is who the CLIs
// run as), and cat reads a file outside it, which the sandbox refuses.
//
// Usage: embed WORKSPACE
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/manifest"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: embed WORKSPACE")
	}
	ctx := context.Background()
	h, err := clihost.New(ctx, clihost.WithCatalog(), clihost.WithDefinitions(coreutils("touch", "./made-in-the-sandbox"), coreutils("cat")), clihost.WithWorkspace(os.Args[1]))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	show := func(what, bundle string, input any) {
		res, err := h.Call(ctx, bundle, "run", input, clihost.CallOptions{})
		if bundle == "jq" {
			res, err = h.Call(ctx, "jq", "eval", input, clihost.CallOptions{})
		}
		if err != nil {
			fmt.Printf("%s: error %v\n", what, err)
			return
		}
		fmt.Printf("%s: ok %q\n", what, res.Value)
	}
	show("jq", "jq", map[string]any{"json": `{"who":"an embedding program"}`, "filter": ".who", "raw_output": true})
	show("touch", "touch", nil)
	show("outside", "cat", map[string]any{"args": []string{"/etc/hostname"}})
}

// coreutils is a bundle defined in code around a coreutils program whose tool run passes the fixed
// arguments, then its input's args (refused when one starts with '-': never an option), with no
// network and access to the workspace only.
func coreutils(bin string, fixed ...string) *clihost.Definition {
	return clihost.DefineCli(manifest.CLI{
		Name: bin, ID: bin, Version: "1.0.0", Bin: bin, Description: bin + " from coreutils, defined in Go.",
		Install:      []manifest.InstallMethod{{Method: manifest.MethodApt, Package: "coreutils"}},
		VersionCheck: manifest.VersionCheck{Cmd: bin + " --version", Parse: `\(GNU coreutils\) (\d+\.\d+)`},
		Sandbox: manifest.Sandbox{Network: &manifest.Network{Egress: []string{}}, FS: &manifest.FS{Read: []string{"./**"}, Write: []string{"./**"}},
			Exec: &manifest.Exec{Allow: new(false)}, Env: &manifest.Env{Pass: []string{}}},
		Output: &manifest.Output{DefaultFormat: "text"},
	}, "",
		clihost.DefineTool("run", manifest.Tool{
			Name: "Run", ID: bin + ".run", Version: "1.0.0", Description: "Runs " + bin + " with the arguments given.",
			Inputs: map[string]any{"type": "object", "additionalProperties": false,
				"properties": map[string]any{"args": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
			Outputs: map[string]any{"type": "string"}, Approval: "auto",
			Runner: &manifest.ToolRunner{Argv: append(fixed, "${input.args}")},
		}, ""))
}
