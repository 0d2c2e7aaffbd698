package sandbox

import (
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestR18CallersCannotChangeKeptPolicy: calls that reuse a kept policy, at once, scribble over
// every list and map of the policy they got (as a host, runner or plan builder might, appending
// or writing in place); the kept policy must not change: each later call still gets what a
// compilation returns.
func TestR18CallersCannotChangeKeptPolicy(t *testing.T) {
	f := newFixture(t)
	write(t, filepath.Join(f.ws, "out.txt"), "", 0o644)
	write(t, filepath.Join(f.ws, "secret.txt"), "s", 0o644)
	allow := true
	sb := manifest.Sandbox{
		FS:      &manifest.FS{Read: []string{"./**"}, Write: []string{"./out.txt"}, Deny: []string{"./secret.txt"}},
		Exec:    &manifest.Exec{Allow: &allow, Spawn: []string{"sh"}},
		Env:     &manifest.Env{Pass: []string{"TOKEN"}, Set: map[string]string{"A": "b"}},
		Network: &manifest.Network{Egress: []string{"example.com"}, Ingress: []string{"http://localhost:8080"}},
	}
	in := f.input(sb)
	in.LookupEnv = func(name string) (string, bool) { return "tok", name == "TOKEN" }
	in.Protect = []string{filepath.Join(f.ws, "out.txt")}
	want := f.compile(in)
	c := NewCache()
	if _, err := c.Compile(in); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				p, err := c.Compile(in)
				if err != nil {
					t.Error(err)
					return
				}
				if !reflect.DeepEqual(p, want) {
					t.Errorf("a call got a changed policy: %+v", p)
					return
				}
				for i := range p.Rules {
					p.Rules[i].Path, p.Rules[i].Access = "/", Read|Write|Exec
				}
				for i := range p.Runtime {
					p.Runtime[i].Path = "/"
				}
				for _, l := range [][]string{p.Deny, p.Protect, p.Exec, p.Writable, p.gitGlobal, p.Egress, p.Ingress, p.Env, p.Notes, p.Absent} {
					for i := range l {
						l[i] = "/changed"
					}
				}
				p.Deny, p.Env = p.Deny[:0], append(p.Env[:0], "LD_PRELOAD=/x")
				for k := range p.present {
					delete(p.present, k)
				}
				for k := range p.roots {
					delete(p.roots, k)
				}
				p.Binary, p.TTY = "/bin/sh", true
			}
		})
	}
	wg.Wait()
	if c.Reused() < 8*50 {
		t.Errorf("only %d calls used the kept policy: the test proves less than it says", c.Reused())
	}
	cacheCheck(t, c, in, "after the scribbling", true)
}

// TestR18CallersOfOtherHomes: two callers on one workspace with different homes, and a caller
// whose environment differs (a host whose LookupEnv answers per caller), never get each other's
// kept policy; what the home holds (a credential folder linked into the workspace) is the
// caller's own.
func TestR18CallersOfOtherHomes(t *testing.T) {
	f := newFixture(t)
	mkdir(t, filepath.Join(f.ws, "shared"))
	write(t, filepath.Join(f.ws, "shared", "creds"), "c", 0o644)
	homeA, homeB := realTemp(t), realTemp(t)
	symlink(t, filepath.Join(f.ws, "shared"), filepath.Join(homeB, ".aws")) // B's credentials live in the workspace
	sb := manifest.Sandbox{FS: &manifest.FS{Read: []string{"./**"}}, Env: &manifest.Env{Pass: []string{"TOKEN"}}}
	inA := f.input(sb)
	inA.Home = homeA
	envA := map[string]string{"TOKEN": "a"}
	inA.LookupEnv = func(n string) (string, bool) { v, ok := envA[n]; return v, ok }
	inB := inA
	inB.Home = homeB
	c := NewCache()
	cacheCheck(t, c, inA, "A", false)
	cacheCheck(t, c, inA, "A again", true)
	pb := cacheCheck(t, c, inB, "B", false)
	wantIn(t, "B's Deny", pb.Deny, filepath.Join(f.ws, "shared"))
	cacheCheck(t, c, inB, "B again", true)
	pa := cacheCheck(t, c, inA, "A after B", true)
	wantNotIn(t, "A's Deny", pa.Deny, filepath.Join(f.ws, "shared"))
	envC := map[string]string{"TOKEN": "c"}
	inC := inA
	inC.LookupEnv = func(n string) (string, bool) { v, ok := envC[n]; return v, ok }
	wantIn(t, "C's Env", cacheCheck(t, c, inC, "C: A's home, another environment", false).Env, "TOKEN=c")
}
