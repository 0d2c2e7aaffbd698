package manifest

import "testing"

func TestClassifyPattern(t *testing.T) {
	cases := map[string]PatternKind{
		"~/.config/gh/**":   PatternSubtree,
		"./**":              PatternSubtree,
		"**":                PatternSubtree,
		".git/**":           PatternSubtree,
		"/etc/ssl/certs":    PatternLiteral,
		"~/.gitconfig":      PatternLiteral,
		"~/.config/*.json":  PatternLastWild,
		"out/{a,b}.txt":     PatternLastWild,
		"**/.git/**":        PatternUnanchored,
		"**/*.mp4":          PatternUnanchored,
		"~/.config/*/cache": PatternUnanchored,
		"src/**.go":         PatternUnanchored,
	}
	for p, want := range cases {
		got, err := ClassifyPattern(p)
		if err != nil || got != want {
			t.Errorf("ClassifyPattern(%q) = %v, %v; want %v", p, got, err, want)
		}
	}
	for _, bad := range []string{"", "~bob/x", "../x", "a/../b", "[a-", "x\x00"} {
		if k, err := ClassifyPattern(bad); err == nil {
			t.Errorf("ClassifyPattern(%q) = %v, want an error", bad, k)
		}
	}
}

func TestPatternCovers(t *testing.T) {
	cases := []struct {
		b, t string
		want bool
	}{
		{"./**", "out/**", true},
		{"**", "./src/main.go", true},
		{"~/.config/gh/**", "~/.config/gh/hosts.yml", true},
		{"~/.config/gh/**", "~/.config/gh/**", true},
		{"~/.config/gh/**", "~/.config/**", false},
		{"~/.config/*.json", "~/.config/a.json", true},
		{"~/.config/*.json", "~/.config/*.yml", false},
		{"/etc/hosts", "/etc/passwd", false},
		{"./out/**", "out", true},
		{"./out/**", "/etc/**", false},
		{"./**", "/etc/passwd", false},
		{"./**", "~/.ssh/id_rsa", false},
	}
	for _, c := range cases {
		if got := PatternCovers(c.b, c.t); got != c.want {
			t.Errorf("PatternCovers(%q, %q) = %v, want %v", c.b, c.t, got, c.want)
		}
	}
}

func TestEgressHosts(t *testing.T) {
	for _, ok := range []string{"api.github.com", "*.githubusercontent.com", "localhost", "xn--bcher-kva.example"} {
		if err := CheckEgressHost(ok); err != nil {
			t.Errorf("CheckEgressHost(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"*", "*.com", "https://api.github.com", "api.github.com:443", "10.0.0.1", "::1", "a.*.com", "-bad.com", "api.github.com/path", ""} {
		if err := CheckEgressHost(bad); err == nil {
			t.Errorf("CheckEgressHost(%q) accepted", bad)
		}
	}
	covers := []struct {
		b, t string
		want bool
	}{
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "*.a.example.com", true},
		{"*.example.com", "example.com", false},
		{"api.example.com", "API.example.com.", true},
		{"api.example.com", "*.example.com", false},
	}
	for _, c := range covers {
		if got := HostCovers(c.b, c.t); got != c.want {
			t.Errorf("HostCovers(%q, %q) = %v, want %v", c.b, c.t, got, c.want)
		}
	}
}

func TestEffectiveSandboxNarrows(t *testing.T) {
	yes := true
	no := false
	bundle := Sandbox{
		Network: &Network{Egress: []string{"a.example.com", "b.example.com"}},
		FS:      &FS{Read: []string{"./**"}, Write: []string{"./out/**"}, Deny: []string{"~/.ssh/**"}},
		Exec:    &Exec{Allow: &yes, Spawn: []string{"git"}},
		Env:     &Env{Pass: []string{"HOME", "TOKEN"}, Set: map[string]string{"X": "1"}},
	}
	tool := &Sandbox{
		Network: &Network{Egress: []string{"a.example.com"}},
		FS:      &FS{Write: []string{}, Deny: []string{"./secret/**"}},
		Exec:    &Exec{Allow: &no},
		Env:     &Env{Set: map[string]string{"X": "2", "Y": "3"}},
	}
	eff := EffectiveSandbox(bundle, tool)
	if len(eff.Network.Egress) != 1 || len(eff.FS.Write) != 0 || len(eff.FS.Read) != 1 {
		t.Fatalf("lists not narrowed: %+v %+v", eff.Network, eff.FS)
	}
	if len(eff.FS.Deny) != 2 || eff.Exec.Allowed() || len(eff.Exec.Spawn) != 0 {
		t.Fatalf("deny/exec wrong: %+v %+v", eff.FS.Deny, eff.Exec)
	}
	if eff.Env.Set["X"] != "2" || eff.Env.Set["Y"] != "" || len(eff.Env.Pass) != 2 {
		t.Fatalf("env wrong: %+v", eff.Env)
	}
	if len(bundle.FS.Deny) != 1 || bundle.Env.Set["X"] != "1" {
		t.Fatal("EffectiveSandbox modified the bundle's sandbox")
	}
}

// TestClassifyPatternRefusesDotAlternatives: a {…} alternative that is . or .. (or holds one as a
// path element) names the folder itself or its parent, which no match of folder entries does:
// refused, as a .. component is. Dots inside names stay allowed.
func TestClassifyPatternRefusesDotAlternatives(t *testing.T) {
	for _, p := range []string{"./**/{.,x}", "~/.ssh/{.,id_*}", "{..,x}", "a/{x,./y}", "a/{b,{.,c}}", "{x,y/..}/z"} {
		if _, err := ClassifyPattern(p); err == nil {
			t.Errorf("%q was accepted", p)
		}
	}
	for _, p := range []string{"./**/{.env,}", "{.env,.envrc}", "~/.config/*.json", "out/{a,b}.txt", "./{a,b}/.env", "x.{a,b}"} {
		if _, err := ClassifyPattern(p); err != nil {
			t.Errorf("%q was refused: %v", p, err)
		}
	}
}
