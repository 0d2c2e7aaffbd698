package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPackageHasManPagesAndCompletions: an operator who installs the .deb gets `man clihostctl`
// (and a page per command) and tab completion in bash, zsh and fish without running clihostctl
// man or completion by hand, as the gh and kubectl packages do. The package is built for real
// (the binaries too) and listed with dpkg-deb.
func TestPackageHasManPagesAndCompletions(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("dpkg-deb is missing")
		}
		t.Skip("dpkg-deb is missing")
	}
	paths, err := run(options{version: "1.2.3", out: t.TempDir(), formats: "deb"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("dpkg-deb", "-c", paths[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, out)
	}
	for _, want := range []string{
		" ./usr/share/man/man1/clihostctl.1.gz\n",
		" ./usr/share/man/man1/clihostctl-status.1.gz\n",
		" ./usr/share/bash-completion/completions/clihostctl\n",
		" ./usr/share/zsh/vendor-completions/_clihostctl\n",
		" ./usr/share/fish/vendor_completions.d/clihostctl.fish\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the package lacks %s", strings.TrimSpace(want))
		}
	}
}
