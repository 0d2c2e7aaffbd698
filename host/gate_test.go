package host

import (
	"testing"

	"github.com/clihost/clihost/manifest"
)

// TestInstallHint: the hint names the first two install methods a user can run by hand, in the
// bundle's order, skipping the others; with none, it says to put the binary on PATH.
func TestInstallHint(t *testing.T) {
	for _, c := range []struct {
		install []manifest.InstallMethod
		want    string
	}{
		{nil, "install foo so that it is on PATH"},
		{[]manifest.InstallMethod{{Method: manifest.MethodCurl, URL: "https://example.com/x.sh"}}, "install foo so that it is on PATH"},
		{[]manifest.InstallMethod{{Method: manifest.MethodCargo, Package: "foo-cli"}}, "install it, e.g. cargo install foo-cli"},
		{[]manifest.InstallMethod{
			{Method: manifest.MethodVendored, Path: "./bin/foo"},
			{Method: manifest.MethodApt, Package: "foo"},
			{Method: manifest.MethodNpm, Package: "@x/foo"},
			{Method: manifest.MethodPip, Package: "foo"},
		}, "install it, e.g. apt-get install foo or npm install -g @x/foo"},
		{[]manifest.InstallMethod{
			{Method: manifest.MethodBrew, Package: "a"}, {Method: manifest.MethodDnf, Package: "b"},
		}, "install it, e.g. brew install a or dnf install b"},
		{[]manifest.InstallMethod{
			{Method: manifest.MethodGo, Package: "example.com/foo@latest"}, {Method: manifest.MethodChoco, Package: "foo"},
		}, "install it, e.g. go install example.com/foo@latest"},
	} {
		b := &manifest.Bundle{CLI: &manifest.CLI{Bin: "foo", Install: c.install}}
		if got := installHint(b); got != c.want {
			t.Errorf("%+v: %q, want %q", c.install, got, c.want)
		}
	}
}
