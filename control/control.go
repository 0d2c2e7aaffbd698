// Package control is clihostd's control API: HTTP and JSON over a unix socket, admitting only the
// socket's owner, root and a configured group (checked with SO_PEERCRED on every connection), and
// the client clihostctl uses to talk to it.
package control

import (
	"encoding/json"
	"net/netip"
	"time"

	"github.com/clihost/clihost/callresult"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/sandboxprobe"
)

// API paths.
const (
	PathStatus  = "/v1/status"  // GET [?bundle=ID]
	PathInstall = "/v1/install" // POST InstallRequest → NDJSON InstallEvent stream
	// PathInstallRecord: POST RecordRequest → InstallEvent; root or the daemon's user only.
	PathInstallRecord = "/v1/install/record"
	PathCall          = "/v1/call"   // POST CallRequest → Envelope
	PathToken         = "/v1/token"  // GET → TokenInfo
	PathAudit         = "/v1/audit"  // GET [?follow=1][&rotated=1][&n=N][&since=RFC3339][&bundle=ID] → the audit log, NDJSON
	PathSetup         = "/v1/setup"  // GET ?bundle=&workspace= → SetupInfo; POST SetupRequest → NDJSON SetupEvent stream
	PathLogin         = "/v1/login"  // GET ?bundle= → LoginInfo; POST ScopeRequest → AuthResult (polls completes_when)
	PathLogout        = "/v1/logout" // POST ScopeRequest → AuthResult
)

// ScopeRequest names a bundle and the workspace whose setup or login it concerns (the user is the
// peer's). An empty workspace means the daemon's.
type ScopeRequest struct {
	Bundle    string `json:"bundle"`
	Workspace string `json:"workspace,omitempty"`
	// WaitSeconds bounds how long login waits for completes_when to pass (0: the daemon's default).
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// SetupStep is a pending setup step as clihostctl needs it to ask the person.
type SetupStep struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Type        string   `json:"type,omitempty"` // for prompts: text, select, boolean, secret
	Prompt      string   `json:"prompt,omitempty"`
	Description string   `json:"description,omitempty"`
	Default     string   `json:"default,omitempty"`
	Options     []string `json:"options,omitempty"` // static select options
	Done        bool     `json:"done"`
}

// SetupInfo is a bundle's setup as the daemon sees it for one scope.
type SetupInfo struct {
	Bundle    string      `json:"bundle"`
	Workspace string      `json:"workspace"`
	Steps     []SetupStep `json:"steps"`
}

// SetupRequest runs setup with the answers gathered by clihostctl.
type SetupRequest struct {
	ScopeRequest
	Values map[string]string `json:"values,omitempty"`
	Force  bool              `json:"force,omitempty"`
}

// SetupEvent is one line of a setup run: "visit" asks the person to open URL (the daemon waits on
// its callback, or, with UserCode, polls a device flow while the person types the code there), and
// the last line is "done" or "error".
type SetupEvent struct {
	Phase    string            `json:"phase"`
	Step     string            `json:"step,omitempty"`
	URL      string            `json:"url,omitempty"`
	UserCode string            `json:"user_code,omitempty"` // an oauth device flow's code (RFC 8628)
	Steps    []SetupStep       `json:"steps,omitempty"`
	Error    *callresult.Error `json:"error,omitempty"`
}

// LoginInfo tells clihostctl what to run in the person's terminal.
type LoginInfo struct {
	Bundle      string   `json:"bundle"`
	Argv        []string `json:"argv"` // login.cmd split, with the resolved binary first
	Interactive bool     `json:"interactive"`
	Workspace   string   `json:"workspace"`
	// RequiresCallbackURL is login.requires_callback_url: clihostctl allocates a loopback callback
	// URL for the command, forwards its port into the sandbox and passes the URL to it.
	RequiresCallbackURL bool `json:"requires_callback_url,omitempty"`
	// Sandbox is the bundle's kernel sandbox for the command (nil when the operator turned the
	// sandbox off); Home is the home directory ~ stands for in it. EnvPass and EnvSet are the
	// bundle's env block: clihostctl builds the command's environment from its own, never the
	// daemon's (which may hold tokens the person must not see).
	Sandbox *isolation.Plan   `json:"sandbox,omitempty"`
	Home    string            `json:"home,omitempty"`
	EnvPass []string          `json:"env_pass,omitempty"`
	EnvSet  map[string]string `json:"env_set,omitempty"`
	// Egress is the network the command may reach (the bundle's egress hosts, with the ports and
	// admitted ranges of the daemon's policy); nil: none.
	Egress *EgressPolicy `json:"egress,omitempty"`
}

// EgressPolicy is an egress.Policy as it travels to clihostctl.
type EgressPolicy struct {
	Allow     []string       `json:"allow"`
	Ports     []int          `json:"ports"`
	AdmitNets []netip.Prefix `json:"admit_nets,omitempty"`
	MaxConns  int            `json:"max_conns,omitempty"`
}

// AuthResult is a scope's auth state after login or logout.
type AuthResult struct {
	Phase  string            `json:"phase"`
	Reason string            `json:"reason,omitempty"`
	Error  *callresult.Error `json:"error,omitempty"`
}

// BundleStatus is one bundle as `clihostctl status` shows it.
type BundleStatus struct {
	ID      string `json:"id"`
	Major   uint64 `json:"major"`
	Key     string `json:"key"`
	Name    string `json:"name"`
	File    string `json:"file"`
	Tools   int    `json:"tools"`
	Install string `json:"install"` // installed, missing, version_mismatch, unverified (the sandbox refused the check), invalid
	BinPath string `json:"bin_path,omitempty"`
	Version string `json:"version,omitempty"` // the binary's version
	Setup   string `json:"setup"`             // none, pending, done
	Auth    string `json:"auth"`              // none, unknown, unauthed, logging_in, authed
	Sandbox string `json:"sandbox"`           // on, off (the operator ran clihostd --sandbox=off), or "unavailable: why"
	// Limits are the per-call resource limits of the bundle's commands and what enforces each.
	Limits []sandboxprobe.LimitMechanism `json:"limits,omitempty"`
	// Requires is the bundle's requires.min_disk_mb and min_memory_mb against what the daemon has;
	// nil when the bundle declares neither.
	Requires *RequiresStatus `json:"requires,omitempty"`
	Ready    bool            `json:"ready"`
	Reason   string          `json:"reason,omitempty"` // why not ready, with what to do
	Checked  time.Time       `json:"checked"`
	// Provider is set for a provider bundle (metadata.provider): how ask drives it and its
	// circuit breaker.
	Provider *ProviderStatus `json:"provider,omitempty"`
}

// RequiresStatus is a bundle's requires.min_disk_mb and min_memory_mb (0: none) next to the free
// disk on the filesystem its install writes to and the memory available to the daemon.
type RequiresStatus struct {
	MinDiskMB         int    `json:"min_disk_mb,omitempty"`
	MinMemoryMB       int    `json:"min_memory_mb,omitempty"`
	DiskPath          string `json:"disk_path,omitempty"`
	FreeDiskMB        int64  `json:"free_disk_mb"`
	AvailableMemoryMB int64  `json:"available_memory_mb"`
	MemoryBound       string `json:"memory_bound,omitempty"` // MemAvailable, or the daemon's cgroup memory limit
	Problem           string `json:"problem,omitempty"`      // what falls short, with both amounts; empty when met
	Hint              string `json:"hint,omitempty"`
}

// InstallRequest asks the daemon to install a bundle's CLI.
type InstallRequest struct {
	Bundle          string `json:"bundle"`
	AllowUnverified bool   `json:"allow_unverified,omitempty"`
	Force           bool   `json:"force,omitempty"` // reinstall even when the binary is present
	// HandOff says the caller runs install entries that need root itself (clihostctl under sudo).
	// A daemon that is not root honours it only for a root peer: it stops at the first such entry
	// and ends the stream with Phase "needs_root" naming it, instead of skipping it.
	HandOff bool `json:"hand_off,omitempty"`
	// From is the first install entry to try: the caller ran the earlier ones (after a hand-off).
	From int `json:"from,omitempty"`
}

// InstallEvent is one line of an install's progress stream; the last has Phase "done", "error" or
// (with InstallRequest.HandOff) "needs_root".
type InstallEvent struct {
	Phase   string            `json:"phase"` // checking, installing, progress, done, error, needs_root
	Message string            `json:"message,omitempty"`
	Done    int64             `json:"done,omitempty"`
	Total   int64             `json:"total,omitempty"`
	Method  string            `json:"method,omitempty"`
	BinPath string            `json:"bin_path,omitempty"`
	Version string            `json:"version,omitempty"`
	Error   *callresult.Error `json:"error,omitempty"`
	// NeedsRoot lists install entries the daemon did not run because they need root and it is not
	// root: with Phase "needs_root", the one entry handed to the caller; with Phase "error" and
	// error code "needs_root", every such entry the install skipped.
	NeedsRoot []RootEntry `json:"needs_root,omitempty"`
	// ElapsedMS and Output, with Phase "running" (about once a second while an install entry
	// runs): how long it has run and the last line its package manager or script printed.
	ElapsedMS int64  `json:"elapsed_ms,omitempty"`
	Output    string `json:"output,omitempty"`
}

// RootEntry is an install entry that needs root: a system package manager.
type RootEntry struct {
	Index   int    `json:"index"`   // its position in the bundle's install list
	Method  string `json:"method"`  // apt, dnf, pacman, pip
	Package string `json:"package"` // what it installs
	Tool    string `json:"tool"`    // the program that needs root: apt-get, dnf, pacman, pip
}

// RecordRequest asks the daemon to record install entry Index (its Method) of Bundle after the
// caller ran it as root. The daemon trusts nothing else from the caller: it finds the binary
// itself, checks its version in the sandbox, and records what it found.
type RecordRequest struct {
	Bundle string `json:"bundle"`
	Index  int    `json:"index"`
	Method string `json:"method"`
}

// CallRequest is a tool call made through the daemon.
type CallRequest struct {
	Bundle    string          `json:"bundle"`
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input,omitempty"`
	Workspace string          `json:"workspace"`
	// TimeoutMS, when positive, shortens the call's time limit (never lengthens it); a call
	// stopped at it keeps its partial stdout in the error (clihostctl ask's deadlines).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// TokenInfo tells an admitted user how to reach the MCP endpoints.
type TokenInfo struct {
	Name      string `json:"name"` // the agent's name ("default" for the daemon's first token)
	Token     string `json:"token"`
	MCPURL    string `json:"mcp_url"` // e.g. http://127.0.0.1:8931/mcp/{bundle}
	TokenFile string `json:"token_file"`
}

// errorBody is how the API reports a failed request.
type errorBody struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}
