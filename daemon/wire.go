package daemon

import (
	"context"
	"slices"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
)

// The edge between the engine (package host) and the control API: a call's result and the sandbox
// probe's are the leaf packages' values (callresult, sandboxprobe) on both sides and pass as they
// are; the caller is the control API's own and is converted here.

// hostCaller is a control-socket peer as the host knows a caller.
func hostCaller(c control.Caller) host.Caller {
	return host.Caller{Workspace: c.Workspace, User: c.User, Peer: callerID(c.Peer)}
}

// callerID is a control-socket peer's identity as the host knows it; nil for none.
func callerID(p *control.Peer) *host.CallerID {
	if p == nil {
		return nil
	}
	return &host.CallerID{UID: p.UID, GID: p.GID, Groups: slices.Clone(p.Groups)}
}

// admit takes a place for the control request's peer among the calls in flight (host.Admit) before
// the request looks at a workspace it names or runs a program for it.
func (d *Engine) admit(ctx context.Context, peer control.Caller) (context.Context, func(), *host.Error) {
	return d.cur.Load().host.Admit(ctx, hostCaller(peer))
}
