package control

import (
	"encoding/json"
	"time"

	"github.com/clihost/clihost/errcode"
)

// The control API's own values. The daemon converts its engine's values (package host) into
// these at its edge (package daemon); clihostctl reads them. Their JSON is the API's: field names,
// order and omissions stay as they are, whatever the engine's types do.

// Envelope is a tool call's result (PathCall).
type Envelope struct {
	OK        bool   `json:"ok"`
	Value     any    `json:"value"`
	ExitCode  *int   `json:"exit_code,omitempty"`
	Truncated bool   `json:"truncated,omitempty"` // the output was larger than the capture limit and was cut
	Error     *Error `json:"error,omitempty"`
	MS        int64  `json:"ms"`
	// Warnings are what the caller must know about how the call ran (the sandbox was off).
	Warnings []string `json:"warnings,omitempty"`
}

// MarshalJSON leaves out value on failures and keeps it (even null) on success.
func (e Envelope) MarshalJSON() ([]byte, error) {
	type plain Envelope
	if e.OK {
		return json.Marshal(plain(e))
	}
	type failure struct {
		plain
		Value any `json:"value,omitempty"`
	}
	return json.Marshal(failure{plain: plain(e)})
}

// Error describes a failed call or request: Code is one of package errcode's codes (or a code a
// bundle names for its CLI's exit status), Hint says what to do.
type Error struct {
	Code         errcode.Code `json:"code"`
	Message      string       `json:"message"`
	Hint         string       `json:"hint,omitempty"`
	ExitCode     *int         `json:"exit_code,omitempty"`
	Stderr       string       `json:"stderr,omitempty"`
	Pointer      string       `json:"pointer,omitempty"` // JSON pointer of the offending input (input_invalid)
	Category     string       `json:"category,omitempty"`
	Retryable    bool         `json:"retryable,omitempty"`
	Fallback     bool         `json:"fallback,omitempty"`
	RetryAfterMS int64        `json:"retry_after_ms,omitempty"`
	// Approval is the pending approval an approval_required call waits for.
	Approval *ApprovalInfo `json:"approval,omitempty"`
}

// ApprovalInfo is the pending approval a call waits for: answer it with Client.AnswerApproval.
type ApprovalInfo struct {
	ID       string    `json:"id"`
	Deadline time.Time `json:"deadline"`
	Question string    `json:"question"`
}

// Caller is who made a request, as the backend gets it: the request's workspace ("" for the
// daemon's), the peer's user name (or uid) and its credentials (the server always sets Peer).
type Caller struct {
	Workspace string
	User      string
	Peer      *Peer
}

// Sandbox probe states (ProbeResult.State).
const (
	ProbeWorks       = "on"          // a sandboxed process ran and exited 0
	ProbeOff         = "off"         // the operator turned the sandbox off (--sandbox=off)
	ProbeUnavailable = "unavailable" // the sandbox could not be built, or the probe failed in it
)

// ProbeResult is what the daemon's sandbox probe found: one real sandboxed process, started as a
// call in the daemon's workspace would be.
type ProbeResult struct {
	State string `json:"state"` // ProbeWorks, ProbeOff or ProbeUnavailable
	// Error is the failure as a call would have got it (its message); Hint what to do.
	Error string `json:"error,omitempty"`
	Hint  string `json:"hint,omitempty"`
	// UID, GID and User are whom the probe ran as (the identity calls in the workspace run as).
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	User string `json:"user,omitempty"`
	// UserNS says whether the sandbox is built inside a user namespace (the daemon is not root).
	UserNS bool `json:"user_namespace"`
	// Workspace is the daemon's workspace, where the probe runs.
	Workspace string `json:"workspace"`
	// WorkspaceDenied, when set, says that the identity calls without a caller run as (MCP clients,
	// root callers) may not use the workspace; Hint says what to do.
	WorkspaceDenied string `json:"workspace_denied,omitempty"`
	// Limits are the per-call resource limits and the mechanism holding each on this host.
	Limits  []LimitMechanism `json:"limits,omitempty"`
	Checked time.Time        `json:"checked"`
	Took    time.Duration    `json:"took_ns"`
}

// Works reports whether the probe's process ran sandboxed.
func (p ProbeResult) Works() bool { return p.State == ProbeWorks }

// LimitMechanism is one per-call resource limit and what enforces it on the daemon's host.
type LimitMechanism struct {
	Limit     string `json:"limit"`     // memory, pids, cpu, nofile, fsize, tmpfs
	Value     string `json:"value"`     // the operator's limit, e.g. "1 GiB", or "none"
	Mechanism string `json:"mechanism"` // cgroup v2, cgroup v1, rlimit, size option, "none"
}
