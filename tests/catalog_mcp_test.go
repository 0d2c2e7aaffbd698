package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// offline lists the catalog bundles whose tools can run here without reaching the network: their
// example inputs are called for real. The others (gh, curl, yt-dlp, aws, kubectl, helm) talk to
// remote hosts, which this machine must not contact, so only their listing and input validation are
// exercised.
var offline = map[string]bool{"jq": true, "rg": true, "git": true, "ffmpeg": true}

// TestEveryCatalogToolOverStdio connects the Go SDK client to `clihostctl mcp BUNDLE` over stdio for
// every catalog bundle whose binary is installed, lists its tools and calls each one.
func TestEveryCatalogToolOverStdio(t *testing.T) {
	for _, b := range catalog(t) {
		t.Run(b.ID(), func(t *testing.T) {
			if _, err := lookSystem(b.CLI.Bin); err != nil {
				needDebian(t, b.ID(), b.CLI.Bin)
			}
			ws := fixture.Workspace(t)
			cmd := exec.Command(bin.ctl, "mcp", b.ID(), "--workspace", ws, "--audit", os.DevNull)
			cmd.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir(), "CLIHOST_BUNDLES="}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			list, err := c.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) != len(b.Tools) {
				t.Fatalf("listed %d tools, the bundle has %d", len(list.Tools), len(b.Tools))
			}
			for _, entry := range b.Tools {
				name := manifest.MCPName(entry.Path)
				var inputs []map[string]any
				if offline[b.ID()] {
					for _, ex := range entry.Tool.Examples {
						if m, ok := ex.Input.(map[string]any); ok {
							inputs = append(inputs, m)
						}
					}
				}
				for _, in := range inputs {
					res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: in})
					if err != nil {
						t.Fatalf("%s %v: protocol error %v", name, in, err)
					}
					checkResult(t, name, res, "")
				}
				if req, _ := entry.Tool.Inputs["required"].([]any); len(req) > 0 {
					res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{}})
					if err != nil {
						t.Fatalf("%s {}: protocol error %v", name, err)
					}
					checkResult(t, name, res, "input_invalid")
				}
			}
		})
	}
}

// hostFault lists error codes that mean clihost or the bundle is wrong, not the call's input.
var hostFault = map[string]bool{"internal": true, "bundle_invalid": true, "output_invalid": true}

// checkResult accepts a success, or a failure whose envelope names a real error; want, when set, is
// the code the failure must have.
func checkResult(t *testing.T, name string, res *sdk.CallToolResult, want string) {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("%s: empty content", name)
	}
	txt := res.Content[0].(*sdk.TextContent).Text
	if !res.IsError {
		if want != "" {
			t.Fatalf("%s: succeeded, want %s", name, want)
		}
		return
	}
	var env struct {
		OK    bool
		Error struct{ Code, Message, Hint string }
	}
	if err := json.Unmarshal([]byte(txt), &env); err != nil || env.OK || env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("%s: isError without an envelope: %s", name, txt)
	}
	if want != "" && env.Error.Code != want || hostFault[env.Error.Code] {
		t.Fatalf("%s: error %s, want %q: %s", name, env.Error.Code, want, txt)
	}
}
