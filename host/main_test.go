package host

import (
	"os"
	"testing"

	"github.com/clihost/clihost/sandbox/nsinit"
)

// TestMain lets this test binary act as the sandbox's init and stage 2: the host re-execs its own
// executable to build the sandbox of every tool it runs. Run as dnsflood, it is a program that
// floods the sandbox's DNS stub (see floodMain).
func TestMain(m *testing.M) {
	nsinit.Main()
	floodMain()
	os.Exit(m.Run())
}
