package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/errcode"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
	"github.com/clihost/clihost/lifecycle"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/output"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox/nsinit"
)

// TestRunnerLimitsTimeout: a bundle's runner.limits.timeout_ms stops a call whose tool allows 60 s
// after 300 ms, with the timeout message naming the narrower limit.
func TestRunnerLimitsTimeout(t *testing.T) {
	fixture.Need(t, "sleep")
	files := fixture.Sleep(60000)
	files["sleep/CLI.md"] = strings.Replace(files["sleep/CLI.md"], "sandbox:\n", "runner: { limits: { timeout_ms: 300 } }\nsandbox:\n", 1)
	h, _ := writeBundle(t, files, Options{})
	b := bundle(t, h, "sleep")
	if b.Findings.HasErrors() {
		t.Fatalf("lint: %v", b.Findings)
	}
	env := h.Call(context.Background(), b, "nap", js(t, `{"s": "30"}`), Caller{Workspace: fixture.Workspace(t)}, CallOptions{})
	if env.OK || env.Error.Code != "timeout" || !strings.Contains(env.Error.Message, "within 300ms") {
		t.Fatalf("want a timeout after 300ms, got %+v", env.Error)
	}
}

// TestLimitsFor: the operator's limits (defaults for zero fields, none for negative ones),
// narrowed by the bundle's and the tool's runner.limits, never widened.
func TestLimitsFor(t *testing.T) {
	files := fixture.True()
	files["true/CLI.md"] = strings.Replace(files["true/CLI.md"], "sandbox:\n", "runner: { limits: { memory_mb: 4096, cpu_ms: 2000 } }\nsandbox:\n", 1)
	files["true/tools/run/TOOL.md"] = strings.Replace(files["true/tools/run/TOOL.md"], "runner: { cli: ../../CLI.md,", "runner: { limits: { memory_mb: 256 }, cli: ../../CLI.md,", 1)
	h, _ := writeBundle(t, files, Options{Sandbox: SandboxOptions{Limits: isolation.Limits{Pids: 100, NoFile: -1}}})
	b := bundle(t, h, "true")
	if b.Findings.HasErrors() {
		t.Fatalf("lint: %v", b.Findings)
	}
	want := isolation.Limits{MemoryBytes: 1 << 30, Pids: 100, CPU: 2 * time.Second, FileSize: 1 << 30, TmpfsBytes: 256 << 20}
	if got := h.limitsFor(b, nil); got != want {
		t.Errorf("bundle: %+v, want %+v (the bundle's 4096 MiB does not raise the operator's 1 GiB)", got, want)
	}
	want.MemoryBytes = 256 << 20
	if got := h.limitsFor(b, b.Tool("run")); got != want {
		t.Errorf("tool: %+v, want %+v", got, want)
	}
}

// TestLimitFlags parses the operator's --limit-* values.
func TestLimitFlags(t *testing.T) {
	var l isolation.Limits
	set := map[string]string{"limit-memory": "512MiB", "limit-pids": "none", "limit-tmpfs": "1G", "limit-cpu": "90s", "limit-nofile": "4096", "limit-fsize": "1048576"}
	for _, f := range LimitFlags(&l) {
		if err := f.Value.Set(set[f.Name]); err != nil {
			t.Fatalf("--%s %s: %v", f.Name, set[f.Name], err)
		}
	}
	want := isolation.Limits{MemoryBytes: 512 << 20, Pids: -1, TmpfsBytes: 1 << 30, CPU: 90 * time.Second, NoFile: 4096, FileSize: 1 << 20}
	if l != want {
		t.Fatalf("parsed %+v, want %+v", l, want)
	}
	for _, bad := range []string{"-1", "12XB", "lots", ""} {
		if err := LimitFlags(&l)[0].Value.Set(bad); err == nil {
			t.Errorf("--limit-memory %q accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "100": 100, "100B": 100, "64K": 64 << 10, "64kib": 64 << 10, " 8 MiB ": 8 << 20, "1G": 1 << 30, "2TB": 2 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1I", "1iB", "MiB", "1.5G", "1 parsec", "99999999999G"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

// TestRunnerFileLimitsReachPlan: limits written in a RUNNER.md (runner: ./RUNNER.md) reach the
// sandbox plan of a call, narrowed further by the tool's; today's main ignored the file.
func TestRunnerFileLimitsReachPlan(t *testing.T) {
	files := fixture.True()
	files["true/CLI.md"] = strings.Replace(files["true/CLI.md"], "sandbox:\n", "runner: ./RUNNER.md\nsandbox:\n", 1)
	files["true/RUNNER.md"] = "---\nengine: subprocess\nlimits: { memory_mb: 512, cpu_ms: 3000, timeout_ms: 700 }\n---\n"
	files["true/tools/run/TOOL.md"] = strings.Replace(files["true/tools/run/TOOL.md"], "runner: { cli: ../../CLI.md,", "runner: { limits: { cpu_ms: 1000 }, cli: ../../CLI.md,", 1)
	h, _ := writeBundle(t, files, Options{})
	b := bundle(t, h, "true")
	got := h.limitsFor(b, b.Tool("run"))
	if got.MemoryBytes != 512<<20 || got.CPU != time.Second {
		t.Fatalf("limits %+v, want 512 MiB (RUNNER.md) and 1 s CPU (the tool's)", got)
	}
	if d := callTimeout(b, b.Tool("run")); d != 700*time.Millisecond {
		t.Fatalf("timeout %s, want the RUNNER.md's 700ms", d)
	}
}

// TestTimedOutSandboxFailureIsATimeout: when the call's timeout stopped it while its sandbox was
// still being built (the sandbox then fails: its PID namespace is dead), the call is a timeout,
// not sandbox_unavailable with the kernel-setup hint; a sandbox failure without the timeout stays
// what it is. (A sandbox the host lost after its program may have run, nsinit.MayHaveRun, stays a
// sandbox failure too: its message says what happened.)
func TestTimedOutSandboxFailureIsATimeout(t *testing.T) {
	b := &manifest.Bundle{}
	failed := fmt.Errorf("runner: /usr/bin/x not started: %w", fmt.Errorf("%w: exec /usr/bin/x: clone: cannot allocate memory", nsinit.ErrUnavailable))
	for _, c := range []struct {
		timedOut bool
		code     errcode.Code
	}{{true, errcode.Timeout}, {false, errcode.SandboxUnavailable}} {
		env := (&Host{}).finish(context.Background(), b, nil, runner.Result{TimedOut: c.timedOut, ExitCode: -1}, failed,
			output.Convention{}, 2*time.Second, lifecycle.Scope{}, &Invoked{}, nil, nil)
		if env.OK || env.Error == nil || env.Error.Code != c.code {
			t.Fatalf("timed out %t: %+v, want %s", c.timedOut, env.Error, c.code)
		}
		if c.timedOut && !strings.Contains(env.Error.Message, "within 2s") {
			t.Errorf("message %q does not say the timeout", env.Error.Message)
		}
	}
}
