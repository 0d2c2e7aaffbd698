// Package sandboxprobe is what the sandbox probe found: whether one real sandboxed process ran,
// as whom, and what enforces each per-call resource limit on the host. It is a leaf: package host
// runs the probe and fills these values, package control carries them to clihostctl status and
// clihostctl doctor, with one definition and one JSON.
package sandboxprobe

import "time"

// Probe states (Result.State).
const (
	Works       = "on"          // a sandboxed process ran and exited 0
	Off         = "off"         // the operator turned the sandbox off (--sandbox=off)
	Unavailable = "unavailable" // the sandbox could not be built, or the probe failed in it
)

// Result is what starting one real sandboxed process found: the state, who it ran as, and the
// exact failure when it did not run.
type Result struct {
	State string `json:"state"` // Works, Off or Unavailable
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
	// root callers) may not use the workspace: the probe then ran in a folder that identity owns,
	// and those calls are refused with workspace_denied (this message; Hint says what to do).
	WorkspaceDenied string `json:"workspace_denied,omitempty"`
	// Limits are the per-call resource limits and the mechanism holding each on this host.
	Limits  []LimitMechanism `json:"limits,omitempty"`
	Checked time.Time        `json:"checked"`
	Took    time.Duration    `json:"took_ns"`
}

// Works reports whether the probe's process ran sandboxed.
func (r Result) Works() bool { return r.State == Works }

// String is the state as one line: "on", "off", or "unavailable: why".
func (r Result) String() string {
	if r.Error != "" {
		return r.State + ": " + r.Error
	}
	return r.State
}

// LimitMechanism is one per-call resource limit and what enforces it on the host.
type LimitMechanism struct {
	Limit     string `json:"limit"`     // memory, pids, cpu, nofile, fsize, tmpfs
	Value     string `json:"value"`     // the operator's limit, e.g. "1 GiB", or "none"
	Mechanism string `json:"mechanism"` // cgroup v2, cgroup v1, rlimit, size option, "none"
}
