package install_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clihost/clihost/install"
	"github.com/clihost/clihost/internal/fixture"
	"github.com/clihost/clihost/manifest"
)

// stub writes a stand-in package manager into dir: it records its arguments and environment in
// dir/<name>.args and dir/<name>.env, then writes the tool into target (when target is set) and
// exits with status code.
func stub(t *testing.T, dir, name, target string, code int) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$*\" > %[1]s/%[2]s.args\nenv > %[1]s/%[2]s.env\n", dir, name)
	if target != "" {
		script += fmt.Sprintf("mkdir -p %[1]s\nprintf '#!/bin/sh\\necho clihosttesttool 1.0.0\\n' > %[1]s/%[2]s\nchmod 755 %[1]s/%[2]s\n", target, binName)
	}
	if code != 0 {
		script += fmt.Sprintf("echo 'E: Unable to locate package' >&2\nexit %d\n", code)
	}
	writeExec(t, filepath.Join(dir, name), []byte(script))
}

func TestPackageManagers(t *testing.T) {
	t.Parallel()
	yes := true
	cases := []struct {
		entry      manifest.InstallMethod
		tool       string
		privileged bool
		args       string                                    // the recorded command line; {prefix} is the bundle's prefix
		target     func(pathDir, home, prefix string) string // where the stub drops the tool
		env        string                                    // a variable the command must get
	}{
		{manifest.InstallMethod{Method: "apt", Package: "tool-pkg"}, "apt-get", true,
			"install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg", func(p, _, _ string) string { return p }, "DEBIAN_FRONTEND=noninteractive"},
		{manifest.InstallMethod{Method: "dnf", Package: "tool-pkg"}, "dnf", true,
			"install -y tool-pkg", func(p, _, _ string) string { return p }, ""},
		{manifest.InstallMethod{Method: "pacman", Package: "tool-pkg"}, "pacman", true,
			"-S --noconfirm tool-pkg", func(p, _, _ string) string { return p }, ""},
		{manifest.InstallMethod{Method: "brew", Package: "owner/tap/tool"}, "brew", false,
			"install owner/tap/tool", func(p, _, _ string) string { return p }, "NONINTERACTIVE=1"},
		{manifest.InstallMethod{Method: "choco", Package: "tool"}, "choco", false,
			"install -y tool", func(p, _, _ string) string { return p }, ""},
		{manifest.InstallMethod{Method: "scoop", Package: "tool"}, "scoop", false,
			"install tool", func(p, _, _ string) string { return p }, ""},
		{manifest.InstallMethod{Method: "pip", Package: "tool-py"}, "pip", true,
			"install tool-py", func(p, _, _ string) string { return p }, "PIP_NO_INPUT=1"},
		{manifest.InstallMethod{Method: "pip", Package: "tool-py", User: &yes}, "pip3", false,
			"install --user tool-py", func(_, h, _ string) string { return h + "/.local/bin" }, ""},
		{manifest.InstallMethod{Method: "cargo", Package: "tool-rs"}, "cargo", false,
			"install --root {prefix} tool-rs", func(_, _, pr string) string { return pr + "/bin" }, ""},
		{manifest.InstallMethod{Method: "npm", Package: "@scope/tool", Global: &yes}, "npm", false,
			"install --prefix {prefix} @scope/tool", func(_, _, pr string) string { return pr + "/node_modules/.bin" }, "npm_config_fund=false"},
	}
	for _, c := range cases {
		t.Run(c.entry.Method+" "+c.tool, func(t *testing.T) {
			t.Parallel()
			pathDir, home := t.TempDir(), t.TempDir()
			o := options(t)
			o.Privileged = c.privileged
			o.LookupEnv = envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin", "HOME": home, "SECRET_TOKEN": "x"})
			prefix := filepath.Join(o.StateDir, "prefix", key)
			target := c.target(pathDir, home, prefix)
			stub(t, pathDir, c.tool, target, 0)
			res, err := install.Install(context.Background(), bundle(c.entry), o)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(target, binName); res.BinPath != want {
				t.Errorf("BinPath %s, want %s", res.BinPath, want)
			}
			args, _ := os.ReadFile(filepath.Join(pathDir, c.tool+".args"))
			if want := strings.ReplaceAll(c.args, "{prefix}", prefix); strings.TrimSpace(string(args)) != want {
				t.Errorf("command line %q, want %q", strings.TrimSpace(string(args)), want)
			}
			env, _ := os.ReadFile(filepath.Join(pathDir, c.tool+".env"))
			if strings.Contains(string(env), "SECRET_TOKEN") || !strings.Contains(string(env), "HOME="+home) ||
				(c.env != "" && !strings.Contains(string(env), c.env+"\n")) {
				t.Errorf("environment lacks %q or passes too much:\n%s", c.env, env)
			}
		})
	}
}

func TestPackageManagerSkipsAndFailures(t *testing.T) {
	t.Parallel()
	pathDir := t.TempDir()
	stub(t, pathDir, "apt-get", pathDir, 0)
	stub(t, pathDir, "brew", "", 100) // fails
	stub(t, pathDir, "cargo", "", 0)  // succeeds but installs nothing
	o := options(t)
	o.LookupEnv = envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin"})
	res, err := install.Install(context.Background(), bundle(
		manifest.InstallMethod{Method: "apt", Package: "tool"},
		manifest.InstallMethod{Method: "dnf", Package: "tool"},
		manifest.InstallMethod{Method: "brew", Package: "tool"},
		manifest.InstallMethod{Method: "cargo", Package: "tool"},
		manifest.InstallMethod{Method: "scoop", Package: "tool"},
		manifest.InstallMethod{Method: "pip"},
	), o)
	if !errors.Is(err, install.ErrInstallFailed) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(pathDir, "apt-get.args")); err == nil {
		t.Error("apt-get ran without Privileged")
	}
	for i, want := range []string{
		"skipped: apt-get needs root and this host is not privileged",
		"skipped: dnf needs root",
		"brew install tool: exit status 100: E: Unable to locate package",
		"the install finished but clihosttesttool is not in " + filepath.Join(o.StateDir, "prefix", key, "bin") + " or on PATH",
		"skipped: scoop not found on PATH",
		"the entry has no package",
	} {
		if !strings.Contains(res.Skipped[i].Reason, want) || !strings.Contains(err.Error(), want) {
			t.Errorf("Skipped[%d] = %q, want %q in it and in the error", i, res.Skipped[i].Reason, want)
		}
	}
}

func TestNpmLocalTarball(t *testing.T) {
	t.Parallel()
	fixture.Need(t, "npm")
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal(err)
	}
	work, home := t.TempDir(), t.TempDir()
	pkg := filepath.Join(work, "pkg")
	os.MkdirAll(filepath.Join(pkg, "bin"), 0o755)
	os.WriteFile(filepath.Join(pkg, "package.json"),
		[]byte(`{"name":"clihosttesttool","version":"1.0.0","bin":{"clihosttesttool":"bin/cli.js"}}`), 0o644)
	writeExec(t, filepath.Join(pkg, "bin", "cli.js"), []byte("#!/usr/bin/env node\nconsole.log('clihosttesttool 1.0.0')\n"))
	offline := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "npm_config_registry=http://127.0.0.1:9/", "npm_config_update_notifier=false"}
	pack := exec.Command(npm, "pack", "--pack-destination", work)
	pack.Dir, pack.Env = pkg, offline
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("npm pack: %v\n%s", err, out)
	}
	tarball := filepath.Join(work, "clihosttesttool-1.0.0.tgz")

	o := options(t)
	o.LookupEnv = envOf(map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "npm_config_registry": "http://127.0.0.1:9/"})
	res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "npm", Package: tarball}), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(o.StateDir, "prefix", key, "node_modules", ".bin", binName); res.BinPath != want {
		t.Errorf("BinPath %s, want %s", res.BinPath, want)
	}
	if got := runBin(t, res.BinPath); got != "clihosttesttool 1.0.0" {
		t.Errorf("output %q", got)
	}
}

func TestGoInstallFromBundleFolder(t *testing.T) {
	t.Parallel()
	fixture.Slow(t) // builds the standard library into a fresh cache
	fixture.Need(t, "go")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "cmd", binName), 0o755)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/clihosttesttool\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cmd", binName, "main.go"),
		[]byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"clihosttesttool 1.0.0\") }\n"), 0o644)
	os.MkdirAll(filepath.Join(filepath.Dir(dir), "outside"), 0o755) // inside the test's temporary root
	b := bundle(
		manifest.InstallMethod{Method: "go", Package: "./../outside"},
		manifest.InstallMethod{Method: "go", Package: "./cmd/" + binName},
	)
	b.OSDir = dir
	o := options(t)
	// Offline: no proxy, and the toolchain on PATH whatever go.mod says.
	o.LookupEnv = envOf(map[string]string{"PATH": filepath.Dir(goBin) + ":/usr/bin:/bin", "HOME": t.TempDir(),
		"GOPROXY": "off", "GOTOOLCHAIN": "local"})
	res, err := install.Install(context.Background(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(install.BinDir(o.StateDir, key), binName); res.BinPath != want {
		t.Errorf("BinPath %s, want %s", res.BinPath, want)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "outside the bundle folder") {
		t.Errorf("Skipped = %+v", res.Skipped)
	}
	if got := runBin(t, res.BinPath); got != "clihosttesttool 1.0.0" {
		t.Errorf("output %q", got)
	}
	assertNoTemp(t, o.StateDir)
}

// TestAptRefreshesListsOnce: on a fresh machine apt has no package lists, so a failed install runs
// apt-get update and tries once more.
func TestAptRefreshesListsOnce(t *testing.T) {
	pathDir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
update) touch %[1]s/updated; echo "$*" >> %[1]s/calls ;;
install)
  echo "$*" >> %[1]s/calls
  [ -f %[1]s/updated ] || { echo 'E: Unable to locate package tool-pkg' >&2; exit 100; }
  printf '#!/bin/sh\necho clihosttesttool 1.0.0\n' > %[1]s/%[2]s; chmod 755 %[1]s/%[2]s ;;
esac
`, pathDir, binName)
	writeExec(t, filepath.Join(pathDir, "apt-get"), []byte(script))
	o := options(t)
	o.Privileged = true
	o.LookupEnv = envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin", "HOME": t.TempDir()})
	res, err := install.Install(context.Background(), bundle(manifest.InstallMethod{Method: "apt", Package: "tool-pkg"}), o)
	if err != nil || res.Method != "apt" {
		t.Fatalf("install: %+v %v", res, err)
	}
	calls, _ := os.ReadFile(filepath.Join(pathDir, "calls"))
	if got := strings.Fields(strings.ReplaceAll(string(calls), "\n", " | ")); strings.Join(got, " ") != "install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg | update -q | install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg |" {
		t.Fatalf("apt-get calls: %q", calls)
	}
}

// TestNeedsRootHandOff walks a bundle as an unprivileged daemon does for `sudo clihostctl install`:
// the download-free entries before the first one that needs root are tried, the walk stops there
// with a *NeedsRootError naming it (nothing ran), and a walk resumed past it (From) goes on.
// Without HandOff the same entry is skipped, its Skip naming the program that needs root.
func TestNeedsRootHandOff(t *testing.T) {
	t.Parallel()
	pathDir := t.TempDir()
	stub(t, pathDir, "apt-get", pathDir, 0)
	stub(t, pathDir, "brew", "", 100) // fails
	o := options(t)
	o.LookupEnv = envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin"})
	b := bundle(
		manifest.InstallMethod{Method: "brew", Package: "tool"},
		manifest.InstallMethod{Method: "apt", Package: "tool-pkg"},
		manifest.InstallMethod{Method: "pip", Package: "tool-py"},
		manifest.InstallMethod{Method: "scoop", Package: "tool"},
	)
	o.HandOff = true
	res, err := install.Install(context.Background(), b, o)
	var nr *install.NeedsRootError
	if !errors.As(err, &nr) || nr.Index != 1 || nr.Method != "apt" || nr.Package != "tool-pkg" || nr.Tool != "apt-get" {
		t.Fatalf("hand-off: err = %v (%+v)", err, nr)
	}
	if errors.Is(err, install.ErrInstallFailed) || len(res.Skipped) != 1 || res.Skipped[0].Method != "brew" {
		t.Fatalf("hand-off: the walk before it: %+v, err %v", res.Skipped, err)
	}
	if _, err := os.Stat(filepath.Join(pathDir, "apt-get.args")); err == nil {
		t.Fatal("apt-get ran in an unprivileged install")
	}
	o.From = 2
	if _, err := install.Install(context.Background(), b, o); !errors.As(err, &nr) || nr.Index != 2 || nr.Tool != "pip" {
		t.Fatalf("resumed at 2: err = %v", err)
	}
	o.From = 3
	if _, err := install.Install(context.Background(), b, o); !errors.Is(err, install.ErrInstallFailed) || errors.As(err, &nr) {
		t.Fatalf("resumed at 3: err = %v", err)
	}

	o.HandOff, o.From = false, 0
	res, err = install.Install(context.Background(), b, o)
	if !errors.Is(err, install.ErrInstallFailed) {
		t.Fatalf("no hand-off: err = %v", err)
	}
	var got []string
	for _, s := range res.Skipped {
		got = append(got, s.NeedsRoot)
	}
	if strings.Join(got, ",") != ",apt-get,pip," {
		t.Fatalf("Skip.NeedsRoot = %q", got)
	}
}

// TestRunEntry runs a root entry as clihostctl does under sudo: refused unless Privileged or for an
// entry that does not need root; run, it streams the package manager's output and its sanitized
// environment, and Find then locates the binary the way the daemon does before recording it.
func TestRunEntry(t *testing.T) {
	t.Parallel()
	pathDir, binDir := t.TempDir(), t.TempDir()
	stub(t, pathDir, "apt-get", binDir, 0)
	env := envOf(map[string]string{"PATH": pathDir + ":" + binDir + ":/usr/bin:/bin", "SECRET_TOKEN": "x"})
	b := bundle(
		manifest.InstallMethod{Method: "download", URL: "http://127.0.0.1:1/x"},
		manifest.InstallMethod{Method: "apt", Package: "tool-pkg"},
		manifest.InstallMethod{Method: "apt", Package: "-oDebug::pkgProblemResolver=1"},
		manifest.InstallMethod{Method: "apt", Package: "uidmap-"},
	)
	if _, err := install.Find(b, 1, install.Options{LookupEnv: env}); err == nil {
		t.Fatal("Find found a binary before the install")
	}
	var nr *install.NeedsRootError
	if _, err := install.RunEntry(context.Background(), b, 1, install.Options{LookupEnv: env}); !errors.As(err, &nr) {
		t.Fatalf("unprivileged RunEntry: err = %v", err)
	}
	if _, err := install.RunEntry(context.Background(), b, 0, install.Options{LookupEnv: env, Privileged: true}); err == nil ||
		!strings.Contains(err.Error(), "install[0] is not a package-manager entry that needs root") {
		t.Fatalf("RunEntry of a download: err = %v", err)
	}
	if _, err := install.RunEntry(context.Background(), b, 2, install.Options{LookupEnv: env, Privileged: true}); err == nil ||
		!strings.Contains(err.Error(), "would be read as an option") {
		t.Fatalf("RunEntry of an option-like package: err = %v", err)
	}
	// apt-get install reads a trailing hyphen as "remove this package".
	if _, err := install.RunEntry(context.Background(), b, 3, install.Options{LookupEnv: env, Privileged: true}); err == nil ||
		!strings.Contains(err.Error(), "remove") {
		t.Fatalf("RunEntry of package uidmap-: err = %v", err)
	}
	var out strings.Builder
	res, err := install.RunEntry(context.Background(), b, 1, install.Options{LookupEnv: env, Privileged: true, Output: &out})
	if err != nil || res.Index != 1 || res.Method != "apt" || res.BinPath != filepath.Join(binDir, binName) {
		t.Fatalf("RunEntry: %+v, %v", res, err)
	}
	args, _ := os.ReadFile(filepath.Join(pathDir, "apt-get.args"))
	envFile, _ := os.ReadFile(filepath.Join(pathDir, "apt-get.env"))
	if strings.TrimSpace(string(args)) != "install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg" ||
		strings.Contains(string(envFile), "SECRET_TOKEN") || !strings.Contains(string(envFile), "DEBIAN_FRONTEND=noninteractive") {
		t.Fatalf("apt-get ran with %q and\n%s", args, envFile)
	}
	if p, err := install.Find(b, 1, install.Options{LookupEnv: env}); err != nil || p != res.BinPath {
		t.Fatalf("Find = %q, %v", p, err)
	}

	stub(t, pathDir, "apt-get", "", 100)
	out.Reset()
	if _, err := install.RunEntry(context.Background(), b, 1, install.Options{LookupEnv: env, Privileged: true, Output: &out}); err == nil ||
		!strings.Contains(err.Error(), "apt-get install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg: exit status 100: E: Unable to locate package") ||
		!strings.Contains(out.String(), "E: Unable to locate package") {
		t.Fatalf("a failing apt-get: err = %v, output %q", err, out.String())
	}
}

// TestAptInstallsNativeNeeds: an apt entry installs the runner's needs.native packages (Debian
// names, AIP-17) with the bundle's own package; names that are not package names (an option, or
// a name ending in "-", which apt-get install reads as "remove this package") are never passed,
// and apt-get reads every name as a name, never as a regular expression or a glob (apt 2.6 reads
// "lib.+" as every package matching it); an engine: sandbox runner's needs are its image's.
func TestAptInstallsNativeNeeds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		engine, want string
	}{
		{"", "install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg libcairo2 fonts-dejavu-core"},
		{"sandbox", "install -y --no-install-recommends -o APT::Cmd::Pattern-Only=true tool-pkg"},
	} {
		pathDir := t.TempDir()
		o := options(t)
		o.Privileged = true
		o.LookupEnv = envOf(map[string]string{"PATH": pathDir + ":/usr/bin:/bin"})
		stub(t, pathDir, "apt-get", pathDir, 0)
		b := bundle(manifest.InstallMethod{Method: "apt", Package: "tool-pkg"})
		b.CLI.Runner = &manifest.RunnerRef{Block: &manifest.Runner{Engine: tc.engine, Image: "i",
			Needs: &manifest.RunnerNeeds{Native: []string{"libcairo2", "--allow-unauthenticated", "uidmap-", "uidmap:amd64-", "fonts-dejavu-core"}}}}
		if _, err := install.Install(context.Background(), b, o); err != nil {
			t.Fatal(err)
		}
		args, _ := os.ReadFile(filepath.Join(pathDir, "apt-get.args"))
		if got := strings.TrimSpace(string(args)); got != tc.want {
			t.Errorf("engine %q: apt-get %q, want %q", tc.engine, got, tc.want)
		}
	}
}
