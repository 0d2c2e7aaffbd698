// Command clihostctl is clihost's operator and CI command: it lints bundles, shows what they
// declare and (in later releases) drives the daemon.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/runner"
	_ "github.com/clihost/clihost/sandbox/nsinit/entry" // this executable is also the sandbox's init: it runs first
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// exitError carries a process exit code through cobra without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// noDaemonHint follows "no clihostd is running on SOCKET": how to start one, or reach another.
const noDaemonHint = "Start it (systemctl start clihostd, or run clihostd; docs/operations.md), or name a running one's socket with --socket or $CLIHOST_SOCKET."

func main() {
	code := run(os.Args[1:], newGlobalOptions(systemStreams()))
	// An in-process call's sandbox ends before its init has exited; its control groups are
	// removed once it has. Wait for that before exiting, or they stay behind.
	runner.Cleanup(5 * time.Second)
	os.Exit(code)
}

// run executes clihostctl with args and returns the exit code: 0 success, 1 findings or a failed
// operation, 2 bad usage or a refused configuration file.
func run(args []string, g *globalOptions) int {
	stderr := g.io.ErrOut
	cmd := newRootCmd(g)
	cmd.SetArgs(args)
	failed, err := cmd.ExecuteC()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, new(configError)):
		fmt.Fprintf(stderr, "clihostctl: %v\n%s.\n", err, configHint)
		return 2
	case errors.As(err, new(usageError)) || isUnknownCommand(err):
		fmt.Fprintf(stderr, "clihostctl: %v\nRun '%s --help' for usage.\n", err, failed.CommandPath())
		return 2
	case errors.Is(err, control.ErrNoDaemon):
		fmt.Fprintf(stderr, "clihostctl: %v\n%s\n", err, noDaemonHint)
		return 1
	default:
		fmt.Fprintf(stderr, "clihostctl: %v\n", err)
		return 1
	}
}
