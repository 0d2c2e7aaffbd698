package sandbox

import (
	"github.com/clihost/clihost/bundles"
	"os"
	"path/filepath"
	"testing"

	fx "github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// BenchmarkCompile compiles, again and again, the policy of a tool that reads its workspace but
// its .env, for a home that holds a few of the credential folders the mandatory denies name: the
// compile every sandboxed call makes on the host before its sandbox is built.
func BenchmarkCompile(b *testing.B) {
	home, ws := b.TempDir(), b.TempDir()
	for _, dir := range []string{".ssh", ".aws", ".config/gh", ".config/gcloud", ".docker", ".kube", "src"} {
		if err := os.MkdirAll(filepath.Join(home, dir), 0o700); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []string{".env", "README.md", "src/main.go"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bin, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		b.Fatal(err)
	}
	bd, _ := bundle(manifest.Sandbox{FS: &manifest.FS{Read: []string{"./**"}, Deny: []string{"./.env"}}}, nil)
	in := Input{Bundle: bd, Binary: bin, Workspace: ws, Home: home, PATH: "/usr/bin:/bin"}
	benchmarkFreshAndKept(b, in)
}

// BenchmarkCompileProject is the policy check of a call of a tool that may write its workspace, a
// project-sized git work tree (fx.Project): compiled afresh, and through a Cache, whose kept policy
// is used again once its journal's questions (every folder's listing among them) are asked again.
func BenchmarkCompileProject(b *testing.B) {
	ws := fx.Project(b)
	bin, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		b.Fatal(err)
	}
	bd, _ := bundle(manifest.Sandbox{FS: &manifest.FS{Read: []string{"./**"}, Write: []string{"./**"}}}, nil)
	in := Input{Bundle: bd, Binary: bin, Workspace: ws, Home: b.TempDir(), PATH: "/usr/bin:/bin"}
	benchmarkFreshAndKept(b, in)
}

// benchmarkFreshAndKept compiles in afresh ("fresh") and through a Cache whose kept policy is used
// again once its journal's questions are asked again ("kept").
func benchmarkFreshAndKept(b *testing.B, in Input) {
	c := NewCache()
	for range 2 { // the second walk takes the leaves the first one kept
		if _, err := c.Compile(in); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []struct {
		name    string
		compile func(Input) (*Policy, error)
	}{{"fresh", Compile}, {"kept", c.Compile}} {
		b.Run(mode.name, func(b *testing.B) {
			before := c.Reused()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := mode.compile(in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.Reused()-before)/float64(b.N), "reused/op")
		})
	}
}

// BenchmarkCompileCatalogGit is BenchmarkCompileProject for the catalog's git bundle's add tool
// (its grants hold a last-component wildcard, ~/.config/git/*, and its denies a one-component
// pattern, ~/.ssh/id_*): compiled afresh, and through a Cache.
func BenchmarkCompileCatalogGit(b *testing.B) {
	ws, home := fx.Project(b), b.TempDir()
	for _, f := range []string{".config/git/config", ".ssh/id_ed25519", ".ssh/known_hosts", ".gitconfig"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(home, f)), 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, f), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	bd := manifest.LoadBundle(bundles.FS(), "git/CLI.md", manifest.LoadOptions{})
	bin, err := filepath.EvalSymlinks("/usr/bin/git")
	if err != nil {
		b.Skip("no git")
	}
	in := Input{Bundle: bd, Tool: bd.Tool("add"), Binary: bin, Workspace: ws, Home: home, PATH: "/usr/bin:/bin"}
	benchmarkFreshAndKept(b, in)
}
