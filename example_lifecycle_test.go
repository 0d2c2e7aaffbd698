package clihost_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/clihost/clihost"
	"github.com/clihost/clihost/manifest"
)

// A bundle with a setup step and a login: calls wait for both, as clihostd's do. Setup answers
// the prompt and keeps its value for later calls (in their environment, and redacted from their
// results as a secret is); the login's completes_when check passes at the first call; after
// Logout, Login runs auth.login.cmd in the sandbox and waits for completes_when again.
func ExampleHost_Setup() {
	greeter := clihost.DefineCli(manifest.CLI{
		Name: "greeter", ID: "greeter", Version: "1.0.0", Bin: "printenv",
		Description:  "printenv as a bundle with a setup step and a login.",
		Install:      []manifest.InstallMethod{{Method: manifest.MethodApt, Package: "coreutils"}},
		VersionCheck: manifest.VersionCheck{Cmd: "printenv --version", Parse: `\(GNU coreutils\) (\d+\.\d+)`},
		Setup: []manifest.SetupStep{{ID: "greeting", Kind: "prompt", Type: "text", Prompt: "How should it greet?",
			Persist: &manifest.Persist{Env: "GREETING"}}},
		Auth: &manifest.Auth{Login: &manifest.Login{Cmd: "printenv PATH",
			CompletesWhen: &manifest.ExitCheck{Cmd: "printenv PATH"}}},
		Sandbox: manifest.Sandbox{Network: &manifest.Network{Egress: []string{}}, FS: &manifest.FS{Read: []string{"./**"}},
			Exec: &manifest.Exec{Allow: new(false)}, Env: &manifest.Env{Pass: []string{}}},
		Output: &manifest.Output{DefaultFormat: "text"},
	}, "",
		clihost.DefineTool("greet", manifest.Tool{
			Name: "Greet", ID: "greeter.greet", Version: "1.0.0", Description: "Prints the greeting set up.",
			Inputs: map[string]any{"type": "object", "additionalProperties": false}, Outputs: map[string]any{"type": "string"},
			Runner: &manifest.ToolRunner{Argv: []string{"GREETING"}},
		}, ""))

	ctx := context.Background()
	state, err := os.MkdirTemp("", "clihost-state-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(state)
	ws, err := os.MkdirTemp("", "clihost-workspace-") // apart from the state directory: New refuses one inside the other
	if err != nil {
		log.Fatal(err)
	}
	if err := os.Chmod(ws, 0o777); err != nil { // a root program's CLIs run as nobody in its workspaces
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)
	h, err := clihost.New(ctx, clihost.WithDefinitions(greeter), clihost.WithStateDir(state), clihost.WithWorkspace(ws))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	greet := func() {
		res, err := h.Call(ctx, "greeter", "greet", nil, clihost.CallOptions{})
		var e *clihost.Error
		if errors.As(err, &e) {
			fmt.Println(e.Code)
			return
		}
		fmt.Printf("%q\n", res.Value)
	}
	greet()
	if err := h.Setup(ctx, "greeter", clihost.SetupOptions{Values: map[string]string{"greeting": "hello"}}); err != nil {
		log.Fatal(err)
	}
	greet()
	if err := h.Logout("greeter"); err != nil {
		log.Fatal(err)
	}
	greet()
	if err := h.Login(ctx, "greeter", clihost.LoginOptions{}); err != nil { // the command's output is discarded
		log.Fatal(err)
	}
	greet()
	// Output:
	// setup_required
	// "[REDACTED]\n"
	// auth_required
	// "[REDACTED]\n"
}
