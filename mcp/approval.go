package mcp

import (
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
)

// approvalKey names the one input request (an elicitation) a call that needs an approval asks.
const approvalKey = "clihost_approval"

// protocolMRTR is the first revision whose servers ask through input_required results (multi
// round-trip requests) instead of sending elicitation/create.
const protocolMRTR = "2026-07-28"

// approvalSchema is the elicitation's form: one yes/no.
var approvalSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Run this command now"},
	},
	"required": []string{"approve"},
}

// via is the front end name approvals see.
func (o Options) via() string {
	if o.Stateless {
		return approval.ViaMCP
	}
	return approval.ViaStdio
}

// approvalAnswer is the answer a retried call carries: the requestState it was given and the
// elicitation's result. Nil when the request carries none.
func approvalAnswer(req *sdk.CallToolRequest) *approval.Answer {
	if req == nil || req.Params == nil || req.Params.RequestState == "" {
		return nil
	}
	ans := &approval.Answer{State: req.Params.RequestState, By: "mcp client " + clientName(req) + " (elicitation)"}
	if r, ok := req.Params.InputResponses[approvalKey].(*sdk.ElicitResult); ok && r.Action == "accept" {
		ans.Approved = r.Content["approve"] == true
	}
	return ans
}

// clientName is how the client names itself (self-declared; for the audit log only).
func clientName(req *sdk.CallToolRequest) string {
	if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
		return fmt.Sprintf("%q %s", ci.Name, ci.Version)
	}
	return "(unnamed)"
}

// canElicit reports whether the client behind req can be asked: it declares form elicitation,
// and either speaks 2026-07-28 (the question goes back in an input_required result) or holds a
// session the server may send elicitation/create on (stdio; a stateless HTTP server has no
// channel back to a 2025-11-25 client).
func canElicit(req *sdk.CallToolRequest, o Options) bool {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return false
	}
	if e := caps.Elicitation; e.Form == nil && e.URL != nil {
		return false // URL mode only
	}
	return req.ProtocolVersion() >= protocolMRTR || !o.Stateless
}

// askApproval turns an approval_required envelope into an input_required result asking the
// client, when the client and the operator's policy allow it; nil otherwise (the front end
// returns the error, whose hint names clihostctl approve).
func askApproval(env host.Envelope, req *sdk.CallToolRequest, o Options) *sdk.CallToolResult {
	if env.Error == nil || env.Error.Code != errcode.ApprovalRequired || env.Error.Approval == nil || !env.Error.Approval.Elicit {
		return nil
	}
	if req.Params.RequestState != "" || !canElicit(req, o) {
		return nil // a retry is answered, never asked again in the same round trip
	}
	a := env.Error.Approval
	return &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{approvalKey: &sdk.ElicitParams{Mode: "form", Message: a.Question, RequestedSchema: approvalSchema}},
		RequestState:  a.State,
	}
}
