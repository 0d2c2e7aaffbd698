package tests

import (
	"os"
	"strings"
	"testing"

	"github.com/clihost/clihost/internal/fixture"
)

// TestCallRefusesOptionInjection is issue 12's attack end to end: `clihostctl call` of a tool whose
// argv is ["-1", "${input.path}"] (ls -1 PATH). Before the fix "--version" reached ls and came back
// as its version; now every value starting with '-' is input_invalid, naming the input.
func TestCallRefusesOptionInjection(t *testing.T) {
	fixture.Need(t, "ls")
	dir := fixture.Write(t, fixture.LS())
	fixture.Reachable(t, dir)
	ws := fixture.Workspace(t)
	for _, v := range []string{"--version", "-la", "-R /", "--pre=/bin/sh"} {
		r := runBin(t, bin.ctl, "", "call", "--bundles", dir, "--audit", os.DevNull, "--workspace", ws, "ls", "list", "--input", `{"path": "`+v+`"}`)
		e := decodeEnvelope(t, r)
		if r.code != 1 || e.OK || e.Error == nil || e.Error.Code != "input_invalid" || e.Error.Pointer != "/path" || !strings.Contains(e.Error.Message, "input path") {
			t.Errorf("%q: exit %d %+v\n%s", v, r.code, e.Error, r.stdout)
		}
	}
	r := runBin(t, bin.ctl, "", "call", "--bundles", dir, "--audit", os.DevNull, "--workspace", ws, "ls", "list", "--input", `{"path": "."}`)
	if e := decodeEnvelope(t, r); r.code != 0 || !e.OK {
		t.Fatalf("ls -1 .: exit %d %+v\n%s", r.code, e.Error, r.stderr)
	}
	// Lint names the template and the glued form.
	r = runBin(t, bin.ctl, "", "lint", dir)
	if !strings.Contains(r.stdout, "warning: argv-option-value") || !strings.Contains(r.stdout, `"-1${input.path}"`) {
		t.Fatalf("lint: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
