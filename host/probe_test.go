package host

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// needSandbox skips t where the kernel sandbox cannot be built, except under CI=true.
func needSandbox(t *testing.T) {
	t.Helper()
	fixture.NeedSandbox(t, SandboxAvailable())
}

// TestProbeRunsASandboxedProcess: the probe starts test(1) in the workspace through the call path
// and reports it ran, as whom (a root host: the workspace's owner, never root), and the limits.
func TestProbeRunsASandboxedProcess(t *testing.T) {
	needSandbox(t)
	h := New(fixture.Registry(t, fixture.True()), Options{})
	ws := fixture.Workspace(t)
	p := h.Probe(context.Background(), ws)
	if !p.Works() || p.Error != "" || p.String() != ProbeWorks {
		t.Fatalf("probe = %+v, want it to work", p)
	}
	wantUID := os.Geteuid()
	if wantUID == 0 {
		wantUID = fixture.AgentID
	}
	if p.UID != wantUID || p.UserNS != (os.Geteuid() != 0) || p.Workspace != ws || len(p.Limits) == 0 || p.Took <= 0 {
		t.Fatalf("probe = %+v, want uid %d", p, wantUID)
	}
}

// TestProbeReportsTheFailureACallWouldGet: on a root host calls without a caller in root's folders
// run as nobody, who may not use a 0700 or 0711 (searchable, not readable) workspace: the probe
// still finds the sandbox working (it runs where nobody may) and reports the workspace_denied MCP
// clients' calls get there, with the fix. With the sandbox off the probe says off and starts
// nothing.
func TestProbeReportsTheFailureACallWouldGet(t *testing.T) {
	needSandbox(t)
	fixture.NeedRoot(t) // a root host runs calls as another user
	h := New(fixture.Registry(t, fixture.True()), Options{})
	ws := t.TempDir() // root's
	for _, mode := range []os.FileMode{0o700, 0o711} {
		if err := os.Chmod(ws, mode); err != nil {
			t.Fatal(err)
		}
		p := h.Probe(context.Background(), ws)
		if !p.Works() || p.Error != "" || p.UID != fixture.AgentID || p.Workspace != ws ||
			!strings.Contains(p.WorkspaceDenied, ws) || !strings.Contains(p.WorkspaceDenied, "65534") || !strings.Contains(p.Hint, "--agent-user") {
			t.Fatalf("%o: probe = %+v, want the sandbox working and the workspace denied to uid %d with the fix", mode, p, fixture.AgentID)
		}
	}
	fixture.Reachable(t, ws)
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	if p := h.Probe(context.Background(), ws); !p.Works() || p.WorkspaceDenied != "" {
		t.Fatalf("0777 (the positive control): probe = %+v, want it working with no workspace warning", p)
	}
	off := New(fixture.Registry(t, fixture.True()), Options{Sandbox: SandboxOptions{Off: true}})
	if p := off.Probe(context.Background(), ws); p.State != ProbeOff || p.Error != "" {
		t.Fatalf("sandbox off: probe = %+v", p)
	}
}
