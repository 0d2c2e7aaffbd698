package daemon

import (
	"slices"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/host"
)

// The edge between the engine (package host) and the control API: a call's result and the sandbox
// probe's are the leaf packages' values (callresult, sandboxprobe) on both sides and pass as they
// are; the caller is the control API's own and is converted here.

// hostCaller is a control-socket peer as the host knows a caller.
func hostCaller(c control.Caller) host.Caller {
	hc := host.Caller{Workspace: c.Workspace, User: c.User}
	if p := c.Peer; p != nil {
		hc.Peer = &host.CallerID{UID: p.UID, GID: p.GID, Groups: slices.Clone(p.Groups)}
	}
	return hc
}
