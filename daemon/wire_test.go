package daemon

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
)

// TestWireJSON: the control API's own types put on the wire exactly the bytes the host's values
// did before they had their own (every field set, a failure and a success, nil error and limits).
func TestWireJSON(t *testing.T) {
	exit := 3
	at := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	herr := &host.Error{Code: errcode.ApprovalRequired, Message: "m", Hint: "h", ExitCode: &exit, Stderr: "s", Pointer: "/p",
		Category: "approval", Retryable: true, Fallback: true, RetryAfterMS: 5,
		Approval: &host.ApprovalInfo{ID: "a1", Deadline: at, Question: "q?", Elicit: true, State: "signed"}}
	limits := []host.LimitMechanism{{Limit: "memory", Value: "1 GiB", Mechanism: "cgroup v2"}}
	same := func(name string, h, w any) {
		t.Helper()
		hb, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		wb, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if string(hb) != string(wb) {
			t.Errorf("%s:\nhost    %s\ncontrol %s", name, hb, wb)
		}
	}
	for _, e := range []host.Envelope{
		{Error: herr, ExitCode: &exit, MS: 7, Warnings: []string{"w"}, Value: "dropped on failure"},
		{OK: true, Value: map[string]any{"k": []any{1.5, "v"}}, ExitCode: &exit, Truncated: true, MS: 1},
		{OK: true},
		{},
	} {
		same("envelope", e, wireEnvelope(e))
	}
	same("error", herr, wireError(herr))
	if wireError(nil) != nil {
		t.Error("wireError(nil) is not nil")
	}
	for _, p := range []host.ProbeResult{
		{State: host.ProbeWorks, Error: "e", Hint: "h", UID: 1, GID: 2, User: "u", UserNS: true, Workspace: "/w",
			WorkspaceDenied: "d", Limits: limits, Checked: at, Took: time.Second},
		{State: host.ProbeOff},
	} {
		same("probe", p, wireProbe(p))
	}
	same("limits", limits, wireLimits(limits))
	same("no limits", []host.LimitMechanism(nil), wireLimits(nil))
	if control.ProbeWorks != host.ProbeWorks || control.ProbeOff != host.ProbeOff || control.ProbeUnavailable != host.ProbeUnavailable {
		t.Error("the probe states differ between host and control")
	}
}

// TestHostCaller: a control peer arrives at the host with its credentials (a copy of its groups);
// a caller without a peer has none.
func TestHostCaller(t *testing.T) {
	groups := []int{4, 5}
	c := hostCaller(control.Caller{Workspace: "/w", User: "u", Peer: &control.Peer{UID: 1, GID: 2, PID: 3, Groups: groups}})
	if c.Workspace != "/w" || c.User != "u" || c.Peer == nil || c.Peer.UID != 1 || c.Peer.GID != 2 || len(c.Peer.Groups) != 2 || c.Peer.Groups[1] != 5 {
		t.Fatalf("hostCaller = %+v (%+v)", c, c.Peer)
	}
	groups[0] = 0
	if c.Peer.Groups[0] != 4 {
		t.Error("the groups were not copied")
	}
	if c := hostCaller(control.Caller{User: "u"}); c.Peer != nil {
		t.Errorf("no peer became %+v", c.Peer)
	}
}
