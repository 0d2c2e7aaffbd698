package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/registry"
)

// notInDebian lists catalog CLIs with no Debian package: their real-binary check runs only where
// the binary happens to be installed. The agent CLIs (providers) come from npm.
var notInDebian = map[string]bool{"helm": true, "claude": true, "gemini": true, "codex": true, "qwen": true, "ax-glm": true, "ax-grok": true}

// systemPath is where Debian installs binaries; user shims (pyenv's aws, say) are left out.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func catalog(t *testing.T) []*manifest.Bundle {
	t.Helper()
	r, err := registry.Load(registry.EmbeddedSource())
	if err != nil {
		t.Fatal(err)
	}
	bs := r.Bundles()
	if len(bs) < 16 {
		t.Fatalf("catalog has %d bundles", len(bs))
	}
	return bs
}

// checkVersion applies a bundle's version_check to a command's output the way the host does:
// the regex on stdout then stderr, normalisation, the npm range.
func checkVersion(t *testing.T, b *manifest.Bundle, stdout, stderr string) string {
	t.Helper()
	vc := b.CLI.VersionCheck
	p, err := manifest.CompileVersionPattern(vc.Parse)
	if err != nil {
		t.Fatalf("%s: parse: %v", b.ID(), err)
	}
	raw, ok := p.Find(stdout)
	if !ok {
		raw, ok = p.Find(stderr)
	}
	if !ok {
		t.Fatalf("%s: %q matches neither stdout %q nor stderr %q", b.ID(), vc.Parse, stdout, stderr)
	}
	v, err := manifest.NormalizeVersion(raw)
	if err != nil {
		t.Fatalf("%s: captured %q: %v", b.ID(), raw, err)
	}
	r, err := manifest.ParseRange(vc.Range)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Contains(v) {
		t.Fatalf("%s: version %s (captured %q) is outside %q", b.ID(), v, raw, vc.Range)
	}
	return v.String()
}

// TestCatalogVersionFixtures checks every bundle's version_check against the output recorded from
// the real binary (tests/testdata/versions/<id>.txt).
func TestCatalogVersionFixtures(t *testing.T) {
	for _, b := range catalog(t) {
		t.Run(b.ID(), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "versions", b.ID()+".txt"))
			if err != nil {
				t.Fatalf("no version fixture: %v", err)
			}
			var cmdLine string
			var out []string
			for _, l := range strings.Split(string(data), "\n") {
				if c, ok := strings.CutPrefix(l, "# cmd: "); ok {
					cmdLine = c
				} else if !strings.HasPrefix(l, "# ") {
					out = append(out, l)
				}
			}
			if cmdLine != b.CLI.VersionCheck.Cmd {
				t.Fatalf("fixture was recorded with %q, the bundle runs %q", cmdLine, b.CLI.VersionCheck.Cmd)
			}
			t.Logf("%s → %s", b.ID(), checkVersion(t, b, strings.Join(out, "\n"), ""))
		})
	}
}

// TestCatalogVersionsAgainstRealBinaries runs each bundle's version_check.cmd against the binary
// installed from Debian. Under CI every Debian-packaged CLI must be present.
func TestCatalogVersionsAgainstRealBinaries(t *testing.T) {
	for _, b := range catalog(t) {
		t.Run(b.ID(), func(t *testing.T) {
			words := strings.Fields(b.CLI.VersionCheck.Cmd)
			path, err := lookSystem(words[0])
			if err != nil {
				needDebian(t, b.ID(), words[0])
			}
			timeout := time.Duration(b.CLI.VersionCheck.TimeoutMS) * time.Millisecond
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), 4*timeout) // generous: CI machines are shared
			defer cancel()
			cmd := exec.CommandContext(ctx, path, words[1:]...)
			cmd.Env = []string{"PATH=" + systemPath, "HOME=" + t.TempDir(), "LANG=C"}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v\n%s", b.CLI.VersionCheck.Cmd, err, errb.String())
			}
			t.Logf("%s %s → %s", b.ID(), path, checkVersion(t, b, out.String(), errb.String()))
		})
	}
}

// needDebian skips the subtest of bundle id whose program prog is not installed: always for a
// CLI Debian does not package (notInDebian), else through fixture.Missing (a failure under
// CI=true, where .ci/run installs it from Debian).
func needDebian(t *testing.T, id, prog string) {
	t.Helper()
	if notInDebian[id] {
		t.Skipf("%s is not installed here (Debian does not package it)", prog)
	}
	fixture.Missing(t, "%s is not installed (.ci/run installs it from Debian)", prog)
}

func lookSystem(name string) (string, error) {
	for _, dir := range filepath.SplitList(systemPath) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
