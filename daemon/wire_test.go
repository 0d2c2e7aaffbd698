package daemon

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/host"
)

// TestWireJSON: a call's result and the sandbox probe's put on the control API's wire exactly the
// bytes they did when control had its own copies of the types (the golden strings were captured
// from that code, at 65647e4): every field set, a failure and a success, nil error and limits, and
// an approval's elicitation state never on the wire.
func TestWireJSON(t *testing.T) {
	exit := 3
	at := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	herr := &host.Error{Code: errcode.ApprovalRequired, Message: "m", Hint: "h", ExitCode: &exit, Stderr: "s", Pointer: "/p",
		Category: "approval", Retryable: true, Fallback: true, RetryAfterMS: 5,
		Approval: &host.ApprovalInfo{ID: "a1", Deadline: at, Question: "q?", Elicit: true, State: "signed"}}
	limits := []host.LimitMechanism{{Limit: "memory", Value: "1 GiB", Mechanism: "cgroup v2"}}
	const errJSON = `{"code":"approval_required","message":"m","hint":"h","exit_code":3,"stderr":"s","pointer":"/p","category":"approval","retryable":true,"fallback":true,"retry_after_ms":5,"approval":{"id":"a1","deadline":"2026-11-26T02:00:00Z","question":"q?"}}`
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"failure", host.Envelope{Error: herr, ExitCode: &exit, MS: 7, Warnings: []string{"w"}, Value: "dropped on failure"},
			`{"ok":false,"exit_code":3,"error":{"code":"approval_required","message":"m","hint":"h","exit_code":3,"stderr":"s","pointer":"/p","category":"approval","retryable":true,"fallback":true,"retry_after_ms":5,"approval":{"id":"a1","deadline":"2026-11-26T02:00:00Z","question":"q?"}},"ms":7,"warnings":["w"]}`},
		{"success", host.Envelope{OK: true, Value: map[string]any{"k": []any{1.5, "v"}}, ExitCode: &exit, Truncated: true, MS: 1},
			`{"ok":true,"value":{"k":[1.5,"v"]},"exit_code":3,"truncated":true,"ms":1}`},
		{"null value", host.Envelope{OK: true}, `{"ok":true,"value":null,"ms":0}`},
		{"zero", host.Envelope{}, `{"ok":false,"ms":0}`},
		{"error", herr, errJSON},
		{"probe", host.ProbeResult{State: host.ProbeWorks, Error: "e", Hint: "h", UID: 1, GID: 2, User: "u", UserNS: true, Workspace: "/w",
			WorkspaceDenied: "d", Limits: limits, Checked: at, Took: time.Second},
			`{"state":"on","error":"e","hint":"h","uid":1,"gid":2,"user":"u","user_namespace":true,"workspace":"/w","workspace_denied":"d","limits":[{"limit":"memory","value":"1 GiB","mechanism":"cgroup v2"}],"checked":"2026-11-26T02:00:00Z","took_ns":1000000000}`},
		{"probe off", host.ProbeResult{State: host.ProbeOff}, `{"state":"off","uid":0,"gid":0,"user_namespace":false,"workspace":"","checked":"0001-01-01T00:00:00Z","took_ns":0}`},
		{"limits", limits, `[{"limit":"memory","value":"1 GiB","mechanism":"cgroup v2"}]`},
		{"no limits", []host.LimitMechanism(nil), `null`},
		{"auth", control.AuthResult{Phase: "error", Error: herr}, `{"phase":"error","error":` + errJSON + `}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, b, c.want)
		}
	}
	if host.ProbeWorks != "on" || host.ProbeOff != "off" || host.ProbeUnavailable != "unavailable" {
		t.Error("the probe states changed")
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
