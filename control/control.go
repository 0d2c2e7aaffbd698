// Package control is clihostd's control API: HTTP and JSON over a unix socket, admitting only the
// socket's owner, root and a configured group (checked with SO_PEERCRED on every connection), and
// the client clihostctl uses to talk to it.
package control

import (
	"encoding/json"
	"time"

	"github.com/clihost/clihost/host"
)

// API paths.
const (
	PathStatus  = "/v1/status"  // GET [?bundle=ID]
	PathInstall = "/v1/install" // POST InstallRequest → NDJSON InstallEvent stream
	PathCall    = "/v1/call"    // POST CallRequest → host.Envelope
	PathToken   = "/v1/token"   // GET → TokenInfo
	PathAudit   = "/v1/audit"   // GET [?follow=1] → the audit log, NDJSON
)

// BundleStatus is one bundle as `clihostctl status` shows it.
type BundleStatus struct {
	ID      string    `json:"id"`
	Major   uint64    `json:"major"`
	Key     string    `json:"key"`
	Name    string    `json:"name"`
	File    string    `json:"file"`
	Tools   int       `json:"tools"`
	Install string    `json:"install"` // installed, missing, version_mismatch, invalid
	BinPath string    `json:"bin_path,omitempty"`
	Version string    `json:"version,omitempty"` // the binary's version
	Setup   string    `json:"setup"`             // none, pending, done
	Auth    string    `json:"auth"`              // none, unknown, unauthed, logging_in, authed
	Ready   bool      `json:"ready"`
	Reason  string    `json:"reason,omitempty"` // why not ready, with what to do
	Checked time.Time `json:"checked"`
}

// InstallRequest asks the daemon to install a bundle's CLI.
type InstallRequest struct {
	Bundle          string `json:"bundle"`
	AllowUnverified bool   `json:"allow_unverified,omitempty"`
	Force           bool   `json:"force,omitempty"` // reinstall even when the binary is present
}

// InstallEvent is one line of an install's progress stream; the last has Phase "done" or "error".
type InstallEvent struct {
	Phase   string      `json:"phase"` // checking, installing, progress, done, error
	Message string      `json:"message,omitempty"`
	Done    int64       `json:"done,omitempty"`
	Total   int64       `json:"total,omitempty"`
	Method  string      `json:"method,omitempty"`
	BinPath string      `json:"bin_path,omitempty"`
	Version string      `json:"version,omitempty"`
	Error   *host.Error `json:"error,omitempty"`
}

// CallRequest is a tool call made through the daemon.
type CallRequest struct {
	Bundle    string          `json:"bundle"`
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input,omitempty"`
	Workspace string          `json:"workspace"`
}

// TokenInfo tells an admitted user how to reach the MCP endpoints.
type TokenInfo struct {
	Token     string `json:"token"`
	MCPURL    string `json:"mcp_url"` // e.g. http://127.0.0.1:8931/mcp/{bundle}
	TokenFile string `json:"token_file"`
}

// errorBody is how the API reports a failed request.
type errorBody struct {
	Error string `json:"error"`
	Hint  string `json:"hint,omitempty"`
}
