package host

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/isolation"
)

// BenchmarkCall is host.Call of a trivial tool (validate, expand, spawn /usr/bin/true, parse, audit
// to nowhere); BenchmarkPlainExec, its baseline, is os/exec running the same binary.
func BenchmarkCall(b *testing.B) {
	for _, bc := range []struct {
		name  string
		files map[string]string
		ws    func(testing.TB) string
	}{
		{"true", fixture.True(), fixture.Workspace},
		{"write-repo", fixture.TrueWriting(), fixture.Project}, // the git rule walks the workspace before and after
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, _ := writeBundle(b, bc.files, Options{})
			bd, err := h.Bundle("true")
			if err != nil {
				b.Fatal(err)
			}
			ws := bc.ws(b)
			if env := h.Call(context.Background(), bd, "run", nil, Caller{Workspace: ws}, CallOptions{}); !env.OK {
				b.Fatalf("%+v", env.Error)
			}
			for b.Loop() {
				if env := h.Call(context.Background(), bd, "run", map[string]any{}, Caller{Workspace: ws}, CallOptions{}); !env.OK {
					b.Fatalf("%+v", env.Error)
				}
			}
		})
	}
}

func BenchmarkPlainExec(b *testing.B) {
	fixture.Need(b, "true")
	path, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	ws := fixture.Workspace(b)
	for b.Loop() {
		cmd := exec.Command(path)
		cmd.Dir = ws
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallLimits is BenchmarkCall in the kernel sandbox with the default per-call resource
// limits (a cgroup per call, rlimits, sized tmpfs) and without any. Each iteration makes one call
// of each, alternately, so that both see the same machine; it reports the mean of each
// (on-ns/call, off-ns/call) and the cost of the limits (limits-%).
func BenchmarkCallLimits(b *testing.B) {
	fixture.NeedSandbox(b, SandboxAvailable())
	none := isolation.Limits{MemoryBytes: -1, Pids: -1, CPU: -1, NoFile: -1, FileSize: -1, TmpfsBytes: -1}
	off, _ := writeBundle(b, fixture.True(), Options{Sandbox: SandboxOptions{Limits: none}})
	on, _ := writeBundle(b, fixture.True(), Options{})
	ws := fixture.Workspace(b)
	call := func(h *Host) time.Duration {
		bd, err := h.Bundle("true")
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if env := h.Call(context.Background(), bd, "run", map[string]any{}, Caller{Workspace: ws}, CallOptions{}); !env.OK {
			b.Fatalf("%+v", env.Error)
		}
		return time.Since(start)
	}
	var onTotal, offTotal time.Duration
	n := 0
	for b.Loop() {
		offTotal += call(off)
		onTotal += call(on)
		n++
	}
	b.ReportMetric(float64(onTotal.Nanoseconds())/float64(n), "on-ns/call")
	b.ReportMetric(float64(offTotal.Nanoseconds())/float64(n), "off-ns/call")
	b.ReportMetric(100*(float64(onTotal)/float64(offTotal)-1), "limits-%")
}

// BenchmarkConfine is the host's share of a call before the sandbox starts, alone: identity,
// access checks, home, policy compilation, the git snapshot and the plan (confine), for the
// trivial tool of BenchmarkCall (true), for it from a host with a state directory as clihostd has
// (true-state: the uid's home is then <state>/homes/<uid>) and for a tool that may write its
// workspace, a git repository (git).
func BenchmarkConfine(b *testing.B) {
	fixture.NeedSandbox(b, SandboxAvailable())
	for _, bc := range []struct {
		name  string
		files map[string]string
		ws    func(testing.TB) string
		state bool
	}{
		{"true", fixture.True(), fixture.Workspace, false},
		{"true-state", fixture.True(), fixture.Workspace, true},
		{"git", fixture.TrueWriting(), gitWorkspace, false},
		{"repo", fixture.TrueWriting(), fixture.Project, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var opts Options
			if bc.state {
				opts.Sandbox.StateDir = b.TempDir()
				fixture.Reachable(b, opts.Sandbox.StateDir)
			}
			h, _ := writeBundle(b, bc.files, opts)
			bd, err := h.Bundle("true")
			if err != nil {
				b.Fatal(err)
			}
			tool := bd.Tool("run")
			c := Caller{Workspace: bc.ws(b)}
			for b.Loop() {
				env := []string{}
				if _, _, e := h.confine(bd, tool, "/usr/bin/true", c, &env); e != nil {
					b.Fatalf("%+v", e)
				}
			}
		})
	}
}

// gitWorkspace is a workspace holding a small git repository (a .git directory with hooks and a
// config, and a few folders of files), given to the agent.
func gitWorkspace(tb testing.TB) string {
	tb.Helper()
	ws := tb.TempDir()
	files := map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n\tbare = false\n",
		".git/hooks/pre-commit.sample": "#!/bin/sh\n", ".git/objects/.keep": "", ".git/refs/heads/.keep": ""}
	for i := range 20 {
		files[fmt.Sprintf("src/d%d/f.go", i)] = "package d\n"
	}
	fixture.WriteIn(tb, ws, files)
	fixture.GiveToAgent(tb, ws)
	return ws
}
