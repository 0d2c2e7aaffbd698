package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/clihost/clihost/manifest"
	"github.com/clihost/clihost/runner"
	"github.com/clihost/clihost/sandbox"
)

// toolTimeout bounds one package-manager or go run (cargo and go may compile for a while).
const toolTimeout = 30 * time.Minute

// proxyVars are passed to every installer process: downloads behind a proxy need them.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy"}

// basePass are the host variables every package manager gets.
var basePass = slices.Concat([]string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}, proxyVars)

// toolCommand is the command a package-manager entry runs.
type toolCommand struct {
	tools   []string          // the program, looked up on PATH; the first one found runs
	args    []string          // its arguments
	root    bool              // needs Options.Privileged
	pass    []string          // host variables passed on, besides basePass
	set     map[string]string // variables set
	dir     string            // working directory
	binDirs []string          // where the bin may land, searched before PATH
}

// toolCommand builds the command of a package-manager entry (every method but download, curl,
// vendored and go's run, whose environment goEnv adds).
func (in *installer) toolCommand(e manifest.InstallMethod) toolCommand {
	prefix := filepath.Join(in.o.StateDir, "prefix", in.key)
	c := toolCommand{dir: in.o.StateDir}
	switch e.Method {
	case manifest.MethodApt:
		c.tools, c.root = []string{"apt-get"}, true
		// Pattern-Only: a name is a name, never a regular expression or a glob (apt 2.6 reads
		// "lib.+", which names no package, as every package it matches).
		c.args = append([]string{"install", "-y", "--no-install-recommends", "-o", "APT::Cmd::Pattern-Only=true", e.Package}, manifest.NativeNeeds(in.b.CLI)...)
		c.set = map[string]string{"DEBIAN_FRONTEND": "noninteractive"}
	case manifest.MethodDnf:
		c.tools, c.root = []string{"dnf"}, true
		c.args = []string{"install", "-y", e.Package}
	case manifest.MethodPacman:
		c.tools, c.root = []string{"pacman"}, true
		c.args = []string{"-S", "--noconfirm", e.Package}
	case manifest.MethodBrew:
		c.tools, c.args = []string{"brew"}, []string{"install", e.Package}
		c.pass = []string{"HOMEBREW_PREFIX", "HOMEBREW_CELLAR", "HOMEBREW_REPOSITORY"}
		c.set = map[string]string{"NONINTERACTIVE": "1"}
	case manifest.MethodChoco:
		c.tools, c.args = []string{"choco"}, []string{"install", "-y", e.Package}
	case manifest.MethodScoop:
		c.tools, c.args = []string{"scoop"}, []string{"install", e.Package}
	case manifest.MethodPip:
		c.tools, c.args = []string{"pip", "pip3"}, []string{"install", e.Package}
		// Without --user and outside a virtualenv, pip writes the system's site-packages.
		_, venv := in.o.LookupEnv("VIRTUAL_ENV")
		c.root = (e.User == nil || !*e.User) && !venv
		if e.User != nil && *e.User {
			c.args = []string{"install", "--user", e.Package}
			if home, ok := in.o.LookupEnv("HOME"); ok && filepath.IsAbs(home) {
				c.binDirs = []string{filepath.Join(home, ".local", "bin")}
			}
		}
		c.pass = []string{"VIRTUAL_ENV", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT"}
		c.set = map[string]string{"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
	case manifest.MethodCargo:
		c.tools, c.args = []string{"cargo"}, []string{"install", "--root", prefix, e.Package}
		c.pass = []string{"CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"}
		c.binDirs = []string{filepath.Join(prefix, "bin")}
	case manifest.MethodNpm:
		// global: true is installed into the prefix too: never system-wide.
		c.tools, c.args = []string{"npm"}, []string{"install", "--prefix", prefix, e.Package}
		c.pass = []string{"npm_config_registry", "NPM_CONFIG_REGISTRY", "npm_config_cache", "NPM_CONFIG_CACHE"}
		c.set = map[string]string{"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
		c.dir = prefix
		c.binDirs = []string{filepath.Join(prefix, "node_modules", ".bin"), filepath.Join(prefix, "bin")}
	case manifest.MethodGo:
		pkg := e.Package
		if local := strings.HasPrefix(pkg, "./"); !local && !strings.Contains(pkg, "@") {
			pkg += "@latest" // outside a module, go install needs a version
		} else if local {
			c.dir = in.b.OSDir
		}
		c.tools, c.args = []string{"go"}, []string{"install", pkg}
		c.pass = []string{"GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOINSECURE", "GOTOOLCHAIN"}
	}
	if c.root {
		c.dir = "/" // a system-wide install: nothing of clihost's is its working directory
	}
	return c
}

// packageManager runs a package-manager entry and finds the bin it installed.
func (in *installer) packageManager(ctx context.Context, e manifest.InstallMethod) (string, error) {
	if e.Package == "" {
		return "", errors.New("the entry has no package")
	}
	if strings.HasPrefix(e.Package, "-") {
		return "", fmt.Errorf("package %q starts with '-': it would be read as an option", e.Package)
	}
	if e.Method == manifest.MethodApt && strings.HasSuffix(e.Package, "-") {
		return "", fmt.Errorf("package %q ends with '-': apt-get install would remove the package it names", e.Package)
	}
	c := in.toolCommand(e)
	if c.root && !in.o.Privileged {
		return "", &NeedsRootError{Method: e.Method, Package: e.Package, Tool: c.tools[0]}
	}
	exe, err := in.lookPath(c.tools...)
	if err != nil {
		return "", err
	}
	if e.Method == manifest.MethodBrew {
		c.binDirs = append(c.binDirs, filepath.Dir(exe)) // formulae link next to brew itself
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", err
	}
	env, _ := sandbox.Env(in.o.LookupEnv, slices.Concat(basePass, c.pass), c.set)
	err = in.exec(ctx, exe, c.args, c.dir, env, toolTimeout)
	if err != nil && e.Method == manifest.MethodApt {
		// A fresh machine often has no package lists yet ("Unable to locate package"): refresh them
		// once and try again.
		if uerr := in.exec(ctx, exe, []string{"update", "-q"}, c.dir, env, toolTimeout); uerr == nil {
			err = in.exec(ctx, exe, c.args, c.dir, env, toolTimeout)
		}
	}
	if err != nil {
		return "", err
	}
	return in.findBin(c.binDirs...)
}

// goInstall runs a go entry with GOBIN in a temporary directory, then places the bin it built.
func (in *installer) goInstall(ctx context.Context, e manifest.InstallMethod) (string, error) {
	if e.Package == "" {
		return "", errors.New("the entry has no package")
	}
	c := in.toolCommand(e)
	if strings.HasPrefix(e.Package, "./") {
		if err := in.checkLocalPackage(e.Package); err != nil {
			return "", err
		}
	}
	exe, err := in.lookPath(c.tools...)
	if err != nil {
		return "", err
	}
	tmp, err := in.tempDir()
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	gobin := filepath.Join(tmp, "gobin")
	gohome := filepath.Join(in.o.StateDir, "go")
	env, _ := sandbox.Env(in.o.LookupEnv, slices.Concat(basePass, c.pass), map[string]string{
		"GOBIN":       gobin,
		"GOPATH":      filepath.Join(gohome, "path"),
		"GOCACHE":     filepath.Join(gohome, "cache"),
		"GOFLAGS":     "-mod=mod -modcacherw", // module cache deletable without chmod
		"GOWORK":      "off",
		"CGO_ENABLED": "0",
	})
	if err := in.exec(ctx, exe, c.args, c.dir, env, toolTimeout); err != nil {
		return "", err
	}
	built := filepath.Join(gobin, in.binName())
	if !isExecutable(built) {
		var names []string
		entries, _ := os.ReadDir(gobin)
		for _, d := range entries {
			names = append(names, d.Name())
		}
		return "", fmt.Errorf("go install built %v, not %s", names, in.binName())
	}
	return in.place(built)
}

// checkLocalPackage checks that a "./" go package is a directory inside the bundle folder.
func (in *installer) checkLocalPackage(pkg string) error {
	if in.b.OSDir == "" {
		return fmt.Errorf("skipped: %s is relative to the bundle folder and this bundle is embedded", pkg)
	}
	root, err := filepath.EvalSymlinks(in.b.OSDir)
	if err != nil {
		return fmt.Errorf("bundle folder: %w", err)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(in.b.OSDir, filepath.FromSlash(pkg)))
	if err != nil {
		return fmt.Errorf("go package %s: %w", pkg, err)
	}
	if !within(root, dir) {
		return fmt.Errorf("go package %s resolves to %s, outside the bundle folder %s", pkg, dir, root)
	}
	return nil
}

// vendored checks a vendored entry's binary: an executable regular file inside the bundle folder.
func (in *installer) vendored(e manifest.InstallMethod) (string, error) {
	switch {
	case in.b.OSDir == "":
		return "", errors.New("skipped: the bundle is embedded (no folder on disk to hold a vendored binary)")
	case e.Path == "":
		return "", errors.New("the entry has no path")
	case filepath.IsAbs(e.Path) || isAbs(e.Path):
		return "", fmt.Errorf("path %q must be relative to the bundle folder", e.Path)
	}
	root, err := filepath.EvalSymlinks(in.b.OSDir)
	if err != nil {
		return "", fmt.Errorf("bundle folder: %w", err)
	}
	p, err := filepath.EvalSymlinks(filepath.Join(in.b.OSDir, filepath.FromSlash(e.Path)))
	if err != nil {
		return "", fmt.Errorf("vendored binary %s: %w", e.Path, err)
	}
	if !within(root, p) {
		return "", fmt.Errorf("vendored binary %s resolves to %s, outside the bundle folder %s", e.Path, p, root)
	}
	st, err := os.Stat(p)
	switch {
	case err != nil:
		return "", fmt.Errorf("vendored binary %s: %w", e.Path, err)
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("vendored binary %s is not a regular file", e.Path)
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("vendored binary %s is not executable (chmod +x it in the bundle)", e.Path)
	}
	return p, nil
}

// within reports whether p is root or inside it (both cleaned, symlinks resolved).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// exec runs an installer process through runner and turns an unsuccessful run into an error that
// ends with the last lines of its output.
func (in *installer) exec(ctx context.Context, exe string, args []string, dir string, env []string, timeout time.Duration) error {
	line := strings.Join(append([]string{filepath.Base(exe)}, args...), " ")
	in.log.Info("running installer", "bundle", in.key, "cmd", line)
	if in.o.Output != nil {
		return in.execStreaming(ctx, exe, args, dir, env, timeout, line)
	}
	cmd := runner.Command{Path: exe, Args: args, Dir: dir, Env: env, Timeout: timeout, StdoutLimit: 1 << 20, StderrLimit: 1 << 20}
	var lines *lineWriter
	if in.o.OutputLine != nil {
		lines = &lineWriter{emit: in.o.OutputLine}
		cmd.Attach = &runner.Attach{Stdout: lines, Stderr: lines}
	}
	r, err := runner.Run(ctx, cmd)
	if lines != nil {
		lines.flush()
		r.Stderr = lines.last.b // what an error ends with
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", line, err)
	case r.Canceled:
		return fmt.Errorf("%s: stopped: %w", line, ctx.Err())
	case r.TimedOut:
		return fmt.Errorf("%s: did not finish within %s", line, timeout)
	case r.ExitCode != 0 && r.Signal != "":
		return fmt.Errorf("%s: killed by %s%s", line, r.Signal, tail(r.Stderr, r.Stdout))
	case r.ExitCode != 0:
		return fmt.Errorf("%s: exit status %d%s", line, r.ExitCode, tail(r.Stderr, r.Stdout))
	}
	return nil
}

// tail is ": " and the last few non-empty lines of the first non-empty output, on one line.
func tail(outputs ...[]byte) string {
	for _, out := range outputs {
		var lines []string
		for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			if l = bytes.TrimSpace(l); len(l) > 0 {
				lines = append(lines, string(l))
			}
		}
		if len(lines) == 0 {
			continue
		}
		lines = lines[max(0, len(lines)-3):]
		s := strings.Join(lines, " | ")
		if len(s) > 600 {
			s = "…" + strings.ToValidUTF8(s[len(s)-600:], "")
		}
		return ": " + s
	}
	return ""
}
