// Package mcp serves a bundle's tools over the Model Context Protocol with the official Go SDK: in
// tools mode one MCP tool per TOOL.md, in ACLI mode a single `cli` tool taking a command string.
// Servers run over stdio or behind a stateless streamable-HTTP handler at /mcp/{bundle} and
// /mcp/{bundle}/acli, which serves both 2025-11-25 and 2026-07-28 clients.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/acli"
	"github.com/clihost/clihost/argv"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
)

// DefaultPageSize is how many tools a tools/list page holds. It is large so that clients that do not
// follow nextCursor (some do not) still see a whole bundle; bundles past it are paged.
const DefaultPageSize = 500

// Options configure one bundle's server.
type Options struct {
	Caller   host.Caller // whose calls, in which workspace
	ACLI     bool        // serve the single `cli` tool instead of one tool per TOOL.md
	PageSize int         // tools/list page size; 0 means DefaultPageSize
	Version  string      // clihost's version, reported as the implementation version
	// Stateless says the server is behind the stateless HTTP handler (set by Handler): it cannot
	// send requests to 2025-11-25 clients, and its calls are approval.ViaMCP (else ViaStdio).
	Stateless bool
	// Agent names the agent token an HTTP request carried (the daemon's bearer tokens); nil: none.
	// Handler writes it into every request, so a client cannot name another agent.
	Agent func(*http.Request) string
}

// NewServer builds the MCP server of one bundle.
func NewServer(h *host.Host, b *manifest.Bundle, o Options) *sdk.Server {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	name := "clihost-" + b.ID()
	if o.ACLI {
		name += "-acli"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: name, Title: b.CLI.Name, Version: b.CLI.Version},
		&sdk.ServerOptions{PageSize: o.PageSize, Instructions: b.CLI.Description,
			// clihost serves tools, and the bundle's intents as prompts. The SDK answers
			// resources/list (with an empty list) whatever is declared, so it is declared too: a
			// server must not answer what it does not declare (MCP 2026-07-28 server/discover).
			Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Prompts: &sdk.PromptCapabilities{}, Resources: &sdk.ResourceCapabilities{}}})
	addPrompts(s, b, o.ACLI)
	if o.ACLI {
		s.AddTool(&sdk.Tool{Name: acli.ToolName, Description: acli.ToolDescription(b), InputSchema: acli.InputSchema(b)}, acliHandler(h, b, o.Caller, o))
		return s
	}
	for _, t := range b.Tools {
		if t.Tool == nil {
			continue
		}
		s.AddTool(toolFor(b, t), toolHandler(h, b, t, o.Caller, o))
	}
	return s
}

// toolFor describes a TOOL.md as an MCP tool.
func toolFor(b *manifest.Bundle, t *manifest.ToolEntry) *sdk.Tool {
	a := t.Tool.Annotations()
	tool := &sdk.Tool{
		Name:        manifest.MCPName(t.Path),
		Title:       t.Tool.Name,
		Description: manifest.MCPDescription(b.CLI, t),
		InputSchema: rawJSON(t.Tool.Inputs),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: a.ReadOnly, DestructiveHint: &a.Destructive, IdempotentHint: a.Idempotent, OpenWorldHint: &a.OpenWorld},
	}
	if t.Tool.Outputs["type"] == "object" {
		tool.OutputSchema = rawJSON(t.Tool.Outputs)
	}
	return tool
}

// rawJSON encodes a schema once, when the server is built, so that tools/list does not encode the
// same maps again on every request.
func rawJSON(v map[string]any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`) // lint compiled the schema, so it encodes
	}
	return b
}

// arguments decodes a call's arguments as every front end does (argv.DecodeInput).
func arguments(raw json.RawMessage) (map[string]any, error) {
	in, err := argv.DecodeInput(raw)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return in, nil
}

// progressFor reports progress notifications for a request that asked for them.
func progressFor(ctx context.Context, req *sdk.CallToolRequest) func(time.Duration) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	return func(elapsed time.Duration) {
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token,
			Progress: elapsed.Seconds(), Message: fmt.Sprintf("running for %.0fs", elapsed.Seconds())})
	}
}

func toolHandler(h *host.Host, b *manifest.Bundle, t *manifest.ToolEntry, caller host.Caller, o Options) sdk.ToolHandler {
	structured := t.Tool.Outputs["type"] == "object"
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		in, err := arguments(req.Params.Arguments)
		if err != nil {
			return failure(host.Envelope{Error: &host.Error{Code: errcode.InputInvalid, Message: err.Error(), Hint: "send the tool's arguments as a JSON object"}}), nil
		}
		ctx, release := withHTTPRequest(ctx, req)
		defer release()
		caller := callerOf(caller, req)
		env := h.Call(ctx, b, t.Tool.ID, in, caller, host.CallOptions{Progress: progressFor(ctx, req), Via: o.via(), Approval: approvalAnswer(req)})
		if ask := askApproval(env, req, o); ask != nil {
			return ask, nil
		}
		if !env.OK {
			return failure(env), nil
		}
		res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: valueText(env.Value)}}}
		if structured {
			res.StructuredContent = env.Value
		}
		return res, nil
	}
}

// valueText is a value as text content: a string as it is, anything else as JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// failure is a failed call: isError with the whole envelope as text.
func failure(env host.Envelope) *sdk.CallToolResult {
	b, _ := json.Marshal(env)
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}
