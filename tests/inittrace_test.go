package tests

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// initMarker is argv[1] of a sandbox init (sandbox/nsinit).
const initMarker = "__clihost_init"

// heavyInits are packages whose initialisation costs milliseconds (jsonschema/v5 compiles its
// meta-schemas; the others compile patterns or build the HTTP stack) and that the sandbox's init
// does not need.
var heavyInits = []string{
	"github.com/santhosh-tekuri/jsonschema/v5", "github.com/clihost/clihost/manifest",
	"github.com/clihost/clihost/output", "github.com/clihost/clihost/host", "net/http",
	"github.com/modelcontextprotocol/go-sdk/mcp",
}

// TestSandboxInitRunsBeforeHeavyPackages starts the built clihostd and clihostctl as a sandbox
// init (without a plan, so the init fails at its first step and says so) with Go's init trace on:
// the init must run before the packages it does not need are initialised, so that a host without
// the clihost-sandbox helper (go run) does not pay for them on every call.
func TestSandboxInitRunsBeforeHeavyPackages(t *testing.T) {
	for _, b := range []string{bin.daemon, bin.ctl} {
		cmd := exec.Command(b, initMarker)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 {
			t.Fatalf("%s %s: %v, want exit 125\n%s", b, initMarker, err, stderr.String())
		}
		before, _, ok := strings.Cut(stderr.String(), "clihost sandbox: ")
		if !ok {
			t.Fatalf("%s: the init did not run:\n%s", b, stderr.String())
		}
		for _, pkg := range heavyInits {
			if strings.Contains(before, "init "+pkg+" @") {
				t.Errorf("%s: %s is initialised before the sandbox's init runs", b, pkg)
			}
		}
		if !strings.Contains(before, "init github.com/clihost/clihost/sandbox/nsinit @") {
			t.Errorf("%s: no init trace of nsinit before the init ran:\n%s", b, before)
		}
	}
}
