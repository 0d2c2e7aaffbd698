package mcp

import (
	"context"
	"encoding/json"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/acli"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
)

// acliHandler serves the single `cli` tool: discovery commands answer from the bundle, other
// commands are routed to a TOOL.md and run through the host.
func acliHandler(h *host.Host, b *manifest.Bundle, caller host.Caller, o Options) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		start := time.Now()
		in, err := arguments(req.Params.Arguments)
		cmd, ok := in["command"].(string)
		if err != nil || !ok {
			return acliResult(acli.Failure("", &acli.Error{Code: acli.ParseError, Message: "the cli tool takes {\"command\": \"...\"}", Hint: "run 'help' to list commands"})), nil
		}
		r, aerr := acli.Parse(b, cmd, acli.Options{Workspace: caller.Workspace})
		if aerr != nil {
			return acliResult(acli.Failure(cmd, aerr)), nil
		}
		var data any
		switch r.Kind {
		case acli.KindHelp:
			data, aerr = acli.Help(b, r.Topic)
		case acli.KindSchema:
			data, aerr = acli.Schema(b, r.Topic)
		case acli.KindVersion:
			data = acli.Version(b)
		default:
			callCtx, release := withHTTPRequest(ctx, req)
			env := h.Call(callCtx, b, r.Tool.Tool.ID, r.Input, callerOf(caller, req), host.CallOptions{Progress: progressFor(ctx, req), Via: o.via(), Approval: approvalAnswer(req)})
			release()
			if ask := askApproval(env, req, o); ask != nil {
				return ask, nil
			}
			if !env.OK {
				return acliResult(acli.Failure(cmd, acliError(env.Error))), nil
			}
			data = env.Value
		}
		if aerr != nil {
			return acliResult(acli.Failure(cmd, aerr)), nil
		}
		return acliResult(acli.Success(cmd, data, "", time.Since(start))), nil
	}
}

// acliError maps a host error onto ACLI's codes, keeping the message and hint.
func acliError(e *host.Error) *acli.Error {
	code := acli.ExecutionError
	switch {
	case e.Code == errcode.InputInvalid:
		code = acli.ValidationError
	case e.Code == errcode.PathTraversalBlocked:
		code = acli.PathTraversalBlocked
	case e.Code == errcode.NotFound:
		code = acli.CommandNotFound
	case e.Code == errcode.Timeout:
		code = acli.Timeout
	case e.Code == errcode.RateLimited || e.Category == "rate_limit":
		code = acli.RateLimited
	case e.Code == errcode.AuthRequired || e.Category == "authentication" || e.Category == output.CategoryPermission || e.Category == "approval":
		code = acli.PermissionDenied
	}
	msg := e.Message
	if code == acli.ExecutionError || e.Category == "approval" {
		msg = string(e.Code) + ": " + msg
	}
	return &acli.Error{Code: code, Message: msg, Hint: e.Hint}
}

func acliResult(r acli.Response) *sdk.CallToolResult {
	b, _ := json.Marshal(r)
	return &sdk.CallToolResult{IsError: !r.Success, Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}
