package cobra

import (
	"os"
	"testing"

	"github.com/clihost/clihost/sandbox/nsinit"
)

// TestMain lets this test binary act as the sandbox's init: the round-trip tests call imported
// tools through host.Call, which re-execs its own executable to build each tool's sandbox.
func TestMain(m *testing.M) {
	nsinit.Main()
	os.Exit(m.Run())
}
