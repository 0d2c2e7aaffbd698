package daemon

import (
	"slices"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
)

// The edge between the engine (package host) and the control API's own values: the API's types
// stand alone (package control imports no engine package), so the daemon converts here.

// wireEnvelope is a call's result as the control API sends it.
func wireEnvelope(e host.Envelope) control.Envelope {
	return control.Envelope{OK: e.OK, Value: e.Value, ExitCode: e.ExitCode, Truncated: e.Truncated,
		Error: wireError(e.Error), MS: e.MS, Warnings: e.Warnings}
}

// wireError is a host error as the control API sends it; nil stays nil. The approval's elicitation
// state never leaves the daemon (it is not in the host's JSON either).
func wireError(e *host.Error) *control.Error {
	if e == nil {
		return nil
	}
	w := &control.Error{Code: e.Code, Message: e.Message, Hint: e.Hint, ExitCode: e.ExitCode, Stderr: e.Stderr,
		Pointer: e.Pointer, Category: e.Category, Retryable: e.Retryable, Fallback: e.Fallback, RetryAfterMS: e.RetryAfterMS}
	if a := e.Approval; a != nil {
		w.Approval = &control.ApprovalInfo{ID: a.ID, Deadline: a.Deadline, Question: a.Question}
	}
	return w
}

// wireProbe is the sandbox probe's result as the control API sends it.
func wireProbe(p host.ProbeResult) control.ProbeResult {
	return control.ProbeResult{State: p.State, Error: p.Error, Hint: p.Hint, UID: p.UID, GID: p.GID, User: p.User,
		UserNS: p.UserNS, Workspace: p.Workspace, WorkspaceDenied: p.WorkspaceDenied, Limits: wireLimits(p.Limits),
		Checked: p.Checked, Took: p.Took}
}

// wireLimits are the per-call limits and their mechanisms as the control API sends them.
func wireLimits(ls []host.LimitMechanism) []control.LimitMechanism {
	if ls == nil {
		return nil
	}
	out := make([]control.LimitMechanism, len(ls))
	for i, l := range ls {
		out[i] = control.LimitMechanism{Limit: l.Limit, Value: l.Value, Mechanism: l.Mechanism}
	}
	return out
}

// hostCaller is a control-socket peer as the host knows a caller.
func hostCaller(c control.Caller) host.Caller {
	hc := host.Caller{Workspace: c.Workspace, User: c.User}
	if p := c.Peer; p != nil {
		hc.Peer = &host.CallerID{UID: p.UID, GID: p.GID, Groups: slices.Clone(p.Groups)}
	}
	return hc
}
