package install_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/manifest"
)

// TestOutputLines: a package manager run through the runner hands each line it prints to
// OutputLine as it prints it (stdout and stderr, a meter's \r-redrawn line too), a line longer
// than any progress line is cut, blank lines are not handed on, and a failure's error still ends
// with the last lines.
func TestOutputLines(t *testing.T) {
	t.Parallel()
	pathDir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
echo "Reading package lists..."
printf '\n   \n'
printf 'Progress: [ 10%%%%]\rProgress: [ 90%%%%]\r'
echo "Unpacking clihosttesttool (1.0.0) ..." >&2
head -c 5000 /dev/zero | tr '\0' 'x'; echo
mkdir -p %[1]s && printf '#!/bin/sh\necho clihosttesttool 1.0.0\n' > %[1]s/clihosttesttool && chmod 755 %[1]s/clihosttesttool
printf 'Setting up clihosttesttool (1.0.0) ...'
`, pathDir)
	writeExec(t, filepath.Join(pathDir, "apt-get"), []byte(script))
	o := options(t)
	o.Privileged = true
	o.LookupEnv = envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin"})
	var mu sync.Mutex
	var lines []string
	o.OutputLine = func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	if _, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "apt", Package: "tool-pkg"}), o); err != nil {
		t.Fatal(err)
	}
	want := []string{"Reading package lists...", "Progress: [ 10%]", "Progress: [ 90%]", "Unpacking clihosttesttool (1.0.0) ...", strings.Repeat("x", 512), "Setting up clihosttesttool (1.0.0) ..."}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines\n%q\nwant\n%q", lines, want)
	}

	failDir := t.TempDir()
	writeExec(t, filepath.Join(failDir, "apt-get"), []byte("#!/bin/sh\necho 'Reading package lists...'\necho 'E: Unable to locate package tool-pkg' >&2\nexit 100\n"))
	o.LookupEnv = envOf(map[string]string{"PATH": failDir + ":/usr/bin:/bin"})
	lines = nil
	_, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "apt", Package: "tool-pkg"}), o)
	if err == nil || !strings.Contains(err.Error(), "exit status 100: Reading package lists... | E: Unable to locate package tool-pkg") {
		t.Errorf("a failing apt-get: %v", err)
	}
	if len(lines) < 2 || lines[len(lines)-1] != "E: Unable to locate package tool-pkg" { // apt-get may run again after an update
		t.Errorf("failing lines %q", lines)
	}
}
