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
	if err := SandboxAvailable(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the sandbox is unavailable under CI=true: %v", err)
		}
		t.Skip(err)
	}
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

// TestProbeReportsTheFailureACallWouldGet: on a root host calls in root's folders run as nobody.
// A 0700 workspace fails the probe with the error a call gets (the program cannot even be
// started there); a 0711 one (searchable, not readable) fails it naming the uid and the
// workspace. With the sandbox off the probe says off and starts nothing.
func TestProbeReportsTheFailureACallWouldGet(t *testing.T) {
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: a root host runs calls as another user")
	}
	h := New(fixture.Registry(t, fixture.True()), Options{})
	ws := t.TempDir() // root's
	if err := os.Chmod(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	p := h.Probe(context.Background(), ws)
	if p.Works() || p.State != ProbeUnavailable || !strings.Contains(p.Error, "sandbox unavailable: exec /usr/bin/test: permission denied") ||
		p.Hint == "" || p.UID != fixture.AgentID {
		t.Fatalf("0700: probe = %+v, want the exec refused as uid %d", p, fixture.AgentID)
	}
	if err := os.Chmod(ws, 0o711); err != nil {
		t.Fatal(err)
	}
	p = h.Probe(context.Background(), ws)
	if want := "uid 65534 (nobody) cannot read and search the workspace " + ws + ": calls there fail"; p.State != ProbeUnavailable || p.Error != want {
		t.Fatalf("0711: probe = %+v, want %q", p, want)
	}
	off := New(fixture.Registry(t, fixture.True()), Options{Sandbox: SandboxOptions{Off: true}})
	if p := off.Probe(context.Background(), ws); p.State != ProbeOff || p.Error != "" {
		t.Fatalf("sandbox off: probe = %+v", p)
	}
}
