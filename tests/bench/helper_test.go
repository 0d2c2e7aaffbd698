package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clihost/clihost/host"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// daemonBin builds clihostd once, into the directory of the clihost-sandbox helper TestMain built.
var daemonBin = sync.OnceValues(func() (string, error) {
	out := filepath.Join(filepath.Dir(helperPath), "clihostd")
	build := exec.Command("go", "build", "-o", out, "github.com/clihost/clihost/cmd/clihostd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build clihostd: %w\n%s", err, b)
	}
	return out, nil
})

// BenchmarkHelperVsSelf is one host.Call of /usr/bin/true in the kernel sandbox, its init started
// from the clihost-sandbox helper or from the built clihostd itself (what a daemon without the
// helper beside it, such as `go run ./cmd/clihostd`, re-executes), alternately in the same loop.
// It reports the mean of each (helper-ns/call, self-ns/call) and their ratio (self/helper).
func BenchmarkHelperVsSelf(b *testing.B) {
	if err := nsinit.Check(); err != nil {
		missing(b, "the kernel sandbox is unavailable: %v", err)
	}
	if os.Geteuid() != 0 {
		missing(b, "the sandbox benchmark runs as root (as CI does)")
	}
	helper, daemon := helperPath, must(b, daemonBin)
	h := host.New(fixture.Registry(b, fixture.True()), host.Options{})
	bd, err := h.Bundle("true")
	if err != nil {
		b.Fatal(err)
	}
	ws := fixture.Workspace(b)
	call := func(init string) time.Duration {
		if err := nsinit.UseHelper(init); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if env := h.Call(context.Background(), bd, "run", map[string]any{}, host.Caller{Workspace: ws}, host.CallOptions{}); !env.OK {
			b.Fatalf("%s: %+v", init, env.Error)
		}
		return time.Since(start)
	}
	call(helper) // the version check, once
	var viaHelper, viaSelf time.Duration
	n := 0
	for b.Loop() {
		viaHelper += call(helper)
		viaSelf += call(daemon)
		n++
	}
	_ = nsinit.UseHelper(helper)
	b.ReportMetric(float64(viaHelper.Nanoseconds())/float64(n), "helper-ns/call")
	b.ReportMetric(float64(viaSelf.Nanoseconds())/float64(n), "self-ns/call")
	b.ReportMetric(float64(viaSelf)/float64(viaHelper), "self/helper")
}

// BenchmarkInitStart is the start of a sandbox init alone: the clihost-sandbox helper and the
// built clihostd each exec'd as an init without a plan (it fails at its first step and exits), one
// after the other in the same loop: process start, Go runtime and package initialisation up to
// nsinit.Main. It reports the mean of each and their ratio (self/helper).
func BenchmarkInitStart(b *testing.B) {
	helper, daemon := helperPath, must(b, daemonBin)
	start := func(bin string) time.Duration {
		cmd := exec.Command(bin, "__clihost_init")
		t := time.Now()
		if err := cmd.Run(); err == nil {
			b.Fatalf("%s started as an init without a plan and succeeded", bin)
		}
		return time.Since(t)
	}
	var viaHelper, viaSelf time.Duration
	n := 0
	for b.Loop() {
		viaHelper += start(helper)
		viaSelf += start(daemon)
		n++
	}
	b.ReportMetric(float64(viaHelper.Nanoseconds())/float64(n), "helper-ns/start")
	b.ReportMetric(float64(viaSelf.Nanoseconds())/float64(n), "self-ns/start")
	b.ReportMetric(float64(viaSelf)/float64(viaHelper), "self/helper")
}

func must(b *testing.B, f func() (string, error)) string {
	b.Helper()
	p, err := f()
	if err != nil {
		b.Fatal(err)
	}
	return p
}
