// Command pkg builds clihost's Debian and RPM packages from the repository with nfpm:
// dist/clihost_VERSION_amd64.deb and dist/clihost-VERSION-1.x86_64.rpm, each carrying clihostd,
// clihostctl and the clihost-sandbox helper side by side in /usr/bin (the daemon and clihostctl
// look for the helper beside their own executable), the systemd unit, the service user's
// sysusers.d entry, clihostctl's manual pages and bash, zsh and fish completions, the files of
// deploy/etc as configuration files, and the maintainer scripts of deploy/pkg/scripts.
//
// Run it from anywhere in the repository (it is its own module, so that nfpm's dependencies stay
// out of clihost's): go -C deploy/pkg run . [-version V] [-out DIR] [-formats deb,rpm].
// The version is the module version git describes (see version.go) unless -version names one.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "", "package version (default: from git, like a Go module version)")
	flag.StringVar(&o.out, "out", "", "output folder (default: dist/ at the repository root)")
	flag.StringVar(&o.formats, "formats", "deb,rpm", "comma-separated package formats: deb, rpm")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: go -C deploy/pkg run . [-version V] [-out DIR] [-formats deb,rpm]")
		os.Exit(2)
	}
	paths, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pkg:", err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println(p)
	}
}

// options are the command line.
type options struct {
	version, out, formats string
}

// run builds the binaries once and then each package; it returns the packages' paths.
func run(o options) ([]string, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if o.version == "" {
		if o.version, err = gitVersion(root); err != nil {
			return nil, err
		}
	}
	if err := checkVersion(o.version); err != nil {
		return nil, err
	}
	if o.out == "" {
		o.out = filepath.Join(root, "dist")
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "clihost-pkg-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if err := buildBinaries(root, work, o.version); err != nil {
		return nil, err
	}
	unit, err := packagedUnit(root, work)
	if err != nil {
		return nil, err
	}
	share, err := generateShare(work, work)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	var built []string
	for _, format := range strings.Split(o.formats, ",") {
		p, err := writePackage(layout{root: root, bin: work, unit: unit, share: share}, strings.TrimSpace(format), o.version, o.out)
		if err != nil {
			return nil, err
		}
		built = append(built, p)
	}
	return built, nil
}

// repoRoot is the top of the git checkout this program runs in.
func repoRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("finding the repository root (git rev-parse --show-toplevel): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// binaries are the commands packaged into /usr/bin, in the repository's cmd/.
var binaries = []string{"clihostd", "clihostctl", "clihost-sandbox"}

// buildBinaries builds the commands for linux/amd64 with CGO_ENABLED=0 into dir, stamped with
// version (main.version) and without the build machine's paths (-trimpath).
func buildBinaries(root, dir, version string) error {
	args := []string{"build", "-trimpath", "-ldflags", "-X main.version=" + version, "-o", dir + "/"}
	for _, b := range binaries {
		args = append(args, "./cmd/"+b)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", strings.Join(binaries, " "), err)
	}
	return nil
}
