package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/acli"
	"github.com/clihost/clihost/manifest"
)

// addPrompts serves each INTENT.md of the bundle (AIP-28) as an MCP prompt: its id is the
// prompt's name, its label the title, its description the description, and its inputs the
// arguments. prompts/get routes the arguments as the intent says and returns one user message
// asking to call the tool it routes to with the tool input it built.
func addPrompts(s *sdk.Server, b *manifest.Bundle, acliMode bool) {
	for _, it := range b.Intents {
		s.AddPrompt(promptFor(it), promptHandler(it, acliMode))
	}
}

// promptFor describes an intent as an MCP prompt.
func promptFor(it *manifest.Intent) *sdk.Prompt {
	p := &sdk.Prompt{Name: it.ID, Title: it.Label.String(), Description: it.Description.String()}
	for _, in := range it.Inputs {
		desc := in.Hint.String()
		if names := choices(in); names != "" {
			desc = strings.TrimSpace(desc + " (one of: " + names + ")")
		}
		p.Arguments = append(p.Arguments, &sdk.PromptArgument{Name: in.Name, Title: in.Label.String(), Description: desc, Required: in.Required})
	}
	return p
}

// choices lists a choice input's values ("" for other inputs).
func choices(in manifest.IntentInput) string {
	var names []string
	for _, v := range in.Values {
		names = append(names, fmt.Sprint(v.Value))
	}
	return strings.Join(names, ", ")
}

// promptHandler answers prompts/get for one intent.
func promptHandler(it *manifest.Intent, acliMode bool) sdk.PromptHandler {
	return func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		tool, input, err := it.Resolve(req.Params.Arguments)
		if err != nil {
			return nil, invalidParams("prompt %s: %v", it.ID, err)
		}
		if s := tool.InputSchema(); s != nil {
			if err := s.Validate(input); err != nil {
				return nil, invalidParams("prompt %s: the input it builds for tool %s does not fit the tool's inputs: %v", it.ID, tool.CommandPath(), err)
			}
		}
		raw, err := json.MarshalIndent(input, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("prompt %s: %w", it.ID, err)
		}
		var text strings.Builder
		fmt.Fprintf(&text, "%s: %s\n\n", it.Label.String(), it.Description.String())
		if acliMode {
			fmt.Fprintf(&text, "Use the `%s` tool to run `%s` with these inputs (`help %s` lists its flags):\n", acli.ToolName, tool.CommandPath(), tool.CommandPath())
		} else {
			fmt.Fprintf(&text, "Call the tool `%s` with these arguments:\n", manifest.MCPName(tool.Path))
		}
		fmt.Fprintf(&text, "```json\n%s\n```\n", raw)
		return &sdk.GetPromptResult{Description: it.Description.String(),
			Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text.String()}}}}, nil
	}
}

// invalidParams is a JSON-RPC invalid-params error: the arguments do not fit the prompt.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}
