package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	base := Info{Version: "dev", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	for _, tc := range []struct {
		name    string
		version string
		main    string
		set     map[string]string
		want    string
	}{
		{"checkout", "dev", "(devel)", map[string]string{"vcs.revision": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", "vcs.modified": "true", "vcs.time": "2026-11-26T07:00:00Z"},
			"dev (a1b2c3d4e5f6, modified) built 2026-11-26T07:00:00Z go1.26.8 linux/amd64"},
		{"clean checkout", "dev", "(devel)", map[string]string{"vcs.revision": "a1b2c3d", "vcs.modified": "false"}, "dev (a1b2c3d) go1.26.8 linux/amd64"},
		{"pseudo-version", "dev", "v0.0.0-20261126073647-adccb35b125f", map[string]string{"vcs.revision": "adccb35b125f0616"}, "dev (adccb35b125f) go1.26.8 linux/amd64"},
		{"dirty tag", "dev", "v1.4.0+dirty", map[string]string{"vcs.revision": "adccb35b125f0616", "vcs.modified": "true"}, "dev (adccb35b125f, modified) go1.26.8 linux/amd64"},
		{"after a tag", "dev", "v1.4.1-0.20261126073647-adccb35b125f", nil, "dev go1.26.8 linux/amd64"},
		{"go install @version", "dev", "v1.4.0", nil, "v1.4.0 go1.26.8 linux/amd64"},
		{"ldflags wins", "v2.0.0", "v1.4.0", nil, "v2.0.0 go1.26.8 linux/amd64"},
		{"nothing", "", "", nil, "dev go1.26.8 linux/amd64"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Version: tc.main}}
		for k, v := range tc.set {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: k, Value: v})
		}
		in := base
		in.Version = tc.version
		if got := fromBuildInfo(in, bi).String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestReadNamesToolchain(t *testing.T) {
	if got := Read("dev").String(); !strings.Contains(got, "go1.") {
		t.Fatalf("%q lacks the Go version", got)
	}
}
