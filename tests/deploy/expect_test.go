package deploy

// The assertions on behaviour issue 11 adds, with the names docs/identity.md and the issue give
// them, kept here so that one place changes if a name does.

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// bundleStatus is one bundle of `clihostctl status --json`.
type bundleStatus struct {
	Key, Install, Version, Reason, Sandbox string
	Ready                                  bool
}

// statusView is `clihostctl status --json`: the bundles, and the daemon's sandbox probe when the
// status has one ({"daemon": {"sandbox": {"state": …, "error": …}}, "bundles": […]}; before the
// probe, status was the bundles' array alone and each bundle's "sandbox" said "on").
type statusView struct {
	bundles []bundleStatus
	probe   *struct{ State, Error string }
}

// parseStatus reads either shape.
func parseStatus(out string) (statusView, error) {
	var v statusView
	if err := json.Unmarshal([]byte(out), &v.bundles); err == nil {
		return v, nil
	}
	var obj struct {
		Daemon struct {
			Sandbox *struct{ State, Error string }
		}
		Bundles []bundleStatus
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		return v, err
	}
	v.bundles, v.probe = obj.Bundles, obj.Daemon.Sandbox
	return v, nil
}

// sandboxReported is what status says of the kernel sandbox: working when the daemon's real probe
// under its own identity found it working ("on"), with its text ("on", "off" or "unavailable:
// why"); without a probe in the status, when every bundle's "sandbox" is "on".
func sandboxReported(st statusView) (working bool, text string) {
	if st.probe != nil {
		text = st.probe.State
		if st.probe.Error != "" {
			text += ": " + st.probe.Error
		}
		return st.probe.State == "on", text
	}
	if len(st.bundles) == 0 {
		return false, "(no bundles)"
	}
	for _, b := range st.bundles {
		if b.Sandbox != "on" {
			return false, b.Sandbox
		}
	}
	return true, st.bundles[0].Sandbox
}

// expectSandboxTruthful fails t when status's sandbox disagrees with what a real call found:
// "on" while calls fail in the sandbox, or anything else while they run.
func expectSandboxTruthful(t *testing.T, what string, st statusView, callsWork bool, call envelope) {
	t.Helper()
	working, text := sandboxReported(st)
	switch {
	case working && !callsWork:
		t.Errorf("%s: status says the sandbox is %q, but a sandboxed call failed: the status must report a real probe under the daemon's identity\n%v", what, text, call.raw)
	case !working && callsWork:
		t.Errorf("%s: status says the sandbox is %q, but sandboxed calls run", what, text)
	}
}

// expectSandboxRefused fails t unless e is a call refused because the sandbox cannot be built
// here (code sandbox_unavailable): never run without it, nor blamed on the bundle (a version
// check "could not run" is the host's sandbox, not the bundle's version_check).
func expectSandboxRefused(t *testing.T, what string, e envelope) {
	t.Helper()
	if e.OK || e.Error == nil || e.Error.Code != "sandbox_unavailable" {
		t.Errorf("%s: a call must be refused with sandbox_unavailable (fail closed, naming the host's sandbox as the cause); got:\n%v", what, e.raw)
	}
}

// builtinCatalog is the number of bundles in the built-in catalog (bundles/).
const builtinCatalog = 16

// expectCatalogPlus fails t unless status lists the built-in catalog (jq among it) and the
// operator's bundle key: --bundles adds to the catalog instead of replacing it.
func expectCatalogPlus(t *testing.T, what string, view statusView, key string) {
	t.Helper()
	st := view.bundles
	has := map[string]bool{}
	for _, b := range st {
		has[b.Key] = true
	}
	if !has[key] {
		t.Errorf("%s: status does not list the operator's bundle %s from the --bundles folder; it lists %v", what, key, keys(st))
	}
	if !has["jq@1"] || len(st) < builtinCatalog+1 {
		t.Errorf("%s: status lists %d bundles %v; want the built-in catalog (%d, jq@1 among them) plus the --bundles folder's %s: --bundles adds to the catalog",
			what, len(st), keys(st), builtinCatalog, key)
	}
}

func keys(st []bundleStatus) []string {
	k := make([]string, len(st))
	for i, b := range st {
		k[i] = b.Key
	}
	return k
}

// expectWorkspaceDenied fails t unless e is the refusal `workspace_denied` naming the workspace ws
// and the identity refused (its uid or name), and, when fix is true, the fix: an --agent-user
// granted the workspace (setfacl or chown), or a workspace that user owns.
func expectWorkspaceDenied(t *testing.T, what string, e envelope, ws string, who *account, uid int, fix bool) {
	t.Helper()
	if e.OK {
		t.Errorf("%s: the call in %s should be refused with workspace_denied (%v may not use it); it ran:\n%v", what, ws, who, e.raw)
		return
	}
	if e.Error == nil || e.Error.Code != "workspace_denied" {
		t.Errorf("%s: the call in %s should be refused with code workspace_denied, naming the workspace, uid %d and the fix; got:\n%v", what, ws, uid, e.raw)
		return
	}
	msg := e.Error.Message + "\n" + e.Error.Hint
	if !strings.Contains(msg, ws) {
		t.Errorf("%s: workspace_denied does not name the workspace %s: %q", what, ws, msg)
	}
	if !strings.Contains(msg, strconv.Itoa(uid)) && (who == nil || !strings.Contains(msg, who.name)) {
		t.Errorf("%s: workspace_denied does not name the uid %d (%v): %q", what, uid, who, msg)
	}
	if fix && (!strings.Contains(msg, "--agent-user") || !strings.Contains(msg, "setfacl")) {
		t.Errorf("%s: workspace_denied does not name the fix (clihostd --agent-user NAME and setfacl -m u:NAME:rwX -R WS, or chown): %q", what, msg)
	}
	if strings.Contains(msg, "permission denied") && strings.Contains(msg, "exec ") {
		t.Errorf("%s: the refusal is the exec's permission denied, not workspace_denied: %q", what, msg)
	}
}

// expectSocketRefused fails t unless the call as a was refused at the control socket: the socket
// file's permissions (connect: permission denied) or the daemon's admission (403).
func expectSocketRefused(t *testing.T, what string, a *account, e envelope) {
	t.Helper()
	out := strings.ToLower(e.raw.stdout + e.raw.stderr)
	// A call envelope (even a failed one) means the request got past the socket.
	if e.OK || e.Error != nil || e.raw.code == 0 || !(strings.Contains(out, "permission denied") || strings.Contains(out, "403") || strings.Contains(out, "may not use")) {
		t.Errorf("%s: %v (not in the socket's group) should be refused at the control socket; got:\n%v", what, a, e.raw)
	}
	// Refused by the kernel (the socket or its folder), the error says whom the daemon admits.
	if strings.Contains(out, "permission denied") && !strings.Contains(out, "members of its --group") {
		t.Errorf("%s: %v refused at the control socket without saying whom it admits; got:\n%v", what, a, e.raw)
	}
}

// expectDoctor fails t unless `clihostctl doctor` (as root, against the daemon's socket) exists and
// reports on the running daemon: its identity (the user it runs as, by name or uid) with the real
// probe under it. Whether the host is healthy is its exit status (0 or 1), not checked here: the
// test hosts lack cgroup delegation.
func expectDoctor(t *testing.T, what string, d *daemon, runsAs *account) {
	t.Helper()
	r := ctl(t, nil, d.socket, "doctor")
	out := r.stdout + r.stderr
	if (r.code != 0 && r.code != 1) || strings.Contains(out, "unknown command") || !(strings.Contains(out, runsAs.name) || strings.Contains(out, strconv.Itoa(runsAs.uid))) {
		t.Errorf("%s: clihostctl doctor must report the daemon's identity (%v) and its sandbox probe, exiting 0 (healthy) or 1; got:\n%v", what, runsAs, r)
	}
}
