package daemon

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/clihost/clihost/approval"
	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/agenttoken"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
)

// Call implements control.Backend.
func (d *Engine) Call(ctx context.Context, req control.CallRequest, input map[string]any, peer control.Caller) callresult.Envelope {
	st := d.cur.Load()
	b, err := st.host.Bundle(req.Bundle)
	if err != nil {
		return callresult.Envelope{Error: &callresult.Error{Code: errcode.NotFound, Message: err.Error(), Hint: "clihostctl status lists the loaded bundles"}}
	}
	caller := hostCaller(peer)
	// The place is taken before the workspace the caller names is looked at: a file system that
	// does not answer holds this request's thread for good, and so its place.
	ctx, done, aerr := st.host.Admit(ctx, caller)
	if aerr != nil {
		return callresult.Envelope{Error: aerr}
	}
	defer done()
	ws, herr := d.workspaceFor(caller)
	if herr != nil {
		return callresult.Envelope{Error: herr}
	}
	caller.Workspace = ws
	opts := host.CallOptions{Via: approval.ViaControl, Timeout: time.Duration(req.TimeoutMS) * time.Millisecond}
	spec, isProvider := output.ProviderOf(b)
	if !isProvider || b.Tool(req.Tool) != b.Tool(spec.Tool) {
		return st.host.Call(ctx, b, req.Tool, input, caller, opts)
	}
	// A provider tool: its circuit breaker admits the call (or refuses it) and counts its outcome.
	key := breakerKey(b.Key(), peer.Peer)
	probe, refusal := d.breakers.admit(key)
	if refusal != nil {
		return callresult.Envelope{Error: refusal}
	}
	env := st.host.Call(ctx, b, req.Tool, input, caller, opts)
	outcome, why := providerOutcome(env, spec.Format)
	if outcome == outcomeFailed && callerCut(env, opts.Timeout, host.TimeLimit(b, req.Tool), spec.Format) {
		outcome = outcomeNeutral
	}
	threshold, cooldown := d.breakerLimits()
	d.breakers.record(key, probe, outcome, why, threshold, cooldown)
	return env
}

// breakerKey names the breaker of bundle for the control peer p (nil outside a control request):
// each user has their own, since each has their own login, setup and quota, and one user's failing
// calls must not shut a provider for the others.
func breakerKey(bundle string, p *control.Peer) string {
	if p == nil {
		return bundle
	}
	return bundle + "\x00" + strconv.Itoa(p.UID)
}

// peerOf is the control peer of ctx's request, nil outside one.
func peerOf(ctx context.Context) *control.Peer {
	if p, ok := control.PeerOf(ctx); ok {
		return &p
	}
	return nil
}

// breakerLimits are the configured threshold and cool-down of the providers' circuit breakers.
func (d *Engine) breakerLimits() (int, time.Duration) {
	threshold, cooldown := d.cfg.BreakerThreshold, d.cfg.BreakerCooldown
	if threshold < 1 {
		threshold = DefaultBreakerThreshold
	}
	if cooldown <= 0 {
		cooldown = DefaultBreakerCooldown
	}
	return threshold, cooldown
}

// Providers implements control.ProviderBackend: the provider bundles and the breakers of the
// peer whose request ctx belongs to.
func (d *Engine) Providers(ctx context.Context, name string) ([]control.ProviderStatus, error) {
	st := d.cur.Load()
	var out []control.ProviderStatus
	for _, e := range st.reg.Entries() {
		b := e.Bundle
		if name != "" && b.ID() != name && b.Key() != name {
			continue
		}
		if p := d.providerStatus(ctx, b); p != nil {
			out = append(out, *p)
		}
	}
	if name != "" && len(out) == 0 {
		if _, err := st.reg.Get(name); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("bundle %s is not a provider (it has no metadata.provider block)", name)
	}
	return out, nil
}

// providerStatus is b's provider spec and the breaker of ctx's peer, nil when b is not a provider
// bundle.
func (d *Engine) providerStatus(ctx context.Context, b *manifest.Bundle) *control.ProviderStatus {
	spec, ok := output.ProviderOf(b)
	if !ok {
		return nil
	}
	threshold, cooldown := d.breakerLimits()
	return &control.ProviderStatus{Bundle: b.Key(), ID: b.ID(), Tool: spec.Tool, Format: spec.Format, Model: spec.Model,
		Breaker: d.breakers.state(breakerKey(b.Key(), peerOf(ctx)), threshold, cooldown)}
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
