package clihost_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/manifest"
)

// Call a tool of the built-in catalog: jq's eval runs jq in the kernel sandbox (no network, no
// writes, an environment built from nothing).
func Example() {
	ctx := context.Background()
	h, err := clihost.New(ctx, clihost.WithCatalog(), clihost.WithWorkspace(os.TempDir()))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	res, err := h.Call(ctx, "jq", "eval", map[string]any{"json": `{"items":[1,2,3]}`, "filter": ".items | add"}, clihost.CallOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ok=%v value=%q exit=%d\n", res.OK, res.Value, *res.ExitCode)
	// Output: ok=true value="6\n" exit=0
}

// A tool's input is checked against its schema before anything runs: the error is a *Error
// with the code clihostd would return.
func ExampleHost_Call_invalidInput() {
	ctx := context.Background()
	h, err := clihost.New(ctx, clihost.WithCatalog(), clihost.WithWorkspace(os.TempDir()))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	_, err = h.Call(ctx, "jq", "eval", map[string]any{"json": "{}"}, clihost.CallOptions{})
	var e *clihost.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Code == errcode.InputInvalid)
	}
	// Output: input_invalid true
}

// A bundle defined in code (AIP-29's defineCli): rendered to CLI.md and TOOL.md and loaded, with
// the same lint, as a bundle folder on disk.
func ExampleDefineCli() {
	echo := clihost.DefineCli(manifest.CLI{
		Name: "echo", ID: "echo", Version: "1.0.0", Bin: "echo",
		Description:  "Prints its arguments: a bundle defined in Go.",
		Install:      []manifest.InstallMethod{{Method: manifest.MethodApt, Package: "coreutils"}},
		VersionCheck: manifest.VersionCheck{Cmd: "echo --version", Parse: `(\d+\.\d+)`},
		Sandbox: manifest.Sandbox{Network: &manifest.Network{Egress: []string{}}, FS: &manifest.FS{Read: []string{"./**"}},
			Exec: &manifest.Exec{Allow: new(false)}, Env: &manifest.Env{Pass: []string{}}},
		Output: &manifest.Output{DefaultFormat: "text"},
	}, "## When to use\n\nTo say something.\n",
		clihost.DefineTool("say", manifest.Tool{
			Name: "Say", ID: "echo.say", Version: "1.0.0", Description: "Prints the words given.",
			Inputs: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"words"},
				"properties": map[string]any{"words": map[string]any{"type": "string", "minLength": 1}}},
			Outputs: map[string]any{"type": "string"}, Idempotent: true, Approval: "auto",
			Runner: &manifest.ToolRunner{Argv: []string{"${input.words}"}},
		}, ""))

	ctx := context.Background()
	h, err := clihost.New(ctx, clihost.WithDefinitions(echo), clihost.WithWorkspace(os.TempDir()))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	for _, f := range h.Lint().Findings {
		fmt.Println(f.Severity, f.Rule)
	}
	for _, b := range h.Bundles() {
		fmt.Println(b.Key, len(b.Tools), "tool")
	}
	res, err := h.Call(ctx, "echo", "say", map[string]any{"words": "hello from the sandbox"}, clihost.CallOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", res.Value)
	// Output:
	// echo@1 1 tool
	// "hello from the sandbox\n"
}

// Verify finds a bundle's CLI and checks its version in the sandbox, as a call would.
func ExampleHost_Verify() {
	ctx := context.Background()
	h, err := clihost.New(ctx, clihost.WithCatalog(), clihost.WithWorkspace(os.TempDir()))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	bin, err := h.Verify(ctx, "jq")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(bin.Path)
	// Output: /usr/bin/jq
}
