package daemon

import (
	"context"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/agenttoken"
)

// Call implements control.Backend.
func (d *Engine) Call(ctx context.Context, req control.CallRequest, input map[string]any, peer control.Caller) callresult.Envelope {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return callresult.Envelope{Error: &callresult.Error{Code: errcode.NotFound, Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}}
	}
	caller := hostCaller(peer)
	ws, herr := d.workspaceFor(caller)
	if herr != nil {
		return callresult.Envelope{Error: herr}
	}
	caller.Workspace = ws
	return st.host.Call(ctx, b, req.Tool, input, caller, host.CallOptions{Via: approval.ViaControl})
}

// PendingApprovals implements control.ApprovalBackend.
func (d *Engine) PendingApprovals() []approval.Pending { return d.approvals.List() }

// PendingApproval implements control.ApprovalBackend.
func (d *Engine) PendingApproval(id string) (approval.Pending, error) { return d.approvals.Get(id) }

// AnswerApproval implements control.ApprovalBackend; the answer is audited.
func (d *Engine) AnswerApproval(id string, approve bool, by string) (approval.Pending, error) {
	return d.cur.Load().host.AnswerApproval(id, approve, by)
}

// Token implements control.Backend.
func (d *Engine) Token() control.TokenInfo {
	tok, _ := d.tokens.Token(agenttoken.Default)
	return control.TokenInfo{Name: agenttoken.Default, Token: tok, MCPURL: d.httpURL + "/mcp/{bundle}", TokenFile: d.tokenFile}
}

// Tokens implements control.TokenBackend.
func (d *Engine) Tokens() []agenttoken.Info { return d.tokens.List() }

// CreateToken implements control.TokenBackend.
func (d *Engine) CreateToken(name string) (control.TokenInfo, error) {
	tok, err := d.tokens.Create(name)
	if err != nil {
		return control.TokenInfo{}, err
	}
	d.auditRecord(tokenChange{Type: "cli.token", Name: name, Change: "created", TS: time.Now().UTC().Format(time.RFC3339Nano)})
	return control.TokenInfo{Name: name, Token: tok, MCPURL: d.httpURL + "/mcp/{bundle}", TokenFile: d.tokens.File(name)}, nil
}

// RevokeToken implements control.TokenBackend.
func (d *Engine) RevokeToken(name string) error {
	if err := d.tokens.Revoke(name); err != nil {
		return err
	}
	d.auditRecord(tokenChange{Type: "cli.token", Name: name, Change: "revoked", TS: time.Now().UTC().Format(time.RFC3339Nano)})
	return nil
}

// tokenChange is the cli.token audit entry: an agent token was made or revoked.
type tokenChange struct {
	Type   string `json:"type"`
	Name   string `json:"name"`
	Change string `json:"change"`
	TS     string `json:"ts"`
}

// AuditFile implements control.Backend.
func (d *Engine) AuditFile() string { return d.auditPath }
