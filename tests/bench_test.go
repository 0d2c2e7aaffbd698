package tests

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/control"
	"github.com/clihost/clihost/internal/fixture"
)

// hundredBundles writes 100 small bundles (three tools each) under a temp dir.
func hundredBundles(b *testing.B) string {
	files := map[string]string{}
	for i := 0; i < 100; i++ {
		id := fmt.Sprintf("b%03d", i)
		var cmds strings.Builder
		for j := 0; j < 3; j++ {
			name := fmt.Sprintf("t%d", j)
			fmt.Fprintf(&cmds, "  %s: ./tools/%s/TOOL.md\n", name, name)
			files[id+"/tools/"+name+"/TOOL.md"] = fmt.Sprintf(`---
name: Tool %d
id: %s.%s
description: A generated tool.
version: 1.0.0
inputs: { type: object, additionalProperties: false, properties: { v%d: { type: string } } }
outputs: { type: string }
runner: { cli: ../../CLI.md, argv: [%s, "${input.v%d | optional('--v=')}"] }
---
`, j, id, name, j, name, j)
		}
		files[id+"/CLI.md"] = fixture.CLI("true", id, cmds.String())
	}
	return fixture.Write(b, files)
}

// BenchmarkDaemonStartToReady starts clihostd on 100 bundles and waits for its ready line;
// BenchmarkProcessStartBaseline starts and waits for `clihostctl version`, the cost of starting a Go
// binary at all.
func BenchmarkDaemonStartToReady(b *testing.B) {
	bundles := hundredBundles(b)
	for b.Loop() {
		state := b.TempDir()
		cmd := exec.Command(bin.daemon, "--state", state, "--socket", filepath.Join(state, "s"), "--http", "127.0.0.1:0", "--bundles", bundles, "--workspace", state)
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		ready := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "clihostd ready") {
				ready = true
				break
			}
		}
		b.StopTimer()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !ready {
			b.Fatal("clihostd never became ready")
		}
		b.StartTimer()
	}
}

func BenchmarkProcessStartBaseline(b *testing.B) {
	for b.Loop() {
		if err := exec.Command(bin.ctl, "version").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatusRoundTrip asks a running daemon (100 bundles, binaries checked once) for one
// bundle's status over the control socket; BenchmarkTokenRoundTrip, the baseline, asks for the
// token, which does no work.
func BenchmarkStatusRoundTrip(b *testing.B) { benchControl(b, true) }

func BenchmarkTokenRoundTrip(b *testing.B) { benchControl(b, false) }

func benchControl(b *testing.B, status bool) {
	bundles := hundredBundles(b)
	state := b.TempDir()
	sock := filepath.Join(state, "s")
	cmd := exec.Command(bin.daemon, "--state", state, "--socket", sock, "--http", "127.0.0.1:0", "--bundles", bundles, "--workspace", state)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.Contains(sc.Text(), "clihostd ready") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	c := control.NewClient(sock)
	ctx := context.Background()
	if _, err := c.Status(ctx, ""); err != nil { // check every binary once
		b.Fatal(err)
	}
	for b.Loop() {
		if status {
			st, err := c.Status(ctx, "b042")
			if err != nil || len(st) != 1 || !st[0].Ready {
				b.Fatalf("%+v %v", st, err)
			}
		} else if _, err := c.Token(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
