package control

// The control API's own values. A call's result and the sandbox probe's are the leaf packages'
// (callresult, sandboxprobe), the same values the engine (package host) builds, so their JSON is
// one definition's; control imports no engine package.

// Caller is who made a request, as the backend gets it: the request's workspace ("" for the
// daemon's), the peer's user name (or uid) and its credentials (the server always sets Peer).
type Caller struct {
	Workspace string
	User      string
	Peer      *Peer
}
