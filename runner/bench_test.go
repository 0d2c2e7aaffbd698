package runner_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/clihost/clihost/runner"
)

// BenchmarkRun and BenchmarkPlainExec spawn /bin/true; their ratio is runner's overhead over a
// bare os/exec call (which inherits the environment and has no capture, group or timeout handling).
func BenchmarkRun(b *testing.B) {
	c := runner.Command{Path: "/bin/true", Dir: b.TempDir()}
	for b.Loop() {
		res, err := runner.Run(context.Background(), c)
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exit %d: %v", res.ExitCode, err)
		}
	}
}

func BenchmarkPlainExec(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
