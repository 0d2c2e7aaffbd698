package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

type envelope struct {
	OK       bool
	Value    any
	ExitCode *int `json:"exit_code"`
	Error    *struct {
		Code, Message, Hint, Pointer string
	}
}

func decodeEnvelope(t *testing.T, r result) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("exit %d, not an envelope: %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return e
}

// TestCallCommand runs `clihostctl call` as a user would, against the real jq and git.
func TestCallCommand(t *testing.T) {
	fixture.Need(t, "jq", "git")
	ws := fixture.Workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "data.json"), []byte(`{"items":[{"n":1},{"n":2}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	r := runBin(t, bin.ctl, "", "call", "jq", "filter", "--workspace", ws, "--audit", audit, "--input", `{"filter": "[.items[].n] | add", "files": ["data.json"]}`)
	if e := decodeEnvelope(t, r); r.code != 0 || !e.OK || e.Value != "3\n" {
		t.Fatalf("jq filter: exit %d %+v\n%s", r.code, e, r.stderr)
	}
	r = runBin(t, bin.ctl, "", "call", "jq", "filter", "--workspace", ws, "--audit", audit, "--input", `{"filter": "."}`)
	if e := decodeEnvelope(t, r); r.code != 1 || e.OK || e.Error.Code != "input_invalid" || e.Error.Hint == "" {
		t.Fatalf("missing input: exit %d %+v", r.code, e)
	}
	lines, err := os.ReadFile(audit)
	if err != nil || strings.Count(string(lines), `"type":"cli.invoked"`) != 2 || strings.Contains(string(lines), "items[]") {
		t.Fatalf("audit log: %v\n%s", err, lines)
	}
	if r := runBin(t, bin.ctl, "", "call", "jq", "filter", "--input", "{not json"); r.code != 2 {
		t.Fatalf("bad --input: exit %d %s", r.code, r.stderr)
	}
}

// TestCallUnseenBundle calls a spec-written bundle whose binary is not installed here.
func TestCallUnseenBundle(t *testing.T) {
	r := runBin(t, bin.ctl, "", "call", "--bundles", "testdata/unseen", "--audit", os.DevNull, "stripe", "customers list", "--input", `{"limit": 3}`)
	e := decodeEnvelope(t, r)
	if r.code != 1 || e.Error == nil || e.Error.Code != "not_installed" || !strings.Contains(e.Error.Hint, "apt-get install stripe") {
		t.Fatalf("exit %d %+v", r.code, e)
	}
	r = runBin(t, bin.ctl, "", "call", "--bundles", "testdata/unseen", "--audit", os.DevNull, "stripe", "customers.list", "--input", `{"limit": 0}`)
	if e := decodeEnvelope(t, r); e.Error == nil || e.Error.Code != "input_invalid" || e.Error.Pointer != "/limit" {
		t.Fatalf("invalid input is reported before the binary is looked for: %+v", e)
	}
}
