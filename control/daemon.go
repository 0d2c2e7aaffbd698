package control

import (
	"context"

	"github.com/clihost/clihost/sandboxprobe"
)

// PathDaemon is the daemon's own state: GET [?probe=1] → DaemonStatus. With probe=1 the sandbox
// probe runs now; without it, a result younger than ProbeMaxAge is reused.
const PathDaemon = "/v1/daemon"

// DaemonStatus is the daemon as `clihostctl status` and `clihostctl doctor` show it: who it runs
// as, where its files are, what a real sandboxed process found, and which bundles it serves.
type DaemonStatus struct {
	Version   string `json:"version"`
	PID       int    `json:"pid"`
	UID       int    `json:"uid"`
	GID       int    `json:"gid"`
	User      string `json:"user,omitempty"`
	StateDir  string `json:"state_dir"`
	Socket    string `json:"socket"`
	TokenFile string `json:"token_file"`
	Workspace string `json:"workspace"`
	// Sandbox is the last probe: one sandboxed process started as a call in Workspace would be.
	Sandbox sandboxprobe.Result `json:"sandbox"`
	Bundles BundlesLoaded       `json:"bundles"`
}

// BundlesLoaded says what the daemon serves and from where.
type BundlesLoaded struct {
	Loaded  int      `json:"loaded"`  // bundles served
	Refused int      `json:"refused"` // bundles refused for lint errors or duplicate ids
	Sources []string `json:"sources"` // the folders searched, and "the built-in catalog"
	// Warnings are the bundle folders that are missing or empty, and "no bundles loaded".
	Warnings []string `json:"warnings,omitempty"`
}

// Daemon returns the daemon's state; probe runs the sandbox probe now.
func (c *Client) Daemon(ctx context.Context, probe bool) (DaemonStatus, error) {
	var d DaemonStatus
	path := PathDaemon
	if probe {
		path += "?probe=1"
	}
	return d, c.getJSON(ctx, path, &d)
}
