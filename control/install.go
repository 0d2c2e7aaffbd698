package control

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// PeerOf is the control-socket peer whose request ctx belongs to (SO_PEERCRED, recorded by
// ConnContext); false outside a control request.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// recordHandler serves PathInstallRecord to root and the daemon's own user only.
//
// A record says "an administrator installed this bundle's CLI with a package manager": the daemon
// then finds the binary itself, checks its version in the sandbox and stores the result, exactly
// as after an install it ran. The daemon trusts none of the caller's word for the path or the
// version, so a record cannot make it accept a binary a call would not; still, only the peers that
// could have run the package manager (root) or that own the state anyway (the daemon's uid) may
// ask. A member of --group cannot install system packages, so a record from one could only
// attribute an install to a package manager that never ran: refused.
func recordHandler(b Backend, a Admission) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.operatorOnly(w, r, "only root or clihostd's own user may record an install",
			"run: sudo clihostctl install BUNDLE (it runs the package manager as root, then asks the daemon to check and record it)") {
			return
		}
		var req RecordRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, "bad install record request: "+err.Error(), "")
			return
		}
		writeJSON(w, b.RecordInstall(r.Context(), req))
	}
}

// tokenHandler serves PathToken to root and the daemon's own user only: the bearer token of the MCP
// endpoints, the one secret the token file (0600, the daemon's) keeps from everyone else. An MCP
// client runs as the agent (--agent-user, the workspace's owner, or the daemon's own uid) in the
// daemon's --workspace; handing the token to a member of --group would let that member run CLIs
// as the agent in a workspace the member may not use itself, which the control socket refuses it.
func tokenHandler(b Backend, a Admission) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.operatorOnly(w, r, "only root or clihostd's own user may read the MCP bearer token",
			"the token lets its holder act as the daemon's agent in its workspace: ask the operator (sudo clihostctl token)") {
			return
		}
		writeJSON(w, b.Token())
	}
}
